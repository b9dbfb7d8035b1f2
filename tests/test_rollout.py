"""spade-rollout: episodes, trajectories, limits, hostile environments, the command."""

from __future__ import annotations

import copy
import json

import orjson
import pytest

from spade_cli.records import new_record, seed_for
from spade_cli.rollout import ModelAgent, ReplayAgent, RolloutStats, action_text
from spade_cli.rollout import run_rollouts as _run_rollouts
from spade_cli.sandbox import SandboxConfig

from .helpers import assert_same, run_cli


def test_a_replayed_record_loses_the_score_of_its_earlier_plays():
    """A scored record played again (the pool picked by reward re-plays its picks) carries
    new plays: the score spade-regret computed from the old ones must not travel with them."""
    old = {**cand(GUESS, "guess"), "score": {"valid": True, "reward": 0.9}}
    (rec,) = run_rollouts([old], ReplayAgent(), k=1, sandbox_cfg=CFG)
    assert rec["rollouts"]["nohint"] and "score" not in rec
    assert old["score"] == {"valid": True, "reward": 0.9}  # the input is left as it was


def run_rollouts(*args, **kw):
    """These environments write their own hints (info["hint"]): --hint-source env. The
    model's hints (the default, `self`) are tested in test_hint.py."""
    return _run_rollouts(*args, **{"hint_source": "env", **kw})


CFG = SandboxConfig(call_timeout=2.0)

# A multi-turn text environment with short observations: guess the secret word (the
# hint says it). Three tries; every observation names the turn so tests can find it.
GUESS = """
import random
import gymnasium as gym

class Guess(gym.Env):
    metadata = {"name": "guess", "max_turns": 3}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._word = random.Random(seed).choice(["apple", "pear", "plum", "fig"])
        self._n = 0
        return "Guess the fruit (try 0).", {"hint": f"It is {self._word}.",
                                             "solution": ["kiwi", self._word]}

    def step(self, action):
        self._n += 1
        if action.strip().lower() == self._word:
            return "Right!", 1.0, True, False, {}
        return f"Wrong: {action[:20]!r} (try {self._n}).", 0.0, False, self._n >= 3, {}
"""

# Tool-use: add numbers with a calculator tool, then submit.
CALC = """
import json
import random
import gymnasium as gym

TOOLS = [{"type": "function", "function": {"name": "add", "description": "a + b",
          "parameters": {"type": "object", "properties": {"a": {"type": "number"},
          "b": {"type": "number"}}, "required": ["a", "b"]}}},
         {"type": "function", "function": {"name": "submit", "description": "final answer",
          "parameters": {"type": "object", "properties": {"value": {"type": "number"}},
          "required": ["value"]}}}]

class Calc(gym.Env):
    metadata = {"name": "calc", "max_turns": 5, "tools": TOOLS}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        self._a, self._b = rng.randint(100, 999), rng.randint(100, 999)
        sol = [json.dumps({"name": "add", "arguments": {"a": self._a, "b": self._b}}),
               json.dumps({"name": "submit", "arguments": {"value": self._a + self._b}})]
        return f"What is {self._a} + {self._b}? Use the tools.", {"hint": "add them", "solution": sol}

    def step(self, action):
        try:
            call = json.loads(action)
        except ValueError:
            return "error: call a tool", 0.0, False, False, {}
        args = call.get("arguments", {})
        if call.get("name") == "add":
            return str(args["a"] + args["b"]), 0.0, False, False, {}
        if call.get("name") == "submit":
            ok = args.get("value") == self._a + self._b
            return ("correct" if ok else "wrong"), float(ok), True, False, {}
        return "error: unknown tool", 0.0, False, False, {}
"""


def hostile(kind: str) -> str:
    """GUESS, except the second step misbehaves."""
    bad = {
        "loop": "while True: pass",
        "crash": "import os; os._exit(3)",
        "raise": "raise RuntimeError('boom')",
        "slow": "import time; time.sleep(0.7)",
    }[kind]
    code = GUESS.replace(
        "        self._n += 1\n",
        f"        self._n += 1\n        if self._n >= 2:\n            {bad}\n",
    )
    return code.replace(
        '"solution": ["kiwi", self._word]', '"solution": ["kiwi", "kiwi", self._word]'
    )


def cand(code: str, name: str, valid: bool = True, tools=None) -> dict:
    env = {"code": code, "name": name, "summary": name, "max_turns": None}
    if tools:
        env["tools"] = tools
    return new_record(
        "candidate",
        f"cand-{name}",
        [],
        origin="design",
        round=0,
        group=f"g-{name}",
        doc=None,
        env=env,
        validation={
            "valid": valid,
            "reason": "ok" if valid else "infeasible",
            "detail": "",
            "seconds": 0.0,
            "seeds": [],
        },
    )


def episodes(rec: dict) -> list[dict]:
    return rec["rollouts"]["nohint"] + rec["rollouts"]["hint"]


@pytest.fixture(scope="module")
def engine(tiny_model):
    from spade_cli.engines import load_engine

    return load_engine(str(tiny_model), "hf", max_batch_size=16)


# --------------------------------------------------------------------------- replay agent


@pytest.mark.slow
def test_replay_agent_solves_the_whole_example_library(tiny_model):
    from spade_cli.envs.library import library_candidates

    cands = library_candidates()
    assert len(cands) >= 10
    for c in cands:
        c["validation"] = {"valid": True, "reason": "ok"}
    stats = RolloutStats()
    out = list(
        run_rollouts(
            cands, ReplayAgent.for_model(str(tiny_model)), k=2, seed=7, sandbox_cfg=CFG, stats=stats
        )
    )
    assert [r["id"] for r in out] == [c["id"] for c in cands]
    for rec in out:
        ro = rec["rollouts"]
        assert ro["summary"]["nohint"]["mean_return"] == 1.0, (rec["env"]["name"], ro["nohint"])
        assert ro["summary"]["hint"]["mean_return"] == 1.0, (rec["env"]["name"], ro["hint"])
        assert ro["summary"]["hint"]["success_rate"] == 1.0
        base = seed_for(7, "rollout", rec["id"])
        assert ro["seeds"] == [base, base + 1]
        # paired: episode i of both conditions plays the same environment seed
        assert [e["seed"] for e in ro["nohint"]] == [e["seed"] for e in ro["hint"]] == ro["seeds"]
        for e in episodes(rec):
            assert e["stop"] == "terminated"
            assert len(e["env_mask"]) == len(e["completion_ids"]) > 0
            assert e["logprobs"] is None  # replay has no logprobs
    assert stats.episodes == 4 * len(cands)
    assert stats.stops == {"terminated": 4 * len(cands)}


def test_replay_without_a_model_plays_but_records_no_tokens():
    made = []

    def factory():  # an agent factory runs once the first workers are starting
        made.append(True)
        return ReplayAgent()

    stats = RolloutStats()
    out = list(
        run_rollouts(
            [cand(GUESS, "guess"), cand(CALC, "calc")], factory, k=1, sandbox_cfg=CFG, stats=stats
        )
    )
    assert made == [True] and stats.load_seconds > 0
    for rec in out:
        for e in episodes(rec):
            assert e["success"] and e["return"] == 1.0
            assert e["prompt_ids"] == e["completion_ids"] == e["env_mask"] == []
    guess = out[0]["rollouts"]["hint"][0]
    assert [t["reward"] for t in guess["turns"]] == [0.0, 1.0]
    assert guess["turns"][0]["observation"] == "Guess the fruit (try 0)."
    assert guess["turns"][1]["observation"] == "Wrong: 'kiwi' (try 1)."


def test_tool_calls_go_through_the_native_format_and_parser(tiny_model):
    agent = ReplayAgent.for_model(str(tiny_model))
    parsed = []
    real = agent.parse_tool_calls

    def spy(text):
        calls = real(text)
        parsed.append((text, calls))
        return calls

    agent.parse_tool_calls = spy
    tok = agent.format.tokenizer
    (rec,) = run_rollouts([cand(CALC, "calc")], agent, k=1, sandbox_cfg=CFG)
    for e in episodes(rec):
        assert e["success"], e
        # the model turns hold native tool-call markup, which the parser read back
        model_text = tok.decode(
            [t for t, m in zip(e["completion_ids"], e["env_mask"], strict=True) if m]
        )
        assert model_text.count("<tool_call>") == 2
        assert json.loads(e["turns"][0]["action"])["name"] == "add"
        # tool results come back as tool messages of the chat template
        env_text = tok.decode(
            [t for t, m in zip(e["completion_ids"], e["env_mask"], strict=True) if not m]
        )
        assert "<tool_response>" in env_text and e["turns"][1]["observation"] in env_text
        assert '"name": "submit"' in tok.decode(e["prompt_ids"])  # tool specs in the prompt
    assert len(parsed) == 4 and all(len(calls) == 1 for _, calls in parsed)
    assert all("<tool_call>" in text for text, _ in parsed)


def test_text_actions_drop_thinking_and_whitespace():
    assert action_text("  left \n") == "left"
    assert action_text("<think>maybe up?</think>\n down") == "down"
    assert action_text("<think>cut off before the answer") == ""


def test_env_tokens_follow_the_template_even_when_it_rewrites_past_turns(tiny_model):
    from transformers import AutoTokenizer

    from spade_cli.rollout.trajectory import ChatFormat

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    fmt = ChatFormat(tok)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    obs = [{"role": "user", "content": "You see a door."}]
    want = "\n<|im_start|>user\nYou see a door.<|im_end|>\n<|im_start|>assistant\n"
    assistant = {"role": "assistant", "content": "open door"}
    assert tok.decode(fmt.env_ids("S", None, assistant, obs, end)) == want
    # cut off before its end-of-turn: the marker is the environment's
    assert tok.decode(fmt.env_ids("S", None, assistant, obs, None)) == "<|im_end|>" + want
    # Like Qwen3: an assistant turn after the last user message carries an empty think
    # block, which disappears from the rendering once a newer user message follows.
    tok.chat_template = (
        "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' }}"
        "{%- if m.role == 'assistant' and loop.last %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
        "{{- m.content + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    assert tok.decode(fmt.env_ids("S", None, assistant, obs, end)) == want


# --------------------------------------------------------------------------- tiny model


def play_tiny(engine, seed: int, **kw) -> list[dict]:
    from spade_cli.engines import Sampling

    agent = ModelAgent(engine, Sampling(temperature=1.0, max_tokens=6), seed=seed)
    cands = [cand(GUESS, "guess"), cand(CALC, "calc")]
    return list(run_rollouts(cands, agent, k=2, seed=seed, sandbox_cfg=CFG, max_turns=2, **kw))


@pytest.fixture(scope="module")
def tiny_runs(engine):
    """Two runs with one seed and one with another (the CPU model is slow: share them)."""
    return play_tiny(engine, 11), play_tiny(engine, 11), play_tiny(engine, 12)


def segments(e: dict) -> list[tuple[int, list[int]]]:
    out: list[tuple[int, list[int]]] = []
    for t, m in zip(e["completion_ids"], e["env_mask"], strict=True):
        if not out or out[-1][0] != m:
            out.append((m, []))
        out[-1][1].append(t)
    return out


@pytest.mark.slow
def test_tiny_model_rollouts_have_consistent_trajectories(engine, tiny_runs):
    tok = engine.tokenizer
    out = tiny_runs[0]
    assert [r["rollouts"]["agent"]["engine"] for r in out] == ["hf", "hf"]
    for rec in out:
        for e in episodes(rec):
            n = len(e["completion_ids"])
            assert len(e["env_mask"]) == n == len(e["logprobs"]) > 0
            assert (
                e["env_mask"][0] == 1 and e["env_mask"][-1] == 1
            )  # starts and ends with the model
            assert all(
                lp == 0.0 for lp, m in zip(e["logprobs"], e["env_mask"], strict=True) if m == 0
            )
            assert all(lp <= 0.0 for lp in e["logprobs"])
            prompt = tok.decode(e["prompt_ids"])
            assert e["turns"][0]["observation"] in prompt
            assert ("HINT: " in prompt) == e["hint"]
            assert e["num_turns"] == len(e["turns"]) >= 1
            assert e["stop"] in ("terminated", "truncated", "max_turns", "context")
            segs = segments(e)
            env_segs = [tok.decode(ids) for m, ids in segs if m == 0]
            model_segs = [ids for m, ids in segs if m == 1]
            # one model segment per generation, one env segment between two of them
            assert len(model_segs) == len(env_segs) + 1
            if rec["env"]["name"] == "guess":
                # text env: each env segment carries the observation the next turn acted on
                assert len(env_segs) == e["num_turns"] - 1
                for seg, turn in zip(env_segs, e["turns"][1:], strict=True):
                    assert turn["observation"] in seg
                for turn, ids in zip(e["turns"], model_segs, strict=True):
                    assert turn["action"] == action_text(tok.decode(ids, skip_special_tokens=True))
            # env tokens are the template's text, tokenised as such (model tokens need not
            # be canonical BPE: sampled ids are kept as sampled, never re-tokenised)
            for m, ids in segs:
                if m == 0:
                    assert tok.encode(tok.decode(ids), add_special_tokens=False) == ids
            assert e["num_turns"] <= 2 and rec["rollouts"]["max_turns"] == 2
        s = rec["rollouts"]["summary"]["nohint"]
        assert s["n"] == 2
        assert s["mean_turns"] == sum(e["num_turns"] for e in rec["rollouts"]["nohint"]) / 2


@pytest.mark.slow
def test_same_seed_same_rollouts_on_transformers(tiny_runs):
    a, b, c = tiny_runs
    assert_same(a, b)  # logprobs up to float rounding (see `mismatch`)
    assert [e["completion_ids"] for r in a for e in episodes(r)] != [
        e["completion_ids"] for r in c for e in episodes(r)
    ]


def test_context_budget_stops_an_episode(engine):
    from spade_cli.engines import Sampling

    agent = ModelAgent(engine, Sampling(max_tokens=4), seed=0)
    (probe,) = run_rollouts([cand(GUESS, "guess")], agent, k=1, sandbox_cfg=CFG, max_turns=1)
    first = len(probe["rollouts"]["nohint"][0]["prompt_ids"])
    assert len(probe["rollouts"]["hint"][0]["prompt_ids"]) > first + 8  # the hint is longer
    (rec,) = run_rollouts(
        [cand(GUESS, "guess")], agent, k=1, sandbox_cfg=CFG, max_context=first + 8
    )
    (nohint,), (hint,) = rec["rollouts"]["nohint"], rec["rollouts"]["hint"]
    # the hinted prompt alone is over budget: no generation, no step
    assert hint["stop"] == "context" and hint["completion_ids"] == [] and hint["turns"] == []
    if nohint["stop"] != "terminated":  # unless a lucky first guess ends it
        assert nohint["stop"] == "context", nohint
        assert nohint["num_turns"] == 1
        assert len(nohint["prompt_ids"]) + len(nohint["completion_ids"]) <= first + 8


# --------------------------------------------------------------------------- limits and failures


def test_hostile_environments_do_not_stop_the_batch():
    cfg = SandboxConfig(call_timeout=1.0)
    cands = [
        cand(GUESS, "good1"),
        cand(hostile("loop"), "loop"),
        cand(hostile("crash"), "crash"),
        cand(hostile("raise"), "raise"),
        cand("def broken(:\n", "syntax"),
        cand(GUESS, "good2"),
    ]
    stats = RolloutStats()
    out = list(run_rollouts(cands, ReplayAgent(), k=1, sandbox_cfg=cfg, stats=stats))
    by = {r["env"]["name"]: r for r in out}
    for name in ("good1", "good2"):
        assert by[name]["rollouts"]["summary"]["hint"]["mean_return"] == 1.0
    for name, word in (
        ("loop", "timeout"),
        ("crash", "crash"),
        ("raise", "boom"),
        ("syntax", "syntax_error"),
    ):
        for e in episodes(by[name]):
            assert e["stop"] == "env_error", (name, e)
            assert word in e["detail"], (name, e["detail"])
            assert e["return"] == 0.0 and not e["success"]
    assert len(by["loop"]["rollouts"]["hint"][0]["turns"]) == 2  # the fatal step is recorded
    assert stats.stops["env_error"] == 8


def test_episode_wall_time_and_max_turns():
    (slow,) = run_rollouts(
        [cand(hostile("slow"), "slow")], ReplayAgent(), k=1, sandbox_cfg=CFG, episode_timeout=0.5
    )
    for e in episodes(slow):
        assert e["stop"] == "timeout", e
    (capped,) = run_rollouts(
        [cand(GUESS, "guess")], ReplayAgent(), k=1, sandbox_cfg=CFG, max_turns=1
    )
    for e in episodes(capped):
        assert e["stop"] == "max_turns" and e["num_turns"] == 1
    assert capped["rollouts"]["max_turns"] == 1


def test_invalid_and_codeless_candidates_pass_through_untouched():
    bad = cand(GUESS, "bad", valid=False)
    nocode = cand(GUESS, "nocode")
    nocode["env"].pop("code")
    unvalidated = cand(GUESS, "raw")
    unvalidated.pop("validation")
    good = cand(GUESS, "good")
    inputs = [bad, nocode, good, unvalidated]
    snapshot = copy.deepcopy(inputs)
    out = list(run_rollouts(inputs, ReplayAgent(), k=1, sandbox_cfg=CFG))
    assert [r["id"] for r in out] == [r["id"] for r in snapshot]
    assert out[0] == snapshot[0] and out[1] == snapshot[1] and out[3] == snapshot[3]
    assert "rollouts" in out[2] and "rollouts" not in snapshot[2]
    assert inputs == snapshot  # the input records were not modified


# --------------------------------------------------------------------------- the command


def test_command_replay_agent_with_memory_replay_file(tmp_path):
    lines = [cand(GUESS, "guess"), cand(GUESS, "broken", valid=False)]
    data = b"".join(orjson.dumps(r) + b"\n" for r in lines)
    entry = new_record(
        "env",
        "env-calc",
        ["cand-x"],
        name="calc",
        summary="adding",
        code=CALC,
        max_turns=5,
        tools=None,
        doc_id=None,
        round=1,
        scores={},
        replays=0,
        last_round=1,
    )
    mem = tmp_path / "memory.jsonl"
    mem.write_bytes(orjson.dumps(entry) + b"\n")
    r = run_cli(
        "rollout",
        "--hint-source",
        "env",
        "-",
        "--agent",
        "replay",
        "-k",
        "2",
        "--replay",
        str(mem),
        "--call-timeout",
        "2",
        input=data,
    )
    assert r.returncode == 0, r.stderr.decode()
    out = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [o["id"] for o in out][:2] == ["cand-guess", "cand-broken"]
    assert out[1] == lines[1]
    assert out[2]["origin"] == "replay" and out[2]["parents"] == ["env-calc"]
    for o in (out[0], out[2]):
        assert o["rollouts"]["k"] == 2 and o["rollouts"]["agent"]["name"] == "replay"
        assert o["rollouts"]["summary"]["hint"]["success_rate"] == 1.0
    assert b"3 candidates, 2 environments, 8 episodes" in r.stderr


def test_command_reads_its_file_argument_and_leaves_stdin_alone(tmp_path):
    path = tmp_path / "cands.jsonl"
    path.write_bytes(orjson.dumps(cand(GUESS, "guess")) + b"\n")
    # Without --replay nothing else is read: stdin (here garbage) must stay untouched.
    r = run_cli(
        "rollout",
        "--hint-source",
        "env",
        str(path),
        "--agent",
        "replay",
        "-k",
        "1",
        input=b"not json\n",
    )
    assert r.returncode == 0, r.stderr.decode()
    out = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [o["id"] for o in out] == ["cand-guess"]


def test_command_needs_a_model_only_when_there_is_something_to_play():
    invalid = orjson.dumps(cand(GUESS, "bad", valid=False)) + b"\n"
    r = run_cli("rollout", "--hint-source", "env", input=invalid)
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout) == orjson.loads(invalid)
    r = run_cli("rollout", "--hint-source", "env", input=orjson.dumps(cand(GUESS, "good")) + b"\n")
    assert r.returncode == 2
    assert r.stderr.decode().strip() == (
        "spade-rollout: error: --model is required with --agent model (or use --agent replay)"
    )


@pytest.mark.gpu
def test_vllm_rollouts_on_tiny_model(tiny_model):
    pytest.importorskip("vllm")
    from spade_cli.engines import Sampling, load_engine

    eng = load_engine(str(tiny_model), "vllm", gpu_memory_utilization=0.3, enforce_eager=True)
    try:
        agent = ModelAgent(eng, Sampling(temperature=1.0, max_tokens=8), seed=5)
        cands = [cand(GUESS, "guess"), cand(CALC, "calc")]
        a = list(run_rollouts(cands, agent, k=2, seed=5, sandbox_cfg=CFG, max_turns=3))
        b = list(run_rollouts(cands, agent, k=2, seed=5, sandbox_cfg=CFG, max_turns=3))
    finally:
        eng.close()
    for rec in a:
        assert rec["rollouts"]["agent"]["engine"] == "vllm"
        for e in episodes(rec):
            assert len(e["env_mask"]) == len(e["completion_ids"]) == len(e["logprobs"]) > 0
            assert e["stop"] in ("terminated", "truncated", "max_turns", "context")
    # vLLM seeds follow each request, so the same --seed samples the same tokens
    assert [e["completion_ids"] for r in a for e in episodes(r)] == [
        e["completion_ids"] for r in b for e in episodes(r)
    ]


def test_missing_bwrap_stops_the_run_instead_of_failing_every_episode(monkeypatch, tmp_path):
    from spade_cli.errors import ResourceError

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ResourceError, match="bwrap not found"):
        list(run_rollouts([cand(GUESS, "guess")], ReplayAgent(), k=1, sandbox_cfg=CFG))
    r = run_cli(
        "rollout",
        "--hint-source",
        "env",
        "--agent",
        "replay",
        input=orjson.dumps(cand(GUESS, "guess")) + b"\n",
        env={"PATH": str(tmp_path)},
    )
    assert r.returncode == 4 and r.stdout == b""
    assert r.stderr.decode().startswith("spade-rollout: error: bwrap not found")
