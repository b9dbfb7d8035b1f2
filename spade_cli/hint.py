"""Hints written by the model: the `spade-hint` stage's library.

The published recipe has the policy model read each validated environment's source
under a fixed hint prompt (packaged: prompts/hint.md) and write a 1-3 sentence hint:
the key insight and the expected answer format, never the answer. The hinted rollout
condition appends it to the first observation. A hint that contains the environment's
verified solution (envs.leaks.hint_leak, against the solutions of the seeds validation
checked) is rejected and regenerated, up to `attempts` generations in all; then the
candidate keeps the last try marked `ok: false`, and its hinted episodes play without
a hint. The generation's token ids are recorded for inspection only: `spade-train`
builds samples from `design` and `rollouts`, never from `hint`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from .envs.actions import strip_thinking
from .envs.leaks import hint_leak
from .records import seed_for

TOOL_RULES = (
    "- This is a tool-use environment: describe the phases of the task and the role "
    "of each tool, with placeholders such as <id> or <amount> instead of concrete "
    "values.\n"
)


def load_template(path: str | None = None) -> str:
    if path:
        return Path(path).read_text(encoding="utf-8")
    return resources.files("spade_cli.prompts").joinpath("hint.md").read_text(encoding="utf-8")


def hint_prompt(template: str, cand: dict, max_code_chars: int) -> str:
    env = cand["env"]
    code = env["code"]
    if len(code) > max_code_chars:
        code = code[:max_code_chars] + "\n# ... (cut)"
    tools = bool(env.get("tools"))
    return template.format(
        name=env.get("name") or "environment",
        code=code,
        tool_note=" and the tools it offers" if tools else "",
        tool_rules=TOOL_RULES if tools else "",
    )


def clean(text: str) -> str:
    """The hint itself: thinking removed, a leading 'Hint:' label dropped, one line."""
    text = " ".join(strip_thinking(text).split())
    for label in ("hint:", "the hint:"):
        if text.casefold().startswith(label):
            text = text[len(label) :].strip()
    return text


def is_target(cand: dict) -> bool:
    return (cand.get("validation") or {}).get("valid") is True and isinstance(
        (cand.get("env") or {}).get("code"), str
    )


def add_hints(
    cands: Iterable[dict],
    engine: Any,
    sampling: Any,
    solutions_of: Callable[[dict], list[list[str]]],
    *,
    template: str,
    attempts: int = 3,
    max_code_chars: int = 12000,
    seed: int = 0,
    batch: int = 16,
) -> Iterator[dict]:
    """Every candidate, in order; the valid ones with `hint` added. Candidates are
    hinted `batch` at a time: one engine call per attempt over those still needing one."""
    buf: list[dict] = []
    for cand in cands:
        buf.append(cand)
        if sum(map(is_target, buf)) >= batch:
            yield from _hint_batch(
                buf, engine, sampling, solutions_of, template, attempts, max_code_chars, seed
            )
            buf = []
    yield from _hint_batch(
        buf, engine, sampling, solutions_of, template, attempts, max_code_chars, seed
    )


def _hint_batch(
    buf, engine, sampling, solutions_of, template, attempts, max_code_chars, seed
) -> list[dict]:
    todo = {i: c for i, c in enumerate(buf) if is_target(c)}
    prompts = {
        i: [{"role": "user", "content": hint_prompt(template, c, max_code_chars)}]
        for i, c in todo.items()
    }
    sols = {i: solutions_of(c) for i, c in todo.items()}
    result: dict[int, dict] = {}
    left = list(todo)
    for attempt in range(1, attempts + 1):
        if not left:
            break
        samplings = [
            replace(sampling, seed=seed_for(seed, "hint", f"{todo[i].get('id')}:{attempt}"))
            for i in left
        ]
        gens = engine.chat([prompts[i] for i in left], samplings)
        again = []
        for i, g in zip(left, gens, strict=True):
            text = clean(g.text)
            reason = (
                "empty"
                if not text
                else next(filter(None, (hint_leak(text, s) for s in sols[i])), None)
            )
            result[i] = {
                "text": text,
                "ok": reason is None,
                "reason": reason,
                "attempts": attempt,
                "source": "model",
                "engine": engine.name,
                "model": engine.model,
                "prompt_ids": list(g.prompt_ids),
                "completion_ids": list(g.completion_ids),
                "finish_reason": g.finish_reason,
            }
            if reason is not None:
                again.append(i)
        left = again
    out = []
    for i, c in enumerate(buf):
        out.append({**c, "hint": result[i]} if i in result else c)
    return out


def sandbox_solutions(cfg: Any) -> Callable[[dict], list[list[str]]]:
    """`solutions_of` that resets the environment, sandboxed, on the seeds validation
    checked and returns each episode's info["solution"]."""
    from .sandbox import EnvError, EnvSession

    def solutions_of(cand: dict) -> list[list[str]]:
        seeds = (cand.get("validation") or {}).get("seeds") or [0]
        out = []
        try:
            session = EnvSession(cand["env"]["code"], cfg)
        except EnvError:
            return []
        try:
            for s in seeds:
                try:
                    _, info = session.reset(seed=int(s))
                except EnvError:
                    break
                sol = info.get("solution") if isinstance(info, dict) else None
                if isinstance(sol, list) and all(isinstance(a, str) for a in sol):
                    out.append(sol)
        finally:
            session.close()
        return out

    return solutions_of
