"""The validation checks of spade-validate: many small `check_*` functions, each failing
with one stable reason code (docs/commands/spade-validate.md#reason-codes).

A check raises `Rejected(reason, detail)`; `validate_code` runs them in order and the first
failure is the verdict. Everything that executes designer code goes through a session
object with `metadata`, `reset(seed, options)` and `step(action)` -- in production an
`spade_cli.sandbox.EnvSession`, whose failures (`EnvError`) are mapped to reason codes.

What runs, per seed (all seeds in one sandboxed worker, one env instance):
  reset -> the solution episode (feasible, ends, return in [0, 1])
  -> baseline episodes: empty action, constant actions, the first solution action
     repeated, random tokens of the observation (random tool calls for tool envs), and
     the hint itself as the action; each must end within max_turns with a return in
     [0, 1]; an env that a baseline solves on at least half the seeds is `trivial`,
     one the hint-as-action policy solves is `hint_leak`.
Two resets with the same seed must agree, and at the end the first seed is replayed
(reset + solution + random baseline) in a fresh instance of the re-executed module, after
all other episodes ran: a different observation, hint, solution or transition is
`nondeterministic` (this catches unseeded or global randomness, clocks and counters).
Last, each seed's first and longest episodes are replayed in a second, fresh worker of
another identity (uid slot, start mode, address layout: `check_across_workers`), under
either contract: a task drawn from who the worker is differs there.

Environments of the published contract (`contracts`) get `published_checks` instead;
the checks both contracts use live below both, in `shared_checks`.
Under either contract every episode played feeds `depends_on_actions`: the verdict's
`multi_turn` (and, with reject_single_shot, the `single_shot` rejection).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import pyparse
from ..errors import SpadeError
from .contracts import published_protocol, resolve_contract
from .leaks import hint_leak
from .published_checks import PUBLISHED_CHECKS, check_published_reset, run_published_checks
from .shared_checks import (
    RETURN_EPS,
    CheckEpisode,
    Policy,
    Rejected,
    TimedSession,
    Twin,
    _tokens,
    call,
    check_across_workers,
    check_ends,
    check_metadata,
    check_reset,
    check_same_episode,
    check_same_reset,
    check_trivial,
    from_env_error,
    run_episode,
    session_metadata,
    tool_name,
    tool_params,
)

CONSTANT_ACTIONS = ("0", "1", "yes")


# --------------------------------------------------------------------------- static checks


def check_code_present(code: str | None) -> str:
    if code is None or not code.strip():
        raise Rejected("no_code", "the answer holds no single ```python block")
    return code


def check_syntax(code: str) -> None:
    """Parsing and compiling run on the host; nothing is executed."""
    try:
        pyparse.compile_checked(code, "<env>")
    except SyntaxError as e:
        raise Rejected("syntax_error", f"line {e.lineno}: {e.msg}") from None
    except (ValueError, MemoryError, RecursionError) as e:
        raise Rejected("syntax_error", f"{type(e).__name__}: {e}") from None


def check_return(ep: CheckEpisode) -> None:
    if not -RETURN_EPS <= ep.ret <= 1 + RETURN_EPS:
        raise Rejected(
            "reward_out_of_range",
            f"seed {ep.seed}, {ep.policy} policy: the return is {ep.ret:g}, outside [0, 1]",
        )


def check_solution_fits(solution: list[str], max_turns: int, seed: int) -> None:
    if len(solution) > max_turns:
        raise Rejected(
            "infeasible",
            f"seed {seed}: the solution has {len(solution)} actions but max_turns is {max_turns}",
        )


def check_feasible(ep: CheckEpisode) -> None:
    if not ep.solved:
        raise Rejected(
            "infeasible",
            f"seed {ep.seed}: playing info['solution'] "
            f"({len(ep.solution)} actions) returns {ep.ret:g}, not 1",
        )


def check_solution_terminates(ep: CheckEpisode) -> None:
    if not ep.terminated:
        raise Rejected(
            "never_terminates",
            f"seed {ep.seed}: the solution reaches return "
            f"{ep.ret:g} but the episode does not terminate",
        )


def check_hint_text(hint: str, solution: list[str], seed: int, observation: str = "") -> None:
    """The hint must not give the solution away in any form `leaks.hint_leak` reads
    (plain, separated, spelled out, reversed, encoded, as initials or a sum)."""
    why = hint_leak(hint, solution, observation)
    if why is not None:
        raise Rejected("hint_leak", f"seed {seed}: {why}")


# --------------------------------------------------------------------------- baselines


def random_text_policy(obs: str, turn: int, rng: random.Random) -> str:
    toks = _tokens(obs)
    return " ".join(rng.choice(toks) for _ in range(rng.randint(1, 3)))


def random_tool_policy(tools: list[dict]) -> Policy:
    """A random call of a random tool, each argument a random token of the observation
    (a number for integer/number parameters)."""

    def act(obs: str, turn: int, rng: random.Random) -> str:
        spec = rng.choice(tools)
        toks = _tokens(obs)
        # isdecimal and ASCII: "²".isdigit() is true, but int("²") fails.
        nums = [t for t in toks if t.isascii() and t.isdecimal() and len(t) < 19] or ["0", "1"]
        args = {}
        for pname, p in tool_params(spec).items():
            kind = p.get("type") if isinstance(p, dict) else None
            args[pname] = (
                int(rng.choice(nums)) if kind in ("integer", "number") else rng.choice(toks)
            )
        return json.dumps({"name": tool_name(spec), "arguments": args})

    return act


def baseline_policies(meta: dict, solution: list[str], hint: str) -> dict[str, Policy]:
    """The dumb policies an environment must not fall to (the hint policy is separate)."""
    pol: dict[str, Policy] = {"empty": lambda o, t, r: ""}
    for c in CONSTANT_ACTIONS:
        pol[f"constant {c!r}"] = lambda o, t, r, c=c: c
    if len(solution) > 1 and len(set(solution)) > 1:
        first = solution[0]
        pol["repeat first solution action"] = lambda o, t, r: first
    pol["random"] = random_tool_policy(meta["tools"]) if meta.get("tools") else random_text_policy
    pol["nonsense"] = nonsense_policy(meta.get("tools"))
    return pol


_NONSENSE = (
    "banana",
    "42",
    "none",
    "a",
    "b",
    "c",
    "true",
    "false",
    "0",
    "-1",
    "x",
    "yes",
    "no",
    "done",
    "solve",
    "answer",
    "hello",
    "ok",
    "?",
    "1 2 3",
    "left",
    "up",
)


def nonsense_policy(tools: list[dict] | None) -> Policy:
    """Seeded random answers that do not come from the observation: words, numbers and
    short strings chosen per seed, so an environment cannot whitelist a known baseline
    (one that pays "banana" is found on some seed, and which seed is not known in advance)."""

    def word(rng: random.Random) -> str:
        pick = rng.random()
        if pick < 0.4:
            return rng.choice(_NONSENSE)
        if pick < 0.7:
            return str(rng.randint(-10, 10 ** rng.randint(1, 6)))
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 8)))

    def act(obs: str, turn: int, rng: random.Random) -> str:
        if not tools:
            return word(rng)
        spec = rng.choice(tools)
        args = {
            p: (
                rng.randint(-5, 100)
                if isinstance(v, dict) and v.get("type") in ("integer", "number")
                else word(rng)
            )
            for p, v in tool_params(spec).items()
        }
        return json.dumps({"name": tool_name(spec), "arguments": args})

    return act


# --------------------------------------------------------------------------- the whole run


@dataclass
class Verdict:
    valid: bool
    reason: str
    detail: str
    seconds: float
    seeds: list[int]
    meta: dict | None = None
    contract: str = "spade"
    checks: list[str] = field(
        default_factory=list
    )  # the checks that ran (and passed, bar the last)
    multi_turn: bool | None = None  # observations depend on the actions (None: not measured)
    trajectory: list[dict] | None = None  # one episode played, for the judge (keep_trajectory)


# The checks each contract runs, in order (docs/commands/spade-validate.md#how-it-checks).
SPADE_CHECKS = (
    "loads",
    "metadata",
    "resets",
    "deterministic",
    "feasible",
    "reward_range",
    "terminates",
    "hint_leak",
    "not_trivial",
    "resources",
)


def depends_on_actions(episodes: list[CheckEpisode]) -> bool:
    """Genuinely multi-turn: two episodes of one seed that took different actions see
    different observations at a step where both go on. A quiz that ends on its first
    answer, or an environment whose observations ignore the actions, is not."""
    by_seed: dict[int, list[CheckEpisode]] = {}
    for ep in episodes:
        by_seed.setdefault(ep.seed, []).append(ep)
    for eps in by_seed.values():
        going = [[s for s in ep.steps if not (s[3] or s[4])] for ep in eps]
        for i, a in enumerate(going):
            for b in going[i + 1 :]:
                for x, y in zip(a, b, strict=False):
                    if x[0] != y[0] and x[1] != y[1]:
                        return True
    return False


def check_multi_turn(multi_turn: bool) -> None:
    if not multi_turn:
        raise Rejected(
            "single_shot",
            "no observation depends on the actions taken before it "
            "(a single-shot quiz, not an interactive environment)",
        )


def check_contract(meta: object, contract: str) -> None:
    """The class found in the sandbox is of the contract the candidate is checked under."""
    found = (
        "published" if isinstance(meta, dict) and meta.get("contract") == "published" else "spade"
    )
    if found != contract:
        what = {
            "published": "a plain class of the published form (reset, step, solution)",
            "spade": "a gymnasium.Env subclass (our contract)",
        }[found]
        raise Rejected(
            "no_env_class",
            f"the module defines {what}, but it is checked under --contract {contract}",
        )


def check_hint_policy(solved: dict[str, int], n_seeds: int) -> None:
    need = max(1, math.ceil(n_seeds / 2))
    if solved.get("hint", 0) >= need:
        raise Rejected(
            "hint_leak",
            f"sending the hint as the action solves {solved['hint']} of {n_seeds} seeds",
        )


def run_checks(session, seeds: list[int], episodes: list[CheckEpisode] | None = None) -> dict:
    """All dynamic checks on an open session; returns the checked metadata. Every episode
    played is appended to `episodes` (when given)."""
    played = episodes if episodes is not None else []
    meta = check_metadata(session_metadata(session))
    turns = meta["max_turns"]
    solved: dict[str, int] = {}
    first: list[CheckEpisode] = []
    for k, seed in enumerate(seeds):
        first_reset = check_reset(call(session, "reset", seed=seed))
        check_same_reset(first_reset, check_reset(call(session, "reset", seed=seed)), seed)
        _, hint, solution = first_reset
        check_solution_fits(solution, turns, seed)
        sol = run_episode(session, seed, solution, turns, "solution")
        played.append(sol)
        check_return(sol)
        check_feasible(sol)
        check_solution_terminates(sol)
        policies = baseline_policies(meta, solution, hint)
        if hint.strip():
            check_hint_text(hint, solution, seed, first_reset[0])
            policies["hint"] = lambda o, t, r, h=hint: h
        for name, policy in policies.items():
            ep = run_episode(session, seed, policy, turns, name, rng_seed=seed)
            played.append(ep)
            check_return(ep)
            check_ends(ep, turns)
            solved[name] = solved.get(name, 0) + int(ep.solved)
            if k == 0 and name == "random":
                first = [sol, ep]
    # Replay the first seed last, after every other episode has moved any hidden state on,
    # in a fresh instance of a freshly executed module: an episode must depend on its seed
    # only, not on instance or module state left by earlier episodes.
    renew = getattr(session, "renew", None)
    if renew is not None:
        call(session, "renew", reload=True)
    seed = seeds[0]
    again = run_episode(session, seed, first[0].solution, turns, "solution")
    check_same_episode(first[0], again)
    policy = baseline_policies(meta, first[0].solution, first[0].hint)["random"]
    check_same_episode(first[1], run_episode(session, seed, policy, turns, "random", rng_seed=seed))
    check_hint_policy(solved, len(seeds))
    check_trivial(solved, len(seeds))
    return meta


def validate_code(
    code: str | None,
    seeds: list[int],
    open_session: Callable[[str], object],
    budget: float | None = None,
    contract: str = "auto",
    reject_single_shot: bool = False,
    require_solution: bool = False,
    keep_trajectory: bool = False,
) -> Verdict:
    """The verdict on one design. `open_session(code)` returns a context manager yielding
    a session (an EnvSession in production); `budget` caps the wall time of its checks
    (seconds, verdict `timeout`). `contract`: spade, published or auto (from the code,
    `contracts.detect_contract`); `require_solution`: a published class needs solution();
    `keep_trajectory`: a valid verdict carries one episode (judge.trajectory_of) for the
    judge: the first seed's random-policy one."""

    t0 = time.perf_counter()
    meta = None
    kind = resolve_contract(code or "", contract)
    names = PUBLISHED_CHECKS if kind == "published" else SPADE_CHECKS
    episodes: list[CheckEpisode] = []
    multi_turn = None
    try:
        code = check_code_present(code)
        check_syntax(code)
        try:
            with open_session(code) as session:
                twin = Twin(session)
                try:
                    session = TimedSession(session, budget)
                    check_contract(session_metadata(session), kind)
                    if kind == "published":
                        protocol = published_protocol(code)
                        meta = run_published_checks(
                            session, seeds, protocol, episodes, require_solution=require_solution
                        )
                        check_across_workers(twin, episodes, check_published_reset)
                    else:
                        meta = run_checks(session, seeds, episodes)
                        check_across_workers(twin, episodes, check_reset)
                finally:
                    twin.close()
        except Rejected:
            raise
        except SpadeError:
            raise  # the sandbox cannot run here (ResourceError): the stage's problem
        except Exception as e:
            if hasattr(e, "reason"):
                raise from_env_error(e) from None
            # Whatever else the candidate's answers made the checks trip over is its own
            # verdict: one candidate must never fail the batch.
            raise Rejected(
                "protocol",
                f"the checks could not use what the environment sent: {type(e).__name__}: {e}",
            ) from None
        multi_turn = depends_on_actions(episodes)
        if reject_single_shot:
            names = (*names, "multi_turn")
            check_multi_turn(multi_turn)
    except Rejected as r:
        if episodes:
            multi_turn = depends_on_actions(episodes)
        return Verdict(
            False,
            r.reason,
            r.detail,
            round(time.perf_counter() - t0, 4),
            seeds,
            contract=kind,
            checks=list(names),
            multi_turn=multi_turn,
        )
    trajectory = None
    if keep_trajectory and episodes:
        from .judge import trajectory_of

        shown = next(
            (e for e in episodes if e.policy == "random" and e.seed == seeds[0]), episodes[0]
        )
        trajectory = trajectory_of(shown)
    return Verdict(
        True,
        "ok",
        "",
        round(time.perf_counter() - t0, 4),
        seeds,
        meta,
        contract=kind,
        checks=list(names),
        multi_turn=multi_turn,
        trajectory=trajectory,
    )
