"""The checks both environment contracts share (`checks` for ours, `published_checks`
for the published one): the `Rejected` verdict, the per-call checks of metadata, reset and
step replies, playing one episode through a session (`run_episode`), and the episode
comparisons behind `nondeterministic`, `never_terminates` and `trivial`.

Both contract modules import this one and it imports neither, as Gymnasium's full
environment checker imports its passive checker and never the reverse.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..records import REASONS

# Sandbox failures keep the sandbox's own code (timeout, memory, limit, flood, protocol,
# crash, import_crash, ...): all of them are records.REASONS codes.
_SANDBOX_CODES = frozenset(REASONS) - {"ok"}

RETURN_EPS = 1e-6
SOLVED = 1.0 - 1e-6


class Rejected(Exception):
    """A check failed: `reason` is a records.REASONS code, `detail` one line for humans."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason, self.detail = reason, " ".join(str(detail).split())[:500]
        super().__init__(f"{reason}: {self.detail}")


def from_env_error(err: Exception) -> Rejected:
    """An EnvError of the sandbox as a verdict."""
    reason = getattr(err, "reason", "crash")
    detail = getattr(err, "detail", str(err))
    if reason not in _SANDBOX_CODES:
        return Rejected("crash", f"{reason}: {detail}")
    return Rejected(reason, detail)


def check_metadata(meta: object) -> dict:
    """metadata = {"name": str, "max_turns": int >= 1, "tools": [function specs]?}."""
    if not isinstance(meta, dict):
        raise Rejected(
            "no_env_class", f"the Env class has no metadata dict (got {type(meta).__name__})"
        )
    name, turns, tools = meta.get("name"), meta.get("max_turns"), meta.get("tools")
    if not isinstance(name, str) or not name.strip():
        raise Rejected("no_env_class", "metadata['name'] must be a non-empty string")
    if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= 1000:
        raise Rejected(
            "no_env_class", f"metadata['max_turns'] must be an int in 1..1000, got {turns!r}"
        )
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise Rejected(
                "no_env_class", "metadata['tools'] must be a non-empty list of function specs"
            )
        for t in tools:
            if tool_name(t) is None:
                raise Rejected(
                    "no_env_class", f"metadata['tools'] entry is not a function spec: {str(t)[:80]}"
                )
    return {"name": name.strip(), "max_turns": turns, "tools": tools or None}


def tool_name(spec: object) -> str | None:
    """The name of a JSON-schema function spec, plain or OpenAI style ({"type": "function",
    "function": {...}})."""
    if not isinstance(spec, dict):
        return None
    fn = spec.get("function") if isinstance(spec.get("function"), dict) else spec
    return fn.get("name") if isinstance(fn.get("name"), str) else None


def tool_params(spec: dict) -> dict:
    fn = spec.get("function") if isinstance(spec.get("function"), dict) else spec
    params = fn.get("parameters") or {}
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


# --------------------------------------------------------------------------- per-call checks


def check_reset_reply(out: object) -> tuple[str, dict]:
    """(observation, info) of a reset reply of either contract, or the rejection."""
    if not (isinstance(out, (list, tuple)) and len(out) == 2):
        raise Rejected("bad_reset", "reset() must return (observation, info)")
    obs, info = out
    if not isinstance(obs, str):
        raise Rejected("bad_reset", f"the observation must be a str, got {type(obs).__name__}")
    if not isinstance(info, dict):
        raise Rejected("bad_reset", f"info must be a dict, got {type(info).__name__}")
    return obs, info


def check_reset(out: object) -> tuple[str, str, list[str]]:
    obs, info = check_reset_reply(out)
    hint, solution = info.get("hint"), info.get("solution")
    if hint is None:
        hint = ""  # optional: spade-hint writes the hints by default
    elif not isinstance(hint, str):
        raise Rejected("bad_reset", "info['hint'], when given, must be a str")
    if (
        not isinstance(solution, list)
        or not solution
        or not all(isinstance(a, str) for a in solution)
    ):
        raise Rejected("bad_reset", "info['solution'] must be a non-empty list of str actions")
    return obs, hint, solution


def check_step(out: object) -> tuple[str, float, bool, bool]:
    if not (isinstance(out, (list, tuple)) and len(out) == 5):
        raise Rejected(
            "bad_step", "step() must return (observation, reward, terminated, truncated, info)"
        )
    obs, reward, terminated, truncated, info = out
    if not isinstance(obs, str):
        raise Rejected("bad_step", f"the observation must be a str, got {type(obs).__name__}")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise Rejected("bad_step", f"the reward must be a number, got {type(reward).__name__}")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise Rejected("bad_step", "terminated and truncated must be bools")
    if not isinstance(info, dict):
        raise Rejected("bad_step", f"info must be a dict, got {type(info).__name__}")
    if not math.isfinite(reward):
        raise Rejected("reward_out_of_range", f"step() returned the reward {reward}")
    return obs, float(reward), terminated, truncated


# --------------------------------------------------------------------------- episodes


@dataclass
class CheckEpisode:
    seed: int
    policy: str
    observation: str = ""
    hint: str = ""
    solution: list[str] = field(default_factory=list)
    steps: list[tuple] = field(default_factory=list)  # (action, obs, reward, terminated, truncated)
    ret: float = 0.0
    terminated: bool = False
    truncated: bool = False

    @property
    def ended(self) -> bool:
        return self.terminated or self.truncated

    @property
    def solved(self) -> bool:
        return self.ret >= SOLVED

    @property
    def final_reward(self) -> float:
        """The published return: the last step's reward if the episode terminated, else 0."""
        return float(self.steps[-1][2]) if self.terminated and self.steps else 0.0


Policy = Callable[[str, int, random.Random], str]


def call(session, method: str, *args, **kwargs):
    """One session call; sandbox failures become verdicts."""
    try:
        return getattr(session, method)(*args, **kwargs)
    except Rejected:
        raise
    except Exception as e:  # EnvError, or anything a session raises
        if type(e).__name__ == "EnvError" or hasattr(e, "reason"):
            raise from_env_error(e) from None
        raise


class TimedSession:
    """A session whose calls fail with `timeout` once the candidate's time budget is spent
    (each call is also bounded by the sandbox's own call timeout)."""

    def __init__(self, session, budget: float | None):
        self.session = session
        self.budget = budget
        self.deadline = None if budget is None else time.monotonic() + budget

    def __getattr__(self, name):
        return getattr(self.session, name)

    def _check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Rejected(
                "timeout", f"the checks took more than the candidate's budget of {self.budget:g}s"
            )

    def reset(self, *args, **kwargs):
        self._check()
        return self.session.reset(*args, **kwargs)

    def step(self, *args, **kwargs):
        self._check()
        return self.session.step(*args, **kwargs)

    def renew(self, *args, **kwargs):
        self._check()
        return self.session.renew(*args, **kwargs)


def session_metadata(session) -> object:
    try:
        return session.metadata
    except Exception as e:
        if hasattr(e, "reason"):
            raise from_env_error(e) from None
        raise


def run_episode(
    session,
    seed: int,
    policy: Policy | list[str],
    max_turns: int,
    name: str,
    rng_seed: int = 0,
    reset_check: Callable = check_reset,
) -> CheckEpisode:
    """Reset with `seed`, then act until the episode ends or `max_turns` actions were taken
    (a list policy plays its actions in order and stops when it runs out). `reset_check`
    turns the reset reply into (observation, hint, solution) and rejects a bad one."""
    obs, hint, solution = reset_check(call(session, "reset", seed=seed))
    ep = CheckEpisode(seed, name, obs, hint, solution)
    rng = random.Random(rng_seed)
    for turn in range(max_turns):
        if isinstance(policy, list):
            if turn >= len(policy):
                break
            action = policy[turn]
        else:
            action = policy(obs, turn, rng)
        obs, reward, terminated, truncated = check_step(call(session, "step", action))
        ep.steps.append((action, obs, reward, terminated, truncated))
        ep.ret += reward
        if terminated or truncated:
            ep.terminated, ep.truncated = terminated, truncated
            break
    return ep


def check_ends(ep: CheckEpisode, max_turns: int) -> None:
    if not ep.ended:
        raise Rejected(
            "never_terminates",
            f"seed {ep.seed}, {ep.policy} policy: no "
            f"termination or truncation after {max_turns} turns",
        )


def check_same_reset(a: tuple, b: tuple, seed: int) -> None:
    for what, x, y in zip(("observation", "hint", "solution"), a, b, strict=True):
        if x != y:
            raise Rejected(
                "nondeterministic",
                f"seed {seed}: two resets with the same seed gave different {what}s",
            )


def check_same_episode(a: CheckEpisode, b: CheckEpisode) -> None:
    for what in ("observation", "hint", "solution"):
        if getattr(a, what) != getattr(b, what):
            raise Rejected(
                "nondeterministic",
                f"seed {a.seed}: reset() gave a different {what} the second time",
            )
    for i, (x, y) in enumerate(zip(a.steps, b.steps, strict=False)):
        if x != y:
            raise Rejected(
                "nondeterministic",
                f"seed {a.seed}, {a.policy} policy: step {i + 1} differs on replay",
            )
    if len(a.steps) != len(b.steps):
        raise Rejected(
            "nondeterministic",
            f"seed {a.seed}, {a.policy} policy: the replayed episode has a different length",
        )


def _tokens(obs: str) -> list[str]:
    return re.findall(r"\w+", obs) or ["x"]


def check_trivial(solved: dict[str, int], n_seeds: int) -> None:
    need = max(1, math.ceil(n_seeds / 2))
    for name, n in solved.items():
        if name != "hint" and n >= need:
            raise Rejected("trivial", f"the {name} policy solves {n} of {n_seeds} seeds")


class Twin:
    """The second worker of `check_across_workers` (`session.twin()`), started on a thread
    as soon as the first is open, so that its start (a bwrap and Python of its own,
    ~0.5 s) overlaps the first one's checks. `close` stops it whenever it is ready."""

    def __init__(self, session):
        self.future: Future | None = None
        if getattr(session, "twin", None) is not None:
            self.future = Future()
            threading.Thread(target=self._start, args=(session,), daemon=True).start()

    def _start(self, session) -> None:
        try:
            self.future.set_result(session.twin())
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits for it
            self.future.set_exception(e)

    def session(self):
        return call(self.future, "result")  # a sandbox failure on start is a verdict

    def close(self) -> None:
        if self.future is not None:
            self.future.add_done_callback(lambda f: f.exception() or f.result().close())


def check_across_workers(twin: Twin, episodes: list[CheckEpisode], reset_check: Callable) -> None:
    """Each seed's first and longest episodes, replayed action for action in a fresh worker
    of another identity (`EnvSession.twin`: uid slot, start mode, address layout), must
    be the same episodes: a task drawn from the worker's uid, addresses or an unseeded
    source differs there, on every seed or only on some."""
    if twin.future is None:
        return
    picks: dict[int, list[CheckEpisode]] = {}
    for ep in episodes:
        mine = picks.setdefault(ep.seed, [ep])
        if len(ep.steps) > len(mine[-1].steps):
            mine[1:] = [ep]
    other = twin.session()
    for ep in (e for eps in picks.values() for e in eps):
        again = run_episode(
            other,
            ep.seed,
            [s[0] for s in ep.steps],
            len(ep.steps),
            ep.policy,
            reset_check=reset_check,
        )
        try:
            check_same_episode(ep, again)
        except Rejected as r:
            raise Rejected(
                r.reason,
                f"{r.detail} (in a fresh worker of another uid, start mode and address layout)",
            ) from None
