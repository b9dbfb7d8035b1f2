"""Validation of an environment of the published contract (see `contracts`).

The published release checks that an environment loads, resets and takes three steps
without crashing (`\\boxed{1}`, `\\boxed{test}`, `\\boxed{42}`, rewards in [-10, 10]).
Here it also gets every check of ours that needs no verified solution:
  - loads / resets: the adapter found the class as the release's loader does; reset()
    gives (str, dict) and solution(), where there is one, a str (`solution_text`);
    with `require_solution` a class without solution() is rejected (no_env_class);
  - three_steps: the release's three probe commands, then three unrecognised commands
    (random words of the observation, not wrapped in \\boxed{}), must be answered;
  - baselines: the empty reply, constant commands and random commands in the
    environment's own protocol (\\boxed{...} or <tool_call>), each until the episode ends:
    every step's reward in [-10, 10] as the release accepts (the return, the final
    reward clipped, stays in [-1, 1]) (reward_range), every episode ends within max_turns
    (terminates), none solves at least half the seeds (not_trivial);
  - hint_leak: where solution() spells out an action sequence, the first observation
    must not contain all of it;
  - deterministic: two resets with one seed agree, and the first seed's random episode
    replays identically in a fresh instance of the re-executed module;
  - resource limits (the sandbox) and duplicates (the host, before any of this).
No feasibility check: solution() is text, not a proof. The checked metadata says so:
`feasibility` is `reference` (solution() gives a reference text) or `unverified` (no
solution(): valid as the release has it, but nothing says it can be won).
"""

from __future__ import annotations

import json
import random
import re

from .contracts import _BOXED, solution_actions
from .shared_checks import (
    RETURN_EPS,
    SOLVED,
    CheckEpisode,
    Policy,
    Rejected,
    _tokens,
    call,
    check_ends,
    check_metadata,
    check_reset_reply,
    check_same_episode,
    check_same_reset,
    check_trivial,
    run_episode,
    session_metadata,
)

PUBLISHED_CHECKS = (
    "loads",
    "resets",
    "three_steps",
    "deterministic",
    "reward_range",
    "terminates",
    "hint_leak",
    "not_trivial",
    "resources",
)
PROBE_STEPS = 3
RELEASE_PROBES = ("\\boxed{1}", "\\boxed{test}", "\\boxed{42}")  # their load check's actions
REWARD_BOUND = 10.0  # their load check accepts step rewards in [-10, 10]


def check_step_rewards(ep: CheckEpisode) -> None:
    """Every step's reward within the release's [-10, 10] (the episode's return is its
    final reward, clipped to [-1, 1] as published)."""
    for action, _obs, reward, *_ in ep.steps:
        if not -REWARD_BOUND - RETURN_EPS <= reward <= REWARD_BOUND + RETURN_EPS:
            raise Rejected(
                "reward_out_of_range",
                f"seed {ep.seed}, {ep.policy} policy: step({action[:40]!r}) returned the "
                f"reward {reward:g}, outside [-{REWARD_BOUND:g}, {REWARD_BOUND:g}]",
            )


def check_has_solution(meta: dict, required: bool) -> str:
    """`reference` or `unverified`; with `required`, no solution() is a rejection."""
    if meta.get("has_solution", True):
        return "reference"
    if required:
        raise Rejected(
            "no_env_class",
            f"{meta.get('name')} has reset() and step() but no solution() (--require-solution)",
        )
    return "unverified"


def check_published_reset(out: object) -> tuple[str, str, list[str]]:
    """(observation, solution text, the actions it spells out) of a reset reply."""
    obs, info = check_reset_reply(out)
    text = info.get("solution_text")
    if not isinstance(text, str):
        raise Rejected("bad_reset", "solution() must return a str")
    return obs, text, solution_actions(text)


def check_observation_leak(obs: str, actions: list[str], seed: int) -> None:
    """The first observation must not spell out solution()'s whole action sequence (the
    commands inside \\boxed{}, or the tool-call blocks). Literal only (case and separators
    aside): an observation poses the task, so a sum the player must work out is no leak,
    as it would be in a hint."""
    from .leaks import MIN_LENGTH, squash

    inner = [a[len("\\boxed{") : -1] if a.startswith("\\boxed{") else a for a in actions]
    whole = squash(" ".join(inner))
    if len(whole) >= MIN_LENGTH and whole in squash(obs):
        raise Rejected(
            "hint_leak",
            f"seed {seed}: the first observation contains the whole action sequence of solution()",
        )


def _random_words(obs: str, rng: random.Random) -> str:
    toks = _tokens(obs)
    return " ".join(rng.choice(toks) for _ in range(rng.randint(1, 3)))


def published_policies(protocol: str) -> dict[str, Policy]:
    """The dumb policies, speaking the environment's protocol."""
    pol: dict[str, Policy] = {"empty": lambda o, t, r: ""}
    if protocol == "tool_call":
        pol["constant done"] = lambda o, t, r: "<answer>done</answer>"

        def random_call(obs: str, turn: int, rng: random.Random) -> str:
            toks = _tokens(obs)
            nums = [t for t in toks if t.isdigit()] or ["0", "1"]
            args = {
                rng.choice(toks): int(rng.choice(nums)) if rng.random() < 0.5 else rng.choice(toks)
            }
            return f"<tool_call>{json.dumps({'name': rng.choice(toks), 'arguments': args})}</tool_call>"

        pol["random"] = random_call
    else:
        for c in ("0", "1", "yes"):
            pol[f"constant \\boxed{{{c}}}"] = lambda o, t, r, c=c: f"\\boxed{{{c}}}"
        pol["random"] = lambda o, t, r: f"\\boxed{{{_random_words(o, r)}}}"
        pol["random command"] = example_command
    return pol


def example_command(obs: str, turn: int, rng: random.Random) -> str:
    """A command shaped like one the observation shows (`\\boxed{try DDD}`,
    `\\boxed{north|south}`): alternatives picked at random, upper-case placeholders
    filled with random digits. Without an example, random words."""
    examples = _BOXED.findall(obs)
    if not examples:
        return f"\\boxed{{{_random_words(obs, rng)}}}"
    text = rng.choice(examples)
    text = re.sub(r"\w+(?:\|\w+)+", lambda m: rng.choice(m.group(0).split("|")), text)
    text = re.sub(
        r"\b[A-Z]+\b", lambda m: "".join(rng.choice("0123456789") for _ in m.group(0)), text
    )
    return f"\\boxed{{{text}}}"


def run_published_checks(
    session,
    seeds: list[int],
    protocol: str,
    episodes: list[CheckEpisode] | None = None,
    require_solution: bool = False,
) -> dict:
    """All dynamic checks of a published environment; returns its checked metadata
    (with contract, action_format, feasibility and the first seed's solution text)."""
    played = episodes if episodes is not None else []
    raw = session_metadata(session)
    meta = check_metadata(raw)
    feasibility = check_has_solution(raw, require_solution)
    turns = meta["max_turns"]
    solved: dict[str, int] = {}
    first: CheckEpisode | None = None
    for k, seed in enumerate(seeds):
        a = check_published_reset(call(session, "reset", seed=seed))
        check_same_reset(a, check_published_reset(call(session, "reset", seed=seed)), seed)
        obs, _text, actions = a
        if actions:
            check_observation_leak(obs, actions, seed)
        release = run_episode(
            session,
            seed,
            list(RELEASE_PROBES[:turns]),
            turns,
            "release probes",
            reset_check=check_published_reset,
        )
        played.append(release)
        check_step_rewards(release)
        probe = run_episode(
            session,
            seed,
            lambda o, t, r: _random_words(o, r),
            min(PROBE_STEPS, turns),
            "unrecognised command",
            rng_seed=seed,
            reset_check=check_published_reset,
        )
        played.append(probe)
        check_step_rewards(probe)
        if actions:  # not a feasibility check (solution() is unchecked text): one more
            # trajectory for the multi-turn measure, whose return must still be in range
            ref = run_episode(
                session,
                seed,
                actions,
                turns,
                "solution() actions",
                reset_check=check_published_reset,
            )
            played.append(ref)
            check_step_rewards(ref)
        for name, policy in published_policies(protocol).items():
            ep = run_episode(
                session, seed, policy, turns, name, rng_seed=seed, reset_check=check_published_reset
            )
            played.append(ep)
            check_step_rewards(ep)
            check_ends(ep, turns)
            solved[name] = solved.get(name, 0) + int(ep.final_reward >= SOLVED)
            if k == 0 and name == "random":
                first = ep
    if getattr(session, "renew", None) is not None:
        call(session, "renew", reload=True)
    again = run_episode(
        session,
        seeds[0],
        published_policies(protocol)["random"],
        turns,
        "random",
        rng_seed=seeds[0],
        reset_check=check_published_reset,
    )
    check_same_episode(first, again)
    check_trivial(solved, len(seeds))
    return {
        **meta,
        "contract": "published",
        "action_format": protocol,
        "feasibility": feasibility,
        "solution_text": first.hint if first else "",
    }
