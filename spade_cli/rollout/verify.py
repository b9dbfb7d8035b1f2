"""Checks of a candidate during rollout that need no model: the environment must still
hold the contract it was validated on.

`probe(code, seeds, cfg)` plays, each in a fresh sandboxed worker, the episode's own
`info["solution"]` on the first rollout seed (it must still solve it: an environment
that changes after a wall time or a number of calls gives itself away) and the
validator's seeded nonsense policy on two others (it must not solve both: an environment
that pays any answer once validation is over does). Returns None, or why the contract
is broken.

`replay_episodes(episodes, cfg)` plays finished episodes of one candidate again from their
action logs (`Episode.replay`), all in one worker (`FirstStateWorker`): the first in a
fresh worker, each next one after the module is executed again in the same worker. A
worker per replay cost more CPU than the replays, taken on two cores from the model's
generation. An environment that depends on its seed and actions alone replays the same
either way; one that carries anything from an earlier episode outside its module (a
global of another module, a file) shows it on the next replay, where each rollout
episode had a worker of its own. Telling a reused worker from a fresh one gains an
environment little here: a replay must reproduce what the episode recorded, which the
environment never sees, and one that fails in a reused worker has every later replay in
a fresh one. The probe, whose nonsense plays must merely fail, keeps a fresh worker per
play.
"""

from __future__ import annotations

from typing import Any

PROBE_NONSENSE_SEEDS = 2


class FirstStateWorker:
    """A sandboxed worker on one candidate's code, handed out as the code first loads:
    fresh the first time, then the same worker with its module executed again (a new
    module and instance; what lives outside the module carries over). A fresh worker
    replaces it where one more episode's replies could take it past its lifetime bound
    (`session_mb`, which a worker per episode never reaches); after a failed play or a
    failed reload every play gets a fresh worker, so an environment that tells a reused
    worker from a fresh one and fails in reused ones leaves no replay unchecked."""

    def __init__(self, code: str, cfg: Any):
        self.code, self.cfg, self.env = code, cfg, None
        self.reuse = True

    def __enter__(self) -> FirstStateWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.drop()

    def first_state(self) -> Any:
        """The session, in its first state; EnvError where a fresh worker cannot start."""
        from ..sandbox import EnvError, EnvSession

        env, cfg = self.env, self.cfg
        if env is not None and (
            not self.reuse or env.held + (cfg.episode_mb << 20) > cfg.session_mb << 20
        ):
            self.drop()
        if self.env is not None:
            try:
                self.env.renew(reload=True)
                return self.env
            except EnvError:
                self.failed()
        self.env = EnvSession(self.code, cfg)
        return self.env

    def failed(self) -> None:
        """The last play or reload failed: this worker goes, and no worker serves twice."""
        self.drop()
        self.reuse = False

    def drop(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def probe(code: str, seeds: list[int], cfg: Any, max_turns: int) -> str | None:
    """`max_turns` is the limit for an environment that declares none. Each play in a
    fresh worker: an environment that can tell a reused worker from a fresh one (every
    rollout episode's) could hold to its contract in the probe alone."""
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


def replay_episodes(episodes: list, cfg: Any) -> None:
    """Verify `episodes` (of one candidate) by replay, in one worker while it holds
    (FirstStateWorker); sets each one's `verified` or `mismatch`."""
    from ..sandbox import EnvError

    if not episodes:
        return
    with FirstStateWorker(episodes[0].job.code, cfg) as worker:
        for ep in episodes:
            try:
                env = worker.first_state()
            except EnvError as e:
                ep.replay_failed(e)
                continue
            if not ep.replay(env):
                worker.failed()
