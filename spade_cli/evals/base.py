"""What every evaluation suite shares: tasks, episodes, scoring and the summary.

A suite turns its benchmark into `Task`s. Each task builds an *environment* that follows
the project's environment contract (prompts/contract.md): `metadata` with `name`, `max_turns` and
optional `tools`, `reset(seed) -> (observation, info)` and `step(action) -> (observation,
reward, terminated, truncated, info)`, returns in [0, 1]. The same agent loop then drives
every suite (spade-rollout's, through agent.py), a benchmark's own scorer decides the reward, and an oracle (a
task's privileged list of actions) proves that the harness can reach a perfect score.

Two small extensions of the contract, used only by the in-process suite adapters:
- `metadata["system"]`: a system prompt the suite wants the agent to see (reasoning-gym's
  answer-format instruction);
- `info["tools"]` returned by `step`: the tool list changes from now on (BFCL's
  miss-function category reveals held-out functions at a later user turn).
Two attributes tell the agent loop (which starts and steps episodes on a thread pool)
how far it may go: `env.threadsafe = False` makes every call of that environment take
one shared lock, and a task not marked `parallel` builds its environment under it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ResourceError

# One install command for every optional suite package (docs/evaluation.md#installing-the-suites).
INSTALL_HINT = "pip install --no-deps -r requirements-eval.txt (see docs/evaluation.md)"


def require(module: str, package: str, suite: str) -> None:
    """Fail with exit code 4 and the install command when a suite's package is missing or
    cannot be imported (a --no-deps install missing one of its light dependencies)."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        why = "" if getattr(e, "name", None) == module else f" ({e})"
        raise ResourceError(
            f"suite {suite!r} needs the {package!r} package{why}: {INSTALL_HINT}"
        ) from None


@dataclass
class Task:
    """One held-out item: how to build its environment and how an oracle solves it."""

    suite: str
    task_id: str  # stable across runs and machines (the record id derives from it)
    category: str  # benchmark sub-category or task family, for the per-category table
    make_env: Callable[[], Any]
    seed: int | None = None  # reset seed of the episode (the same for every sample)
    # (env, observation, info) -> the actions that solve the episode, or None if the
    # suite has no oracle for this task.
    oracle: Callable[[Any, str, dict], list[str] | None] | None = None
    meta: dict = field(default_factory=dict)
    # Build the environment outside the shared lock: it mostly waits on a subprocess
    # (the sandbox), so starting many at once overlaps their start-up.
    parallel: bool = False


def clip01(x: float) -> float:
    if x != x:  # NaN
        return 0.0
    return min(1.0, max(0.0, float(x)))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def task_stats(samples: list[dict]) -> dict:
    n = len(samples)
    c = sum(1 for s in samples if s["success"])
    return {
        "k": n,
        "successes": c,
        "pass@1": c / n if n else 0.0,
        f"pass@{n}": pass_at_k(n, c, n) if n else 0.0,
        "mean_return": sum(s["return"] for s in samples) / n if n else 0.0,
    }


def summarize(records: list[dict]) -> dict:
    """Per suite and per (suite, category): tasks, accuracy (mean pass@1), pass@k
    (k = samples per task) and mean return. Plain numbers, comparable across checkpoints
    evaluated with the same suites, -n, --samples and --seed."""

    def agg(recs: list[dict]) -> dict:
        n = len(recs)
        if not n:
            return {"tasks": 0}
        k = min(len(r["samples"]) for r in recs)
        out = {
            "tasks": n,
            "k": k,
            "accuracy": sum(r["stats"]["pass@1"] for r in recs) / n,
            "mean_return": sum(r["stats"]["mean_return"] for r in recs) / n,
        }
        if k > 1:
            out[f"pass@{k}"] = (
                sum(pass_at_k(len(r["samples"]), r["stats"]["successes"], k) for r in recs) / n
            )
        stops: dict[str, int] = {}
        for r in recs:
            for s in r["samples"]:
                stops[s["stop"]] = stops.get(s["stop"], 0) + 1
        out["stops"] = stops
        return out

    suites: dict[str, dict] = {}
    for suite in dict.fromkeys(r["suite"] for r in records):
        recs = [r for r in records if r["suite"] == suite]
        cats = {}
        for cat in sorted({r["category"] for r in recs}):
            cats[cat] = agg([r for r in recs if r["category"] == cat])
        suites[suite] = {**agg(recs), "categories": cats}
    overall = agg(records)
    return {"suites": suites, "overall": overall}


def format_table(summary: dict, model: str = "", categories: bool = True) -> str:
    """The human summary on stderr: one row per suite (and category), fixed columns."""
    rows = [("suite", "tasks", "k", "accuracy", "pass@k", "return")]

    def row(name: str, s: dict) -> tuple:
        if not s.get("tasks"):
            return (name, "0", "-", "-", "-", "-")
        k = s["k"]
        pk = s.get(f"pass@{k}")
        return (
            name,
            str(s["tasks"]),
            str(k),
            f"{100 * s['accuracy']:.1f}%",
            f"{100 * pk:.1f}%" if pk is not None else "-",
            f"{s['mean_return']:.3f}",
        )

    for name, s in summary["suites"].items():
        rows.append(row(name, s))
        if categories and len(s["categories"]) > 1:
            for cat, cs in s["categories"].items():
                rows.append(row(f"  {cat}", cs))
    if len(summary["suites"]) > 1:
        rows.append(row("overall", summary["overall"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    if model:
        lines.append(f"model: {model}")
    for r in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)
