"""The optional LLM environment validator: `spade-validate --judge`.

The release's tool-use launcher turns on an environment validator: the model under
training reads a generated environment and answers \\boxed{yes} (fit for training) or
\\boxed{no} (a fatal bug: unsolvable or unwinnable), leniently, for what code execution
cannot catch. Here the judge sees the code and one trajectory that validation played
(the first seed's random-policy episode, cut to a few turns) under a fixed prompt
(prompts/judge.md). Only environments that passed every check are judged; `no` turns the
verdict into `judged_invalid`; an answer with neither (or an empty one) leaves the
environment valid, as the release does. The judge's answer is recorded in
`validation.judge` {verdict: yes|no|none, text, trajectory}.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..records import seed_for
from .actions import strip_thinking

TURNS_SHOWN = 5
CHARS_SHOWN = 400
_VERDICT = re.compile(r"\\boxed\{\s*(yes|no|y|n|true|false)\s*\}", re.IGNORECASE)


def load_template(path: str | None = None) -> str:
    if path:
        return Path(path).read_text(encoding="utf-8")
    return resources.files("spade_cli.prompts").joinpath("judge.md").read_text(encoding="utf-8")


def _cut(text: str) -> str:
    return text if len(text) <= CHARS_SHOWN else text[:CHARS_SHOWN] + " ..."


def trajectory_of(episode: Any) -> list[dict]:
    """One validation episode (checks.CheckEpisode) as the judge's record of it: the
    first observation, then each step's action, reward and observation, cut short."""
    steps = [{"observation": _cut(episode.observation)}]
    for action, obs, reward, terminated, truncated in episode.steps[:TURNS_SHOWN]:
        steps.append(
            {
                "action": _cut(action),
                "reward": reward,
                "observation": _cut(obs),
                "ended": bool(terminated or truncated),
            }
        )
    return steps


def trajectory_text(steps: list[dict]) -> str:
    lines = [f"Initial observation:\n{steps[0]['observation']}"] if steps else []
    for n, s in enumerate(steps[1:], start=1):
        lines.append(
            f"Turn {n}: action {s['action']!r} -> reward {s['reward']:g}"
            f"{' (episode over)' if s['ended'] else ''}\n{s['observation']}"
        )
    return "\n\n".join(lines) or "(no episode)"


def judge_prompt(template: str, rec: dict, max_code_chars: int = 12000) -> str:
    env = rec["env"]
    code = (
        env["code"]
        if len(env["code"]) <= max_code_chars
        else env["code"][:max_code_chars] + "\n# ... (cut)"
    )
    steps = (rec.get("validation") or {}).get("trajectory") or []
    return template.format(
        name=env.get("name") or "environment",
        code=code,
        trajectory=trajectory_text(steps),
        tool_note=" and tool results"
        if env.get("tools") or env.get("action_format") == "tool_call"
        else "",
    )


def verdict_of(text: str) -> str:
    """yes, no, or none (no boxed verdict): the last boxed answer counts."""
    found = _VERDICT.findall(strip_thinking(text or ""))
    if not found:
        return "none"
    return "yes" if found[-1].lower() in ("yes", "y", "true") else "no"


def _is_judged(rec: dict) -> bool:
    v = rec.get("validation") or {}
    return v.get("valid") is True and isinstance((rec.get("env") or {}).get("code"), str)


def judge_records(
    records: Iterable[dict],
    engine: Any,
    sampling: Any,
    *,
    template: str,
    seed: int = 0,
    batch: int = 16,
) -> Iterator[dict]:
    """Every record, in order; the valid ones judged, `batch` per engine call."""
    buf: list[dict] = []
    for rec in records:
        buf.append(rec)
        if sum(map(_is_judged, buf)) >= batch:
            yield from _judge_batch(buf, engine, sampling, template, seed)
            buf = []
    yield from _judge_batch(buf, engine, sampling, template, seed)


def _judge_batch(
    buf: list[dict], engine: Any, sampling: Any, template: str, seed: int
) -> list[dict]:
    todo = [i for i, r in enumerate(buf) if _is_judged(r)]
    if not todo:
        return [_without_trajectory(r) for r in buf]
    prompts = [[{"role": "user", "content": judge_prompt(template, buf[i])}] for i in todo]
    samplings = [
        replace(sampling, seed=seed_for(seed, "judge", str(buf[i].get("id")))) for i in todo
    ]
    out = [_without_trajectory(r) for r in buf]
    for i, gen in zip(todo, engine.chat(prompts, samplings), strict=True):
        rec = out[i]
        verdict = verdict_of(gen.text)
        validation = dict(rec["validation"])
        validation["judge"] = {
            "verdict": verdict,
            "text": gen.text[-2000:],
            "trajectory": buf[i]["validation"].get("trajectory") or [],
        }
        if verdict == "no":
            validation.update(
                valid=False,
                reason="judged_invalid",
                detail="the judge model answered \\boxed{no}: "
                + " ".join(strip_thinking(gen.text).split())[-300:],
            )
            validation.pop("feasibility", None)
            if rec.get("origin", "design") == "design":  # its env came from validation
                rec = {k: v for k, v in rec.items() if k != "env"}
        out[i] = {**rec, "validation": validation}
    return out


def _without_trajectory(rec: dict) -> dict:
    v = rec.get("validation")
    if not isinstance(v, dict) or "trajectory" not in v:
        return rec
    return {**rec, "validation": {k: x for k, x in v.items() if k != "trajectory"}}
