"""Held-out evaluation (spade-eval): real benchmarks nobody here wrote, plus our own pools.

    from spade_cli.evals import run_eval
    records, summary = run_eval(["bfcl", "reasoning-gym"], engine, n=20, seed=0)
    summary["suites"]["bfcl"]["accuracy"]

Suites (`--suite NAME` or `NAME:item,item` to pick categories / families / games / envs):
  bfcl           BFCL-v4 multi-turn (base, miss_func, miss_param, long_context)  [bfcl-eval]
  reasoning-gym  procedural reasoning families at fixed seeds                     [reasoning-gym]
  textarena      single-player text games                                          [textarena]
  library        the example environment library (envs.library.library_dir()), sandboxed
  micro          the micro world: every family and level on held-out seeds, sandboxed
  memory         an environment memory file (--memory FILE), sandboxed
  FILE           a file of candidate or env records, or a directory of environment files
                 (either contract; spade-cat --from-dir), sandboxed

Every suite is a list of `Task`s whose environments follow the environment contract, so
one agent loop plays them all (spade-rollout's, through agent.py); `oracle=True` plays each task's privileged
solution instead of the model, which must score 100% (the harness check).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import UsageError
from ..records import make_id, new_record
from .base import INSTALL_HINT, Task, format_table, summarize, task_stats

SUITES = ("bfcl", "reasoning-gym", "textarena", "library", "micro", "memory")
ALIASES = {"reasoning_gym": "reasoning-gym", "rg": "reasoning-gym", "bfcl-v4": "bfcl"}

__all__ = [
    "INSTALL_HINT",
    "SUITES",
    "Task",
    "build_tasks",
    "eval_records",
    "format_table",
    "check_suites",
    "parse_suite",
    "run_eval",
    "summarize",
]


def parse_suite(spec: str) -> tuple[str, list[str] | None]:
    """`name` or `name:a,b,c` -> (canonical name, subset or None)."""
    if os.path.exists(spec):  # a file of candidates or env records, or a directory of envs
        return "file", [spec]
    name, _, rest = spec.partition(":")
    name = ALIASES.get(name.strip().lower(), name.strip().lower())
    if name not in SUITES:
        raise UsageError(f"unknown suite {spec!r} (valid suites: {', '.join(SUITES)})")
    subset = [s.strip() for s in rest.split(",") if s.strip()] if rest else None
    return name, subset


# Python packages each suite imports (module, distribution name).
REQUIREMENTS = {
    "bfcl": [("bfcl_eval", "bfcl-eval"), ("mpmath", "mpmath")],
    "reasoning-gym": [("reasoning_gym", "reasoning-gym")],
    "textarena": [("textarena", "textarena")],
}


def check_suites(suites: list[str]) -> list[tuple[str, list[str] | None]]:
    """Parse every suite name and import every package they need, before anything slow
    (loading a model) happens: unknown names are usage errors (exit 2), a missing
    package a resource error naming the install command (exit 4)."""
    from .base import require

    specs = [parse_suite(s) for s in suites]
    if any(name == "bfcl" for name, _ in specs):
        from .bfcl import _project_root

        _project_root()  # before bfcl_eval is first imported
    for name, _ in specs:
        for module, package in REQUIREMENTS.get(name, []):
            require(module, package, name)
    return specs


def build_tasks(
    suites: list[str], n: int, seed: int = 0, memory: str | None = None, sandbox=None
) -> list[Task]:
    """The tasks of every suite, in order: `n` per suite (bfcl: n=0 means all 800)."""
    specs = check_suites(suites)  # all names and packages checked before anything loads
    out: list[Task] = []
    for name, subset in specs:
        if name == "bfcl":
            from . import bfcl

            out += bfcl.tasks(n, seed, subset)
        elif name == "reasoning-gym":
            from . import rgym

            out += rgym.tasks(n, seed, subset)
        elif name == "textarena":
            from . import tarena

            out += tarena.tasks(n, seed, subset)
        elif name == "library":
            from . import pools

            out += pools.library_tasks(n, seed, subset, sandbox=sandbox)
        elif name == "micro":
            from . import micro

            out += micro.tasks(n, seed, subset, sandbox=sandbox)
        elif name == "memory":
            from . import pools

            out += pools.memory_tasks(memory, n, seed, subset, sandbox=sandbox)
        elif name == "file":
            from . import pools

            out += pools.file_tasks(subset[0], n, seed, sandbox=sandbox)
    return out


def eval_records(
    tasks: list[Task], results: list[list[dict]], agent: dict, seed: int
) -> list[dict]:
    """One `eval` record per task (schema in records.py)."""
    recs = []
    for t, samples in zip(tasks, results, strict=True):
        rid = make_id("eval", t.suite, t.task_id, seed, agent.get("model", agent["kind"]))
        recs.append(
            new_record(
                "eval",
                rid,
                [],
                suite=t.suite,
                task=t.task_id,
                category=t.category,
                agent=agent,
                seed=seed,
                samples=samples,
                stats=task_stats(samples),
                meta=t.meta,
            )
        )
    return recs


def run_eval(
    suites: list[str],
    engine=None,
    n: int = 20,
    seed: int = 0,
    samples: int = 1,
    sampling=None,
    memory: str | None = None,
    oracle: bool = False,
    sandbox=None,
    max_in_flight: int = 64,
    max_turns: int | None = None,
    on_record: Callable[[dict], None] | None = None,
) -> tuple[list[dict], dict]:
    """Evaluate `engine` (or the oracle) on `suites`; returns (eval records, summary).

    The summary is `summarize(records)` plus the run's settings; its numbers are
    comparable across checkpoints evaluated with the same suites, n, samples and seed.
    This is the entry point for per-round evaluation in spade-loop."""
    from .agent import run_model, run_oracle

    tasks = build_tasks(suites, n, seed, memory=memory, sandbox=sandbox)
    if oracle:
        agent = {"kind": "oracle"}
    else:
        if engine is None:
            raise UsageError("run_eval needs an engine (or oracle=True)")
        from ..engines import Sampling

        sampling = sampling or Sampling(temperature=0.0 if samples == 1 else 1.0, max_tokens=256)
        agent = {
            "kind": "model",
            "engine": engine.name,
            "model": str(engine.model),
            "sampling": sampling.to_dict(),
        }
    records: list[dict] = []

    def emit(i: int, episodes: list[dict]) -> None:
        rec = eval_records([tasks[i]], [episodes], agent, seed)[0]
        records.append(rec)
        if on_record:
            on_record(rec)  # streamed in task order as tasks finish

    if oracle:
        run_oracle(tasks, max_in_flight=max_in_flight, on_task=emit)
    else:
        run_model(
            engine,
            tasks,
            samples,
            sampling,
            seed,
            max_in_flight=max_in_flight,
            max_turns=max_turns,
            on_task=emit,
        )
    summary = summarize(records)
    summary.update(
        {
            "agent": agent,
            "seed": seed,
            "n": n,
            "samples": 1 if oracle else samples,
            "suites_requested": list(suites),
        }
    )
    return records, summary
