"""The micro world's held-out suite: every family at every level, on fixed seeds.

`-n` episodes are spread round-robin over the 18 (family, level) environments of the
micro library, each on its own seed derived from `--seed` (so no training round plays
them: rounds seed their episodes from candidate ids). Categories are `family/Ln`, so the
summary gives the solve rate per family and level; `bench/micro_experiment.py` folds them
per level. Environments run in the sandbox like every pool's.

The episodes of an environment take each value of its hidden fact (the door's side, the
switches' rule, the hidden symbol's rank) in turn, so an agent's bias (always `right`,
always the last switch) scores what a guess is worth and no more. With seeds drawn
freely, twelve corridors could hide nine doors on the right, and an agent that only ever
walks right would seem to have learnt half of what no agent can know.
"""

from __future__ import annotations

import functools

from ..micro.pool import FAMILIES, LEVELS, env_name, library_source
from ..records import seed_for
from .base import Task

# Seeds tried for an episode's hidden fact, and to list the values a fact takes: far
# more than the six it takes at most.
TRIES = 256


def entries(subset: list[str] | None = None) -> list[dict]:
    """One entry per (family, level); `subset` picks families (corridor, code, switch)."""
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
        t.seed, secret = balanced_seed(family, int(level), t.task_id, seed)
        t.meta.update(family=family, level=int(level), episode_seed=t.seed, secret=secret)
    return out


def secret_of(family: str, level: int, seed: int) -> str:
    """The hidden fact of an episode, from the trusted family class on the host."""
    from ..micro.transcripts import env_class

    env = env_class(family, level)()
    env.reset(seed=seed)
    return env.secret


@functools.cache
def secrets(family: str, level: int) -> list[str]:
    """Every value the hidden fact of an environment takes, sorted."""
    return sorted({secret_of(family, level, s) for s in range(TRIES)})


def balanced_seed(family: str, level: int, task_id: str, seed: int) -> tuple[int, str]:
    """Episode k of an environment (task id `name/k`) hides the k-th value of its fact,
    in turn: its seed is the first, of those derived from `--seed` and the task id, whose
    episode hides that value. Returns the seed and the value."""
    name, k = task_id.rsplit("/", 1)
    values = secrets(family, level)
    want = values[int(k) % len(values)]
    for i in range(TRIES):
        s = seed_for(seed, "micro", f"{name}/{k}#{i}")
        if secret_of(family, level, s) == want:
            return s, want
    raise AssertionError(f"{task_id}: no seed of {TRIES} hides {want!r}")
