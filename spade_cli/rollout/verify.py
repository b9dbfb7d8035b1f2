"""Checks of a candidate during rollout that need no model: the environment must still
hold the contract it was validated on.

`probe(code, seeds, cfg)` plays, each in a fresh sandboxed worker, the episode's own
`info["solution"]` on the first rollout seed (it must still solve it: an environment
that changes after a wall time or a number of calls gives itself away) and the
validator's seeded nonsense policy on two others (it must not solve both: an environment
that pays any answer once validation is over does). Returns None, or why the contract
is broken.
"""

from __future__ import annotations

from typing import Any

PROBE_NONSENSE_SEEDS = 2


def probe(code: str, seeds: list[int], cfg: Any, max_turns: int) -> str | None:
    """`max_turns` is the limit for an environment that declares none."""
    from ..envs.checks import nonsense_policy
    from ..envs.shared_checks import Rejected, run_episode
    from ..errors import SpadeError
    from ..sandbox import EnvError, EnvSession

    def play(seed: int, name: str):
        with EnvSession(code, cfg) as env:
            meta = env.metadata or {}
            turns = meta.get("max_turns") if isinstance(meta.get("max_turns"), int) else max_turns
            if name == "solution":
                _obs, info = env.reset(seed=seed)
                policy = info.get("solution") if isinstance(info, dict) else None
                policy = policy if isinstance(policy, list) else []
            else:
                policy = nonsense_policy(meta.get("tools"))
            # The environment's own turn limit, not the rollout's cap: the solution must fit it.
            return run_episode(
                env, seed, policy, max(1, min(int(turns), 1000)), name, rng_seed=seed
            )

    try:
        sol = play(seeds[0], "solution")
        if not sol.solved:
            return f"on rollout seed {seeds[0]}, info['solution'] returns {sol.ret:g}, not 1"
        others = [(seeds[0] + 7919 * (i + 1)) & 0x7FFFFFFF for i in range(PROBE_NONSENSE_SEEDS)]
        if all(play(s, "nonsense").solved for s in others):
            return f"a nonsense policy solves rollout seeds {others}"
    except Rejected as r:
        if r.reason in ("bad_step", "reward_out_of_range", "protocol", "flood"):
            return f"on a rollout probe: {r.reason}: {r.detail}"
    except EnvError:
        pass  # out of time or memory on a probe: nothing proven either way
    except SpadeError:
        raise  # no sandbox here: the stage's problem, not the candidate's
    except Exception:  # noqa: BLE001 - what the checks trip over proves nothing either way
        pass
    return None
