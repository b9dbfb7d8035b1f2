"""What every exported environment carries, and the sandboxed episode all formats drive.

An exported environment is a directory `spade/` holding `env.py` (the designer's module,
byte for byte) and `spade.json` (its metadata: the candidate's id, parents, origin, round,
skill, env fields, validation verdict, hint and scores, plus the contract, how its return
is counted, the seeds it exports and, per seed, the solution and the return spade's own
replay of that solution earned). The format's own files (an OpenEnv server, a verifiers
module, a Harbor task) sit around it and load it through `load_spec` and `Episode`, so the
environment's code only ever runs in spade's bubblewrap sandbox, never in the process
that serves or scores it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError

SPEC_VERSION = 1
CODE_FILE = "env.py"
META_FILE = "spade.json"
# What of a candidate record an export keeps: the environment and what was learned about
# it, not how it was made (design messages, token ids and rollouts stay in the run).
KEPT_FIELDS = (
    "kind",
    "v",
    "id",
    "parents",
    "origin",
    "round",
    "group",
    "skill",
    "env",
    "validation",
    "hint",
    "score",
    "scores",
    "name",
    "summary",
    "max_turns",
    "tools",
    "doc_id",
    "code_hash",
    "replays",
    "last_round",
    "family",
    "path",
    "sha256",
)


@dataclass
class ExportedEnv:
    """One environment as the exporters write it and the exported code reads it back."""

    record: dict
    """The kept fields of the input record (without the code, which is env.py)."""
    code: str
    contract: str
    """`spade` or `published`."""
    returns: str
    """`sum` (ours) or `final` (published): how an episode's rewards make its return."""
    max_turns: int
    seeds: list[int] = field(default_factory=list)
    solutions: dict[str, list[str]] = field(default_factory=dict)
    """Per seed (as a string key): the actions that solve that episode ([] where unknown)."""
    replay_returns: dict[str, float] = field(default_factory=dict)
    """Per seed: the return spade's replay of that solution earned, in the sandbox."""
    hints: dict[str, str] = field(default_factory=dict)
    """Per seed: the privileged hint (spade-hint's text, else the environment's own)."""
    solution_texts: dict[str, str] = field(default_factory=dict)
    """Per seed: a published environment's solution() text."""
    observations: dict[str, str] = field(default_factory=dict)
    """Per seed: the episode's first observation (a task's prompt)."""
    fmt: str = ""
    """The format it was exported in (spade.json's `format`)."""

    @property
    def id(self) -> str:
        return str(self.record.get("id"))

    @property
    def name(self) -> str:
        env = self.record.get("env") if isinstance(self.record.get("env"), dict) else self.record
        return str(env.get("name") or self.id)

    @property
    def tools(self) -> list | None:
        env = self.record.get("env") if isinstance(self.record.get("env"), dict) else self.record
        return env.get("tools") or None

    def meta(self, fmt: str) -> dict:
        return {
            "spade_export": SPEC_VERSION,
            "format": fmt,
            "contract": self.contract,
            "return": self.returns,
            "max_turns": self.max_turns,
            "seeds": self.seeds,
            "solutions": self.solutions,
            "replay_returns": self.replay_returns,
            "hints": self.hints,
            "solution_texts": self.solution_texts,
            "observations": self.observations,
            "record": self.record,
        }


def write_spec(spec: ExportedEnv, directory: Path, fmt: str) -> Path:
    """`directory`/env.py and spade.json; returns `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    write_text(directory / CODE_FILE, spec.code)
    write_text(directory / META_FILE, json.dumps(spec.meta(fmt), indent=1, sort_keys=True) + "\n")
    return directory


def load_spec(directory: str | Path) -> ExportedEnv:
    """The environment exported into `directory` (the folder holding spade.json)."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        code = (directory / CODE_FILE).read_text(encoding="utf-8")
    except OSError as e:
        raise DataError(
            f"cannot read the exported environment: {e.strerror}", str(meta_path)
        ) from None
    except ValueError as e:
        raise DataError(f"bad JSON: {e}", str(meta_path)) from None
    if not isinstance(meta, dict) or meta.get("spade_export") != SPEC_VERSION:
        raise DataError(
            f"not a spade export (spade_export {SPEC_VERSION} expected)", str(meta_path)
        )
    try:
        return ExportedEnv(
            record=meta["record"],
            code=code,
            contract=meta["contract"],
            returns=meta["return"],
            max_turns=int(meta["max_turns"]),
            seeds=[int(s) for s in meta["seeds"]],
            solutions=meta["solutions"],
            replay_returns=meta["replay_returns"],
            hints=meta.get("hints") or {},
            solution_texts=meta.get("solution_texts") or {},
            observations=meta.get("observations") or {},
            fmt=str(meta.get("format") or ""),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(f"malformed spade.json ({type(e).__name__}: {e})", str(meta_path)) from None


def find_specs(root: str | Path) -> list[Path]:
    """Every exported environment folder under `root`, in path order."""
    return sorted(p.parent for p in Path(root).rglob(META_FILE))


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write atomically: a reader (or a rerun after a crash) never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def sandbox_config(**limits: Any):
    """The sandbox an exported environment runs in: spade's defaults, bwrap checked first.
    `SPADE_EXPORT_EPISODE_TIMEOUT` (seconds) lets a served episode wait longer for a slow
    policy than validation's 60 s."""
    from ..sandbox import SandboxConfig, check_sandbox

    timeout = float(os.environ.get("SPADE_EXPORT_EPISODE_TIMEOUT", "600"))
    cfg = SandboxConfig(episode_timeout=timeout, **limits)
    check_sandbox()
    return cfg


class Episode:
    """One episode of an exported environment in a sandboxed worker of its own.

    The rewards it gives out are spade's: for a `sum` environment each step's own reward;
    for a `final` (published) one, 0 until the episode ends and then its final return, so
    that in both contracts the rewards of an episode add up to the return spade's rollouts
    and replays record. The episode ends when the environment says so or at `max_turns`."""

    def __init__(self, spec: ExportedEnv, cfg=None):
        from ..sandbox import EnvSession

        self.spec = spec
        self.session = EnvSession(spec.code, cfg or sandbox_config())
        self.rewards: list[float] = []
        self.done = True  # until the first reset
        self.stop: str | None = None

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        obs, info = self.session.reset(seed=seed)
        self.rewards, self.done, self.stop = [], False, None
        return obs, info if isinstance(info, dict) else {}

    def step(self, action: str) -> tuple[str, float, bool]:
        """(observation, reward, done)."""
        from ..rollout.returns import final_return

        if self.done:
            raise RuntimeError("the episode is over: reset first")
        obs, reward, terminated, truncated, _info = self.session.step(action)
        self.rewards.append(float(reward))
        if terminated or truncated:
            self.stop = "terminated" if terminated else "truncated"
        elif len(self.rewards) >= self.spec.max_turns:
            self.stop = "max_turns"
        self.done = self.stop is not None
        if self.spec.returns == "sum":
            return obs, float(reward), self.done
        return obs, (final_return(self.rewards, self.stop) if self.done else 0.0), self.done

    @property
    def episode_return(self) -> float:
        from ..rollout.returns import episode_returns

        turns = [{"reward": r} for r in self.rewards]
        return episode_returns(turns, self.stop, self.spec.returns)["return"]

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def play(
    spec: ExportedEnv, seed: int, actions: list[str], cfg=None
) -> tuple[float, list[str], bool]:
    """Replay `actions` on `seed` from a fresh worker (by the contract, the same seed and
    actions give the same episode): (return, the observations so far, whether it is over).
    Actions after the episode ended are not played."""
    with Episode(spec, cfg) as ep:
        obs, _ = ep.reset(seed=seed)
        seen = [obs]
        for a in actions:
            if ep.done:
                break
            obs, _r, _done = ep.step(a)
            seen.append(obs)
        return ep.episode_return, seen, ep.done
