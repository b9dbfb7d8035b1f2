"""The micro world's held-out suite: every family at every level, on fixed seeds.

`-n` episodes are spread round-robin over the 18 (family, level) environments of the
micro library, each on its own seed derived from `--seed` (so no training round plays
them: rounds seed their episodes from candidate ids). Categories are `family/Ln`, so the
summary gives the solve rate per family and level; `bench/micro_experiment.py` folds them
per level. Environments run in the sandbox like every pool's.
"""

from __future__ import annotations

from ..micro.pool import FAMILIES, LEVELS, env_name, library_source
from .base import Task


def entries(subset: list[str] | None = None) -> list[dict]:
    """One entry per (family, level); `subset` picks families (corridor, code, signal)."""
    from ..errors import UsageError

    fams = list(FAMILIES)
    if subset:
        bad = [s for s in subset if s not in FAMILIES]
        if bad:
            raise UsageError(f"unknown micro family {', '.join(bad)} (have: {', '.join(FAMILIES)})")
        fams = [f for f in fams if f in subset]
    return [
        {"name": env_name(f, lv), "code": library_source(f, lv), "family": f"{f}/L{lv}"}
        for f in fams
        for lv in LEVELS
    ]


def tasks(n: int, seed: int, subset: list[str] | None = None, sandbox=None) -> list[Task]:
    from .pools import _tasks, sandbox_config

    # Framed as examples/micro.toml's rollouts are (rollout.prompt = "micro").
    out = _tasks("micro", entries(subset), n, seed, sandbox_config(sandbox), None, prompt="micro")
    for t in out:
        family, level = t.category.split("/L")
        t.meta.update(family=family, level=int(level))
    return out
