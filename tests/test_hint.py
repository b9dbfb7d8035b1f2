"""spade-hint: hints by the model (tiny model and a scripted engine beside it), the leak
check, regeneration, the rollout's use of the hint, and never a training sample."""

from __future__ import annotations

import orjson
import pytest

from spade_cli.engines.base import Generation, Sampling
from spade_cli.envs.leaks import hint_leak
from spade_cli.hint import add_hints, load_template
from spade_cli.rollout import ReplayAgent, run_rollouts
from spade_cli.train.samples import read_groups

from .helpers import run_cli
from .test_rollout import CFG, GUESS, cand


@pytest.mark.parametrize(
    "hint,solution,leaks",
    [
        ("The answer is PLUM.", ["plum"], True),
        ("Say  p-l-u-m now", ["plum"], True),
        ("Type `Move_Left`, `move right`", ["move left", "move right"], True),
        ("press MoveLeft", ["move left"], True),
        ("Ｐｌｕｍ is it", ["plum"], True),  # NFKC: full-width letters
        ("Think of purple fruit; answer with one lowercase word.", ["plum"], False),
        ("a is a letter", ["a"], False),  # too short to judge
        ("plumber", ["plum"], True),  # inside a longer word still gives it away
    ],
)
def test_hint_leak(hint, solution, leaks):
    assert (hint_leak(hint, solution) is not None) == leaks


class ScriptedEngine:
    """A test double beside the real engines: returns the scripted texts in turn."""

    name, model = "scripted", "script"

    def __init__(self, texts: list[str]):
        self.texts = list(texts)
        self.calls = 0

    def chat(self, convs, samplings):
        self.calls += 1
        assert all(s.temperature == 0.3 for s in samplings)
        out = []
        for conv in convs:
            assert (
                "Environment source" in conv[0]["content"] and "class Guess" in conv[0]["content"]
            )
            out.append(Generation(self.texts.pop(0), [1, 2, 3], [7, 8], None, "stop"))
        return out


def solutions(_cand):
    return [["kiwi", "apple"], ["kiwi", "plum"]]


def test_leaked_hints_are_regenerated_then_marked():
    sampling = Sampling(temperature=0.3)
    eng = ScriptedEngine(["Hint: kiwi plum", "Try fruits; answer with one word."])
    (rec,) = add_hints(
        [cand(GUESS, "guess")], eng, sampling, solutions, template=load_template(), attempts=3
    )
    h = rec["hint"]
    assert h["ok"] and h["attempts"] == 2 and h["text"] == "Try fruits; answer with one word."
    assert h["prompt_ids"] == [1, 2, 3] and h["completion_ids"] == [7, 8] and h["source"] == "model"
    assert eng.calls == 2
    eng = ScriptedEngine(["kiwi, apple", "KIWI APPLE", "Say kiwi-apple."])
    (rec,) = add_hints(
        [cand(GUESS, "guess")], eng, sampling, solutions, template=load_template(), attempts=3
    )
    assert not rec["hint"]["ok"] and rec["hint"]["reason"] and rec["hint"]["attempts"] == 3
    # invalid candidates pass through unhinted, in order
    bad = cand(GUESS, "bad", valid=False)
    out = list(
        add_hints(
            [bad, cand(GUESS, "g")],
            ScriptedEngine(["one word"]),
            sampling,
            solutions,
            template=load_template(),
        )
    )
    assert "hint" not in out[0] and out[1]["hint"]["ok"]


def test_rollout_uses_the_models_hint_and_says_so():
    c = cand(GUESS, "guess")
    c["hint"] = {"text": "A common fruit, one word.", "ok": True}
    marked = cand(GUESS, "marked")
    marked["id"] = "cand-marked"
    marked["hint"] = {"text": "kiwi apple", "ok": False}
    out = list(run_rollouts([c, marked], ReplayAgent(), k=1, sandbox_cfg=CFG))
    ro = out[0]["rollouts"]
    assert ro["hint_source"] == "self" and ro["hint"][0]["hint_source"] == "self"
    assert out[1]["rollouts"]["hint"][0]["hint_source"] == "none"
    env = list(run_rollouts([c], ReplayAgent(), k=1, sandbox_cfg=CFG, hint_source="env"))
    assert env[0]["rollouts"]["hint"][0]["hint_source"] == "env"


@pytest.mark.slow
def test_spade_hint_on_the_tiny_model_never_a_training_sample(tiny_model, tmp_path):
    inp = tmp_path / "valid.jsonl"
    inp.write_bytes(orjson.dumps(cand(GUESS, "guess")) + b"\n")
    r = run_cli(
        "hint", inp, "--model", tiny_model, "--max-tokens", "16", "--attempts", "2", "--seed", "3"
    )
    assert r.returncode == 0, r.stderr
    (rec,) = [orjson.loads(x) for x in r.stdout.splitlines()]
    h = rec["hint"]
    assert h["engine"] == "hf" and h["model"] and 1 <= h["attempts"] <= 2
    assert (
        h["prompt_ids"]
        and h["completion_ids"]
        and all(isinstance(t, int) for t in h["completion_ids"])
    )
    # a scored record with a hint and a design: the samples come from design and rollouts only
    rec["group"] = "g"
    rec["design"] = {"prompt_ids": [5, 6], "completion_ids": [9, 9], "logprobs": None}
    rec["score"] = {"reward": 0.5}
    other = {
        **rec,
        "id": "cand-other",
        "design": {"prompt_ids": [5, 6], "completion_ids": [4], "logprobs": None},
        "score": {"reward": 0.0},
    }
    path = tmp_path / "scored.jsonl"
    path.write_bytes(orjson.dumps(rec) + b"\n" + orjson.dumps(other) + b"\n")
    groups, _ = read_groups([str(path)], role="both")
    ids = [s.completion_ids for g in groups for s in g]
    assert ids == [[9, 9], [4]] and h["completion_ids"] not in ids
    assert all(s.prompt_ids != h["prompt_ids"] for g in groups for s in g)
