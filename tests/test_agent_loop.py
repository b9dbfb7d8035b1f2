"""spade-rollout, spade-eval and the gym wrapper drive environments alike: the same turn
limit for an environment that declares none, the same action for the same model reply."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from spade_cli.engines import Generation, Sampling, parse_tool_calls
from spade_cli.envs.actions import DEFAULT_MAX_TURNS, reply_actions, turn_limit
from spade_cli.evals.agent import run_model
from spade_cli.evals.base import Task
from spade_cli.records import new_record
from spade_cli.rollout import ReplayAgent, run_rollouts
from spade_cli.rollout.episode import Episode
from spade_cli.rollout.trajectory import NoTokens, Trajectory
from spade_cli.sandbox import SandboxConfig

from .scripted_engine import ScriptedEngine

CFG = SandboxConfig(call_timeout=5.0)

# Never ends by itself and declares no max_turns: only the driver's limit stops it.
ENDLESS = """
import gymnasium as gym

class Endless(gym.Env):
    metadata = {"name": "endless"}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return "go", {"hint": "", "solution": ["x"] * 100}

    def step(self, action):
        return "again", 0.0, False, False, {}
"""


class Recorder:
    """An in-process contract environment that keeps every action it is given."""

    def __init__(self, tools=None, max_turns=None):
        self.metadata = {"name": "recorder", **({"max_turns": max_turns} if max_turns else {})}
        if tools:
            self.metadata["tools"] = tools
        self.actions: list[str] = []

    def reset(self, seed=None, options=None):
        return "go", {"hint": "", "solution": []}

    def step(self, action):
        self.actions.append(action)
        return "ok", 0.0, False, False, {}

    def close(self):
        pass


TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
REPLIES = [
    "  left \n",
    "<think>maybe up?</think>\n down",
    "<think>cut off before the answer",
    '<think><tool_call>\n{"name": "add", "arguments": {"a": 9}}\n</tool_call></think>'
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    '<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 3}"}\n</tool_call>',
    "no call here, just text",
]


def fixed(tokenizer, reply: str) -> ScriptedEngine:
    """An engine giving every prompt the same reply (the eval loop's model side)."""
    return ScriptedEngine(tokenizer, lambda first, turn: reply)


def eval_actions(tokenizer, reply: str, tools) -> list[str]:
    # As many turns as the reply has actions: the episode is exactly one generation.
    env = Recorder(tools, max_turns=len(reply_actions(reply, tools, parse_tool_calls)[1]))
    task = Task("t", "t/0", "t", lambda: env, seed=0)
    run_model(fixed(tokenizer, reply), [task], 1, Sampling(max_tokens=4), seed=0)
    return env.actions


def rollout_actions(reply: str, tools, max_turns: int = 100) -> list[str]:
    env = Recorder(tools)

    class Job:
        timeout = 10.0
        return_mode = "sum"

    ep = Episode(Job(), False, 0, 0)
    ep.session, ep.tools, ep.max_turns, ep.system = env, tools, max_turns, ""
    ep.traj, ep.deadline = Trajectory([]), math.inf
    ep.advance(Generation(reply, [], [0], None, "stop"), NoTokens(), parse_tool_calls, 10**9)
    return env.actions


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["text", "tools"])
@pytest.mark.parametrize("reply", REPLIES)
def test_eval_and_rollout_turn_a_reply_into_the_same_actions(tiny_tokenizer, reply, tools):
    expected = reply_actions(reply, tools, parse_tool_calls)[1]
    assert eval_actions(tiny_tokenizer, reply, tools) == rollout_actions(reply, tools) == expected


def test_the_parser_drops_thinking_and_reads_every_real_call():
    calls, actions = reply_actions(REPLIES[3], TOOLS, parse_tool_calls)
    assert [json.loads(a) for a in actions] == [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "add", "arguments": {"a": 3}},
    ]
    assert len(calls) == 2
    assert reply_actions(REPLIES[1], None, parse_tool_calls) == ([], ["down"])
    assert reply_actions(REPLIES[3], None, parse_tool_calls)[0] == []  # no tools: text


def test_turn_limit_default_and_cap():
    assert (
        turn_limit(None)
        == turn_limit(0)
        == turn_limit("7")
        == turn_limit(True)
        == DEFAULT_MAX_TURNS
    )
    assert turn_limit(5) == 5 and turn_limit(None, 3) == 3 and turn_limit(5, 9) == 5


def test_eval_rollout_and_gym_wrapper_agree_on_the_default_turn_limit(tiny_tokenizer):
    from spade_cli.envs.gym_wrapper import SandboxedEnv

    # eval: an in-process environment without max_turns
    env = Recorder()
    task = Task("t", "t/0", "t", lambda: env, seed=0)
    [[ev]] = run_model(fixed(tiny_tokenizer, "x"), [task], 1, Sampling(max_tokens=4), seed=0)
    assert ev["stop"] == "max_turns"

    # rollout: a sandboxed candidate without max_turns, played by the replay agent
    env_rec = {"code": ENDLESS, "name": "endless", "summary": "endless", "max_turns": None}
    cand = new_record(
        "candidate",
        "cand-endless",
        [],
        origin="design",
        round=0,
        group="g",
        doc=None,
        env=env_rec,
        validation={"valid": True, "reason": "ok"},
    )
    [rec] = run_rollouts([cand], ReplayAgent(), k=1, sandbox_cfg=CFG)
    ro = rec["rollouts"]
    assert {e["stop"] for e in ro["nohint"] + ro["hint"]} == {"max_turns"}

    # the gym wrapper: truncates at the same step
    with SandboxedEnv(ENDLESS, CFG) as gym_env:
        gym_env.reset(seed=0)
        truncated = [gym_env.step("x")[3] for _ in range(DEFAULT_MAX_TURNS)]
    assert truncated.index(True) + 1 == DEFAULT_MAX_TURNS

    assert (
        ev["num_turns"]
        == ro["max_turns"]
        == ro["nohint"][0]["num_turns"]
        == gym_env.max_turns
        == DEFAULT_MAX_TURNS
    )


def test_a_turn_is_a_step_call_in_eval_and_rollout(tiny_tokenizer):
    """Four tool calls in one reply against max_turns 2: both drivers play two steps."""
    reply = REPLIES[3]  # two real calls outside <think>
    reply = reply + reply.split("</think>")[1]  # four calls
    env = Recorder(TOOLS, max_turns=2)
    [[ev]] = run_model(
        fixed(tiny_tokenizer, reply),
        [Task("t", "t/0", "t", lambda: env, seed=0)],
        1,
        Sampling(max_tokens=4),
        seed=0,
    )
    assert (
        len(env.actions) == ev["num_turns"] == len(ev["turns"]) == 2 and ev["stop"] == "max_turns"
    )
    assert len(rollout_actions(reply, TOOLS, max_turns=2)) == 2


class Serial(Recorder):
    """Not thread-safe: fails the episode when two threads are inside it at once."""

    threadsafe = False
    inside = 0
    guard = threading.Lock()

    def step(self, action):
        with Serial.guard:
            Serial.inside += 1
            together = Serial.inside
        time.sleep(0.005)
        with Serial.guard:
            Serial.inside -= 1
        if together > 1:
            raise RuntimeError("stepped concurrently")
        return super().step(action)


def test_environments_that_are_not_threadsafe_take_turns(tiny_tokenizer):
    tasks = [Task("t", f"t/{i}", "t", lambda: Serial(max_turns=3), seed=0) for i in range(8)]
    results = run_model(
        fixed(tiny_tokenizer, "x"), tasks, 2, Sampling(max_tokens=4), seed=0, workers=8
    )
    assert [s["stop"] for r in results for s in r] == ["max_turns"] * 16


def test_eval_sampling_seeds_are_per_sample_and_turn(tiny_tokenizer):
    from spade_cli.records import seed_for

    eng = fixed(tiny_tokenizer, "x")
    [samples] = run_model(
        eng,
        [Task("t", "t/0", "t", lambda: Recorder(max_turns=2), seed=0)],
        2,
        Sampling(temperature=1.0, max_tokens=4),
        seed=7,
    )
    per_sample = [seed_for(7, "eval", f"t/t/0/{i}") for i in range(2)]
    assert [s["seed"] for s in samples] == per_sample
    assert [s.seed for s in eng.samplings] == [
        seed_for(b, "turn", str(t)) for t in range(2) for b in per_sample
    ]


class Steps(Recorder):
    """Counts the generations announced to it (BFCL's model steps)."""

    def __init__(self):
        super().__init__(TOOLS)
        self.model_steps = 0

    def begin_model_step(self):
        self.model_steps += 1


def test_the_oracle_plays_a_list_of_calls_as_one_generation():
    from spade_cli.evals.agent import run_oracle

    env = Steps()
    call = json.dumps({"name": "add", "arguments": {"a": 1}})
    task = Task(
        "t", "t/0", "t", lambda: env, seed=0, oracle=lambda e, obs, info: [[call, call], "done"]
    )
    [[ev]] = run_oracle([task])
    assert env.actions == [call, call, "done"] and env.model_steps == 1
    assert ev["num_turns"] == 3
    assert (
        ev["stop"] == "max_turns"
        and ev["detail"] == "oracle actions ran out before the episode ended"
    )
