"""The rollout stage: candidates in, candidates with `rollouts` out, in input order.

All episodes in flight advance together. One loop iteration is one turn for every live
episode: ONE batched `agent.act` (one engine.generate call) across all of them, then
every episode's env step(s) concurrently on a thread pool, each episode in its own
sandboxed worker (forked in milliseconds where the sandbox's fork server applies).
Finished episodes free their slot; the next pending episodes take it at the next turn
(continuous batching at turn granularity), so a batch never waits for its slowest
episode.

Seeds. Episode i (0 <= i < k) of a candidate resets its environment with
`seed_for(seed, "rollout", candidate id) + i` (mod 2^31): the no-hint and the hinted
episode i play the same episode, so the hint comparison is paired. Model sampling draws
a seed per (candidate, condition, episode, turn) from `--seed`.

Determinism. Which episodes share a turn's batch depends only on the input and the
episode outcomes, never on thread timing: admission takes pending episodes strictly in
order and waits for their start. (Batched engines such as transformers' generate give a
row a result that depends on its batch-mates, so this matters.) Sandboxed workers are
started ahead of admission on background threads, overlapping generation.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..envs.contracts import action_format as contract_action_format
from ..envs.contracts import resolve_contract
from ..records import rng_for, seed_for
from .agents import AgentPrompt
from .episode import DEFAULT_MAX_TURNS, Episode  # noqa: F401 - re-exported
from .verify import probe, replay_episodes

CONDITIONS = ("nohint", "hint")
"""The two conditions an environment is played in; a rollout may play only some."""


@dataclass
class RolloutStats:
    """What a run did and where its time went (the CLI's summary, the benchmark's figures)."""

    candidates: int = 0
    envs: int = 0
    episodes: int = 0
    generate_calls: int = 0
    model_tokens: int = 0
    wall_seconds: float = 0.0
    generate_seconds: float = 0.0
    load_seconds: float = 0.0  # loading the model (an agent factory), workers starting meanwhile
    stops: Counter = field(default_factory=Counter)
    phases: Counter = field(default_factory=Counter)  # wall seconds of the loop outside generation
    replays: int = 0  # episodes replayed to verify their returns, and candidates probed
    replay_seconds: float = 0.0  # their summed duration (on their own threads, concurrent)
    returns: dict = field(default_factory=lambda: {"nohint": [], "hint": []})

    def line(self) -> str:
        def cond(c: str) -> str:
            r = self.returns[c]
            if not r:
                return f"{c} -"
            return f"{c} mean return {sum(r) / len(r):.3f}, solved {sum(x >= 1 - 1e-6 for x in r)}/{len(r)}"

        run = self.wall_seconds - self.load_seconds
        share = (run - self.generate_seconds) / run if run > 0 else 0.0
        load = f"model load {self.load_seconds:.1f}s, then " if self.load_seconds else ""
        stops = ", ".join(f"{k} {v}" for k, v in sorted(self.stops.items())) or "-"
        return (
            f"{self.candidates} candidates, {self.envs} environments, {self.episodes} episodes "
            f"in {self.wall_seconds:.1f}s ({load}{share:.0%} outside generation); "
            f"{cond('nohint')}; {cond('hint')}; stops: {stops}"
        )


class Job:
    """One candidate on its way through the stage."""

    def __init__(
        self,
        record: dict,
        k: int,
        seed: int,
        max_turns: int | None,
        timeout: float,
        return_mode: str = "final",
        hint_source: str = "self",
        contract: str = "auto",
        action_format: str = "auto",
        conditions: tuple[str, ...] = CONDITIONS,
    ):
        self.record = record
        self.conditions = conditions
        self.return_mode = return_mode
        self.hint_source = hint_source
        self.id = str(record.get("id", ""))
        env = record.get("env") if isinstance(record.get("env"), dict) else {}
        self.env = env
        self.code = env.get("code")
        code = self.code if isinstance(self.code, str) else ""
        self.contract = env.get("contract") or resolve_contract(code, contract)
        self.action_format = contract_action_format(action_format, self.contract, code)
        self.timeout = timeout
        valid = (record.get("validation") or {}).get("valid") is True
        self.active = valid and isinstance(self.code, str) and bool(self.code)
        self.episodes: list[Episode] = []
        self.replays: list = []  # futures of the episodes' verifying replays and the probe
        self.to_replay: list[Episode] = []  # finished episodes chosen for a replay
        self.probe = None  # future of verify.probe: None, or why the contract is broken
        self.left = 0
        if not self.active:
            return
        self.turn_cap = max_turns
        base = seed_for(seed, "rollout", self.id)
        self.seeds = [(base + i) & 0x7FFFFFFF for i in range(k)]
        # The two episodes of a pair start one after the other, in an order the
        # environment cannot know: being started first says nothing about the condition.
        coin = rng_for(seed, "rollout-order", self.id)
        for i, s in enumerate(self.seeds):
            first = coin.random() < 0.5
            for hinted in (first, not first):
                if ("hint" if hinted else "nohint") in self.conditions:
                    self.episodes.append(Episode(self, hinted, i, s))
        self.left = len(self.episodes)

    def hint_for(self, info: dict) -> tuple[str, str]:
        """The hinted condition's hint and where it came from: `self` (spade-hint's, on
        the candidate), `env` (the environment's info["hint"]) or `none` (no usable hint:
        the hinted episodes then play without one, and say so)."""
        if self.hint_source == "self":
            h = self.record.get("hint")
            text = h.get("text") if isinstance(h, dict) and h.get("ok", True) else None
            return (text, "self") if isinstance(text, str) and text.strip() else ("", "none")
        text = str(info.get("hint") or "")
        return (text, "env") if text.strip() else ("", "none")

    def output(self, agent_info: dict, k: int) -> dict:
        if not self.active:
            return self.record
        nohint = [e.record() for e in self.episodes if not e.hinted]
        hint = [e.record() for e in self.episodes if e.hinted]
        rec = dict(self.record)
        # A score describes the plays it was computed from: re-played, the record has none
        # until spade-regret scores these.
        rec.pop("score", None)
        rec["rollouts"] = {
            "agent": agent_info,
            "k": k,
            "return": self.return_mode,
            "hint_source": self.hint_source,
            **({} if self.conditions == CONDITIONS else {"conditions": list(self.conditions)}),
            "seeds": self.seeds,
            "max_turns": max(e.max_turns for e in self.episodes),
            "nohint": nohint,
            "hint": hint,
            "summary": {"nohint": summarise(nohint), "hint": summarise(hint)},
        }
        broken = next((e.contract_broken for e in self.episodes if e.contract_broken), None)
        if broken is None and self.probe is not None:
            broken = self.probe.result()
        if broken:
            rec["rollouts"]["contract_broken"] = broken
        if self.replays:
            rec["rollouts"]["verified"] = sum(e.verified is True for e in self.episodes)
            mismatch = next((e.mismatch for e in self.episodes if e.mismatch), None)
            if mismatch:
                rec["rollouts"]["nondeterministic"] = mismatch
        return rec


def summarise(episodes: list[dict]) -> dict:
    n = len(episodes)
    if n == 0:
        return {"n": 0, "mean_return": None, "success_rate": None, "mean_turns": None, "stops": {}}
    return {
        "n": n,
        "mean_return": sum(e["return"] for e in episodes) / n,
        "mean_return_final": sum(e["return_final"] for e in episodes) / n,
        "mean_return_sum": sum(e["return_sum"] for e in episodes) / n,
        "success_rate": sum(bool(e["success"]) for e in episodes) / n,
        "mean_turns": sum(e["num_turns"] for e in episodes) / n,
        "stops": dict(Counter(e["stop"] for e in episodes)),
    }


def run_rollouts(
    candidates: Iterable[dict],
    agent: Any,
    k: int = 4,
    seed: int = 0,
    sandbox_cfg: Any = None,
    *,
    max_turns: int | None = None,
    max_context: int | None = None,
    episode_timeout: float = 300.0,
    batch_size: int = 64,
    workers: int = 8,
    ramp: int = 1,
    prompt: AgentPrompt | None = None,
    stats: RolloutStats | None = None,
    on_episode: Any = None,
    verify: float = 1.0,
    job_factory: Any = None,
    episode_return: str = "final",
    hint_source: str = "self",
    contract: str = "auto",
    action_format: str = "auto",
    conditions: tuple[str, ...] = CONDITIONS,
) -> Iterator[dict]:
    """Play k no-hint and k hinted episodes on every valid candidate (validation.valid
    and env.code); yield every candidate, in input order, with `rollouts` added to the
    ones played. `on_episode(episode_record)` is called as each episode ends (progress).

    `agent` is a ModelAgent/ReplayAgent, or a zero-argument factory of one: then the
    first workers start while it runs (loading a model takes a while).

    `max_context` caps prompt + completion tokens of an episode (default: the agent's
    context window); `episode_timeout` is each episode's wall time from its reset;
    `batch_size` is the number of episodes in flight; `workers` the threads that start
    and step sandboxed environments. With `ramp` > 1 the first `ramp` turns fill the
    batch in equal steps, so generation starts once a fraction of the sandboxed workers
    are up and the others start meanwhile (a fixed schedule: batches stay
    deterministic). Off by default: on a CPU the early small batches cost more than the
    overlap saves (bench/bench_rollout.py --ramp 4).

    `job_factory(item, k, seed, max_turns, episode_timeout)` replaces `Job` for drivers
    whose items are not candidate records (spade-eval's tasks): it gives `.active`,
    `.episodes` (Episode subclasses), `.left`, `.replays`, `.to_replay` and
    `.output(agent_info, k)`, what is yielded for the item.

    `verify` is the fraction of finished episodes (chosen per episode from `seed`) whose
    action log is replayed in a fresh worker on the same seed, alongside the rollout: a
    replay that does not reproduce the observations and rewards marks the candidate
    `nondeterministic` and spade-regret scores it invalid (time bombs, state carried
    between episodes, anything read from outside the episode). With `verify` > 0 each
    candidate is also probed without the model (verify.probe: its solution on a rollout
    seed, a nonsense policy on two others), which marks it `contract_broken` if it no
    longer holds.

    `contract` applies to records whose
    env does not name one; `action_format` is plain, boxed or auto
    (`envs.contracts.action_format`). `conditions` limits the plays to some conditions
    (("nohint",): the re-plays of a round's later agent steps, which need no hint); the
    record then names them in `rollouts.conditions`."""
    from dataclasses import replace

    from ..sandbox import SandboxConfig

    if k < 1:
        raise ValueError("k must be at least 1")
    prompt = prompt or AgentPrompt()
    stats = stats if stats is not None else RolloutStats()
    cfg = sandbox_cfg or SandboxConfig()
    # The harness enforces the episode's wall time itself; the sandbox's own limit is a
    # backstop a little later, so a slow step is told apart from an expired episode.
    cfg = replace(cfg, episode_timeout=episode_timeout + cfg.call_timeout)
    batch_size = max(1, int(batch_size))
    workers = max(1, int(workers))
    ramp = max(1, int(ramp))
    if episode_return not in ("final", "sum") or hint_source not in ("self", "env"):
        raise ValueError(f"episode_return {episode_return!r} / hint_source {hint_source!r}")
    if not conditions or not set(conditions) <= set(CONDITIONS):
        raise ValueError(f"conditions {conditions!r}: a non-empty subset of {CONDITIONS}")
    turn = 0
    t_start = time.monotonic()

    source = iter(candidates)
    exhausted = False
    jobs: deque[Job] = deque()  # in input order, not yet written
    pending: deque[Episode] = deque()  # not yet admitted, in order
    live: list[Episode] = []
    spawning: dict[int, Any] = {}  # id(episode) -> future of its spawn

    spawn_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout-spawn")
    step_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout-step")
    # Closing a worker is mostly waiting for it to exit: many threads, off the spawn path.
    close_pool = ThreadPoolExecutor(max_workers=4 * workers, thread_name_prefix="rollout-close")
    verify_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout-verify")
    depth = max(batch_size, workers)  # workers started ahead of admission
    backlog = 4 * (batch_size + depth) + 64

    def refill() -> None:
        nonlocal exhausted
        # Enough pending episodes to fill the batch and prefetch; a bounded backlog of
        # records waiting for an earlier candidate to finish (output keeps input order).
        while not exhausted and len(pending) < batch_size + depth and len(jobs) < backlog:
            try:
                rec = next(source)
            except StopIteration:
                exhausted = True
                return
            make_job = job_factory or partial(
                Job,
                return_mode=episode_return,
                hint_source=hint_source,
                contract=contract,
                action_format=action_format,
                conditions=tuple(conditions),
            )
            job = make_job(rec, k, seed, max_turns, episode_timeout)
            stats.candidates += 1
            if job.active:
                stats.envs += 1
                if verify > 0:
                    job.probe = verify_pool.submit(
                        timed, probe, job.code, job.seeds, cfg, DEFAULT_MAX_TURNS
                    )
                    stats.replays += 1
                    job.replays.append(job.probe)
            jobs.append(job)
            pending.extend(job.episodes)

    def prefetch() -> None:
        # Start workers for the next episodes to be admitted while the model generates.
        for ep in itertools.islice(pending, depth):
            if id(ep) not in spawning:
                spawning[id(ep)] = spawn_pool.submit(ep.spawn, cfg)

    def retire(ep: Episode) -> None:
        stats.episodes += 1
        stats.stops[ep.stop] += 1
        stats.returns[ep.condition].append(ep.value)
        ep.job.left -= 1
        close_pool.submit(ep.close)
        if (
            ep.stop in ("terminated", "truncated", "max_turns", "context")
            and verify > 0
            and (
                verify >= 1
                or rng_for(seed, "verify", f"{ep.job.id}/{ep.condition}/{ep.index}").random()
                < verify
            )
        ):
            ep.job.to_replay.append(ep)
        if verify > 0 and ep.job.left == 0 and ep.job.to_replay:
            # One task for all the candidate's replays: they share a worker (verify.py).
            stats.replays += len(ep.job.to_replay)
            ep.job.replays.append(verify_pool.submit(timed, replay_episodes, ep.job.to_replay, cfg))
        if on_episode is not None:
            on_episode(ep)

    def timed(fn, *args):
        t0 = time.monotonic()
        try:
            return fn(*args)
        finally:
            with replay_lock:
                stats.replay_seconds += time.monotonic() - t0

    replay_lock = threading.Lock()

    def finish_ready(block: bool = False) -> Iterator[dict]:
        while jobs and jobs[0].left == 0:
            if not all(f.done() for f in jobs[0].replays):
                if not block:
                    return
                t0 = time.monotonic()
                wait(jobs[0].replays)
                stats.phases["replay_wait"] += time.monotonic() - t0
            yield jobs.popleft().output(agent_info, k)

    try:
        if not hasattr(agent, "act"):
            # A factory: load the model while the first sandboxed workers start.
            refill()
            prefetch()
            t0 = time.monotonic()
            agent = agent()
            stats.load_seconds += time.monotonic() - t0
        ctx_budget = min(int(max_context or agent.max_context), int(agent.max_context))
        agent_info = agent.describe()
        while True:
            refill()
            yield from finish_ready()
            # Admit pending episodes in order up to the batch size, and start them.
            admitted = []
            cap = batch_size if turn >= ramp else -(-batch_size * (turn + 1) // ramp)
            turn += 1
            while len(live) + len(admitted) < cap and pending:
                ep = pending.popleft()
                if id(ep) not in spawning:
                    spawning[id(ep)] = spawn_pool.submit(ep.spawn, cfg)
                admitted.append(ep)
            prefetch()
            if admitted:
                t0 = time.monotonic()
                wait([spawning.pop(id(ep)) for ep in admitted])
                t1 = time.monotonic()
                list(
                    step_pool.map(
                        lambda e: e.begin(agent.format, prompt, episode_timeout), admitted
                    )
                )
                stats.phases["spawn_wait"] += t1 - t0
                stats.phases["reset"] += time.monotonic() - t1
                live.extend(admitted)
            if not live:
                if exhausted and not pending:
                    break
                continue
            acting = [
                ep for ep in live if not ep.done and ep.check_time() and ep.check_room(ctx_budget)
            ]
            if acting:
                t0 = time.monotonic()
                gens = agent.act(acting, ctx_budget)
                dt = time.monotonic() - t0
                stats.generate_seconds += dt
                stats.generate_calls += 1
                stats.model_tokens += sum(len(g.completion_ids) for g in gens)
                t0 = time.monotonic()
                list(
                    step_pool.map(
                        lambda pair: pair[0].advance(
                            pair[1], agent.format, agent.parse_tool_calls, ctx_budget
                        ),
                        zip(acting, gens, strict=True),
                    )
                )
                stats.phases["step"] += time.monotonic() - t0
            still = []
            for ep in live:
                if ep.done:
                    retire(ep)
                else:
                    still.append(ep)
            live = still
        yield from finish_ready(block=True)
    finally:
        t_close = time.monotonic()
        for ep in live:
            ep.close()
        for fut in spawning.values():
            fut.cancel()
        spawn_pool.shutdown(wait=True)
        step_pool.shutdown(wait=True)
        close_pool.shutdown(wait=True)
        verify_pool.shutdown(wait=True, cancel_futures=True)
        for ep in pending:
            ep.close()
        for job in jobs:
            for ep in job.episodes:
                ep.close()
        stats.phases["close"] += time.monotonic() - t_close
        stats.wall_seconds += time.monotonic() - t_start
