"""spade-validate --judge: the model under test reads each environment that passed the
checks, with one trajectory validation played, and a \\boxed{no} rejects it."""

from __future__ import annotations

from types import SimpleNamespace

import orjson
import pytest

from spade_cli.engines import Sampling
from spade_cli.envs.judge import judge_records, load_template, trajectory_text, verdict_of
from spade_cli.envs.library import library_candidates
from spade_cli.envs.validation import validate_records
from spade_cli.sandbox import EnvSession, SandboxConfig

from .helpers import run_cli

LIB = {c["env"]["name"]: c for c in library_candidates()}


class AnswersByName:
    """An engine double: the reply to a prompt is chosen by the environment it names."""

    name, model = "answers", "answers"

    def __init__(self, answers: dict[str, str]):
        self.answers, self.prompts = answers, []

    def chat(self, prompts, samplings):
        out = []
        for p in prompts:
            text = p[0]["content"]
            self.prompts.append(text)
            name = next(n for n in self.answers if f"`{n}`" in text)
            out.append(SimpleNamespace(text=self.answers[name]))
        return out


def test_verdicts():
    assert verdict_of("Looks fine. \\boxed{yes}") == "yes"
    assert verdict_of("\\boxed{yes} ... on reflection \\boxed{ No }") == "no"
    assert verdict_of("<think>\\boxed{no}</think> fine: \\boxed{yes}") == "yes"
    assert verdict_of("I cannot tell.") == verdict_of("") == "none"


@pytest.mark.requires_bwrap
def test_judge_reads_code_and_a_trajectory_and_rejects_on_no():
    names = ["nim", "mastermind", "water_jugs"]
    cfg = SandboxConfig(call_timeout=5.0)
    out = list(
        validate_records(
            [LIB[n] for n in names],
            lambda c: EnvSession(c, cfg),
            seeds=2,
            workers=2,
            keep_trajectory=True,
        )
    )
    assert all(r["validation"]["valid"] and r["validation"]["trajectory"] for r in out)
    traj = out[0]["validation"]["trajectory"]
    assert (
        "observation" in traj[0] and {"action", "reward", "observation", "ended"} <= traj[1].keys()
    )
    eng = AnswersByName(
        {
            "nim": "The take logic never ends the game. \\boxed{no}",
            "mastermind": "\\boxed{yes}",
            "water_jugs": "hmm",
        }
    )
    judged = list(judge_records(out, eng, Sampling(), template=load_template(), batch=2))
    v = {r["env"]["name"] if "env" in r else r["id"]: r["validation"] for r in judged}
    assert [r["validation"]["judge"]["verdict"] for r in judged] == ["no", "yes", "none"]
    nim = judged[0]["validation"]
    assert (nim["valid"], nim["reason"]) == (False, "judged_invalid") and "never ends" in nim[
        "detail"
    ]
    assert "env" in judged[0]  # a library record keeps the environment it came with
    assert all(x["valid"] for k, x in v.items() if k in ("mastermind", "water_jugs"))
    assert all("trajectory" not in r["validation"] for r in judged)  # moved under judge
    prompt = next(p for p in eng.prompts if "`nim`" in p)
    assert LIB["nim"]["env"]["code"][:200] in prompt and trajectory_text(traj) in prompt


def test_judge_needs_a_model():
    r = run_cli("validate", "--judge", input=b"")
    assert r.returncode == 2 and b"--judge needs --model" in r.stderr


@pytest.mark.slow
@pytest.mark.requires_bwrap
def test_validate_judge_on_the_tiny_model(tiny_model):
    recs = b"".join(orjson.dumps(LIB[n]) + b"\n" for n in ("nim", "mastermind"))
    r = run_cli(
        "validate",
        "-",
        "--seeds",
        "2",
        "--judge",
        "--model",
        str(tiny_model),
        "--engine",
        "hf",
        "--max-tokens",
        "8",
        input=recs,
    )
    assert r.returncode == 0, r.stderr
    for rec in map(orjson.loads, r.stdout.splitlines()):
        judge = rec["validation"]["judge"]
        assert judge["verdict"] in ("yes", "no", "none") and judge["trajectory"]
        assert rec["validation"]["valid"] == (judge["verdict"] != "no")
