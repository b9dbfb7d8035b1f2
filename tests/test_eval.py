"""spade-eval: oracle agents prove the harness, the tiny model runs every suite end to end,
bad suite names and missing packages fail clearly."""

from __future__ import annotations

import importlib.util
import json

import orjson
import pytest

from spade_cli.errors import ResourceError, UsageError
from spade_cli.evals import build_tasks, check_suites, parse_suite, run_eval, summarize
from spade_cli.evals.agent import run_oracle
from spade_cli.evals.base import pass_at_k, task_stats

from .helpers import run_cli
from .scripted_engine import ScriptedEngine, first_user_message


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_bfcl = pytest.mark.requires_module(
    "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker", "mpmath"
)
needs_rg = pytest.mark.requires_module("reasoning_gym")
needs_ta = pytest.mark.requires_module("textarena")


def _all_pass(tasks, results):
    failed = [
        (t.task_id, r[0]["stop"], r[0].get("detail"))
        for t, r in zip(tasks, results, strict=True)
        if not r[0]["success"]
    ]
    assert not failed, failed


# --------------------------------------------------------------------------- names, packages


def test_parse_suite_names_and_subsets():
    assert parse_suite("bfcl") == ("bfcl", None)
    assert parse_suite("reasoning_gym:gcd, maze") == ("reasoning-gym", ["gcd", "maze"])
    with pytest.raises(
        UsageError,
        match=r"unknown suite 'bfc' \(valid suites: bfcl, reasoning-gym, textarena, library, micro, memory\)",
    ):
        parse_suite("bfc")


def test_unknown_suite_is_a_usage_error_naming_the_valid_ones():
    r = run_cli("eval", "--suite", "reasoning-gym", "--suite", "nosuch", "--oracle")
    assert r.returncode == 2
    assert r.stdout == b""
    assert r.stderr.decode().strip() == (
        "spade-eval: error: unknown suite 'nosuch' (valid suites: bfcl, reasoning-gym, textarena, library, micro, memory)"
    )


@needs_rg
def test_unknown_family_lists_the_available_ones():
    r = run_cli("eval", "--suite", "reasoning-gym:gcd,no_such_family", "--oracle", "-n", "2")
    assert r.returncode == 2
    err = r.stderr.decode().strip()
    assert err.startswith(
        "spade-eval: error: unknown reasoning-gym family no_such_family (available: "
    )
    assert "gcd" in err and len(err.splitlines()) == 1


@needs_ta
def test_zero_items_needs_a_finite_suite():
    with pytest.raises(UsageError, match="no fixed set of items"):
        build_tasks(["textarena"], 0)


@needs_bfcl
def test_unknown_bfcl_category():
    with pytest.raises(UsageError, match="unknown BFCL category 'nope'"):
        build_tasks(["bfcl:nope"], 1)


def test_model_or_oracle_required():
    r = run_cli("eval", "--suite", "library")
    assert r.returncode == 2
    assert b"--model is required" in r.stderr


@pytest.mark.parametrize(
    "suite,module",
    [("textarena", "textarena"), ("reasoning-gym", "reasoning_gym"), ("bfcl", "bfcl_eval")],
)
def test_missing_package_is_exit_4_with_the_install_command(tmp_path, suite, module):
    # A sitecustomize on PYTHONPATH hides the package from the child process.
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] == {module!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    import os

    env = {"PYTHONPATH": os.pathsep.join([os.environ["PYTHONPATH"], str(tmp_path)])}
    r = run_cli("eval", "--suite", suite, "--oracle", "-n", "1", env=env)
    assert r.returncode == 4, r.stderr
    err = r.stderr.decode().strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"spade-eval: error: suite {suite!r} needs the ")
    assert "pip install --no-deps -r requirements-eval.txt" in err


def test_check_suites_raises_resource_error(monkeypatch):
    import spade_cli.evals.base as base

    def fake_import(name):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(base.importlib, "import_module", fake_import)
    with pytest.raises(ResourceError, match="needs the 'textarena' package"):
        check_suites(["textarena"])
    check_suites(["library"])  # needs no optional package


# --------------------------------------------------------------------------- scoring


def test_pass_at_k_and_summary():
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    s = lambda ok, r: {"success": ok, "return": r, "stop": "terminated"}  # noqa: E731
    recs = [
        {
            "suite": "a",
            "category": "x",
            "samples": (xs := [s(True, 1.0), s(False, 0.5)]),
            "stats": task_stats(xs),
        },
        {
            "suite": "a",
            "category": "y",
            "samples": (ys := [s(False, 0.0), s(False, 0.0)]),
            "stats": task_stats(ys),
        },
    ]
    summ = summarize(recs)["suites"]["a"]
    assert summ["tasks"] == 2 and summ["k"] == 2
    assert summ["accuracy"] == pytest.approx(0.25)
    assert summ["pass@2"] == pytest.approx(0.5)
    assert summ["mean_return"] == pytest.approx(0.375)
    assert summ["categories"]["x"]["pass@2"] == 1.0


# --------------------------------------------------------------------------- oracles


@needs_bfcl
def test_bfcl_oracle_scores_100_on_a_subset_of_every_category():
    tasks = build_tasks(["bfcl"], 40)  # 10 entries of each multi-turn category
    assert {t.category for t in tasks} == {
        "multi_turn_base",
        "multi_turn_miss_func",
        "multi_turn_miss_param",
        "multi_turn_long_context",
    }
    _all_pass(tasks, run_oracle(tasks))


@needs_bfcl
@pytest.mark.slow
def test_bfcl_oracle_scores_100_on_every_multi_turn_entry():
    tasks = build_tasks(["bfcl"], 0)
    assert len(tasks) == 800
    _all_pass(tasks, run_oracle(tasks))


@needs_bfcl
def test_bfcl_checker_rejects_wrong_play():
    """The harness can fail: no calls, a wrong call, or too many steps all score 0."""
    from spade_cli.evals import bfcl

    task = build_tasks(["bfcl:base"], 1)[0]
    env = task.make_env()
    env.reset()
    for _ in range(len(env.turns) - 1):
        assert env.step("I cannot help.")[2] is False
    obs, reward, term, _, info = env.step("I cannot help.")
    assert term and reward == 0.0 and "empty_turn_model_response" in info["detail"]

    env.reset()
    obs = env.step(json.dumps({"name": "cd", "arguments": {"folder": "no_such_dir"}}))[0]
    assert "No such" in obs or "Error" in obs or "error" in obs
    obs = env.step(json.dumps({"name": "__import__", "arguments": {"name": "os"}}))[0]
    assert obs == "Error during execution: name '__import__' is not defined"
    for _ in range(len(env.turns)):
        out = env.step("done")
    assert out[2] and out[1] == 0.0

    env.reset()
    for _ in range(env.step_limit):
        assert not env.step(json.dumps({"name": "pwd", "arguments": {}}))[2]
    out = env.step(json.dumps({"name": "pwd", "arguments": {}}))
    assert out[2] and out[1] == 0.0 and "force_terminated" in out[4]["detail"]
    # the call strings handed to BFCL's eval are built from literals only
    assert (
        bfcl.call_string("cd", {"folder": "a'); import os; ('"})
        == "cd(folder=\"a'); import os; ('\")"
    )


@needs_rg
def test_reasoning_gym_oracle_scores_100_and_wrong_answers_fail():
    tasks = build_tasks(["reasoning-gym"], 36)
    assert len({t.category for t in tasks}) == 18
    _all_pass(tasks, run_oracle(tasks))
    env = tasks[0].make_env()
    env.reset()
    assert env.step("<answer>definitely wrong</answer>")[1] == 0.0
    assert env.step("no tags at all")[1] == 0.0


@needs_rg
def test_reasoning_gym_family_without_reference_has_no_oracle():
    tasks = build_tasks(["reasoning-gym:graph_color"], 1)
    res = run_oracle(tasks)
    assert res[0][0]["stop"] == "no_oracle" and not res[0][0]["success"]


@needs_rg
def test_reasoning_gym_items_are_fixed_by_the_seed():
    def q(seed):
        return [t.make_env().reset()[0] for t in build_tasks(["reasoning-gym:gcd,maze"], 4, seed)]

    assert q(3) == q(3)
    assert q(3) != q(4)


@needs_ta
def test_textarena_oracle_scores_100_and_bad_moves_fail():
    tasks = build_tasks(["textarena"], 10)
    _all_pass(tasks, run_oracle(tasks))
    env = build_tasks(["textarena:GuessTheNumber-v0"], 1)[0].make_env()
    env.reset(seed=1)
    assert env.step("no move")[2] is False  # one invalid move is allowed
    obs, reward, term, _, _ = env.step("still no move")
    assert term and reward < 1.0


@needs_ta
def test_textarena_games_keep_their_randomness_to_themselves():
    """textarena seeds the global `random`; each env swaps its own state in and out."""
    import random

    tasks = build_tasks(["textarena:Mastermind-v0"], 3, seed=5)
    alone = []
    for t in tasks:
        e = t.make_env()
        e.reset(seed=t.seed)
        alone.append(tuple(e.game.state.game_state["secret_code"]))
    random.seed(123)
    before = random.getstate()
    envs = [t.make_env() for t in tasks]
    for e, t in zip(envs, tasks, strict=True):
        e.reset(seed=t.seed)
        e.step("[1 2 3 4]")
    assert random.getstate() == before
    assert [tuple(e.game.state.game_state["secret_code"]) for e in envs] == alone
    assert len(set(alone)) > 1


@pytest.mark.requires_bwrap
def test_library_oracle_scores_100_in_the_sandbox():
    tasks = build_tasks(["library"], 18)
    _all_pass(tasks, run_oracle(tasks))


@pytest.mark.requires_bwrap
def test_memory_suite_reads_a_memory_file(tmp_path):
    from spade_cli.envs.library import load_library
    from spade_cli.records import make_id, new_record

    entries = load_library()[:2]
    mem = tmp_path / "memory.jsonl"
    mem.write_bytes(
        b"".join(
            orjson.dumps(
                new_record(
                    "env",
                    make_id("env", e["name"]),
                    [],
                    name=e["name"],
                    summary=e["summary"],
                    code=e["code"],
                    max_turns=e["max_turns"],
                    doc_id=None,
                    round=0,
                    scores={},
                    replays=0,
                    last_round=0,
                )
            )
            + b"\n"
            for e in entries
        )
    )
    r = run_cli("eval", "--suite", "memory", "--memory", str(mem), "--oracle", "-n", "4")
    assert r.returncode == 0, r.stderr
    recs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(recs) == 4 and all(x["stats"]["pass@1"] == 1.0 for x in recs)
    r = run_cli("eval", "--suite", "memory", "--oracle")
    assert r.returncode == 2 and b"needs --memory FILE" in r.stderr


# --------------------------------------------------------------------------- the model path


def _script(actions: list) -> list[str]:
    """Oracle actions as model replies: a group of calls is one reply of <tool_call> blocks;
    a text action comes after some thinking that must not reach the environment."""
    out = []
    for a in actions:
        if isinstance(a, list):
            out.append("".join(f"<tool_call>\n{c}\n</tool_call>" for c in a))
        else:
            out.append(f"<think>not this: [9] [C A] <answer>0</answer></think>\n{a}")
    return out


@needs_bfcl
@needs_rg
@needs_ta
def test_model_loop_with_perfect_replies_scores_100(tiny_tokenizer):
    """The model path (ModelAgent's token prompts, batching, parse_tool_calls, text actions,
    miss_func's tool reveal) with known answers: a perfect script must score 100%."""
    from spade_cli.engines import Sampling
    from spade_cli.evals.agent import run_model

    candidates = (
        build_tasks(["bfcl:miss_func"], 3)
        + build_tasks(["bfcl:base"], 12)
        + build_tasks(["reasoning-gym"], 18)
        + build_tasks(["textarena:GuessTheNumber-v0,TowerOfHanoi-v0,Sudoku-v0-very-easy"], 3)
    )
    tasks, scripts, held_out = [], {}, {}
    for t in candidates:
        env = t.make_env()
        obs, info = env.reset(seed=t.seed)
        if obs in scripts:  # a miss_func entry asks what a base entry asks: keep one
            assert t.suite == "bfcl"
            continue
        tasks.append(t)
        scripts[obs] = _script(t.oracle(env, obs, info))
        if getattr(env, "holdout", None):
            held_out[obs] = [f'"name": "{f["name"]}"' for fs in env.holdout.values() for f in fs]
        env.close()
    assert held_out  # miss_func entries reveal functions mid-episode
    eng = ScriptedEngine(tiny_tokenizer, lambda first, turn: scripts[first][turn])
    results = run_model(eng, tasks, 1, Sampling(temperature=0.0, max_tokens=8), seed=0)
    _all_pass(tasks, results)
    assert max(eng.batches) == len(tasks)  # every episode in flight shares one generation
    bfcl_turns = results[0][0]["turns"]
    assert any(t["action"].startswith('{"name"') for t in bfcl_turns)
    # A revealed function is in the tool list of the prompts after its reveal, not before.
    tool_list = lambda prompt: prompt[prompt.index("<tools>\n") : prompt.index("\n</tools>")]  # noqa: E731
    for first, names in held_out.items():
        prompts = [p for p in eng.prompts if first_user_message(p) == first]
        assert not any(n in tool_list(prompts[0]) for n in names)
        assert all(n in tool_list(prompts[-1]) for n in names)


# --------------------------------------------------------------------------- fixed pool


@needs_rg
def test_emit_pool_writes_contract_envs_of_reasoning_gym_families():
    r = run_cli("eval", "--suite", "reasoning-gym:gcd,spell_backward", "--emit-pool")
    assert r.returncode == 0, r.stderr
    recs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [x["kind"] for x in recs] == ["candidate", "candidate"]
    assert all(x["origin"] == "fixed" and x["env"]["max_turns"] == 1 for x in recs)
    # The code follows the contract (run in-process here: it is our own trusted template).
    ns: dict = {}
    exec(compile(recs[0]["env"]["code"], "pool.py", "exec"), ns)
    env = ns["ReasoningGymEnv"]()
    obs, info = env.reset(seed=7)
    assert env.reset(seed=7)[0] == obs and env.reset(seed=8)[0] != obs
    assert info["hint"] and info["solution"][0] not in info["hint"]
    env.reset(seed=7)
    assert env.step(info["solution"][0])[1] == 1.0
    env.reset(seed=7)
    assert env.step("<answer>-1</answer>")[1] < 1.0


@needs_rg
@pytest.mark.requires_bwrap
def test_fixed_pool_validates_in_the_sandbox_when_the_package_is_allowed():
    from spade_cli.envs.validation import validate_records
    from spade_cli.evals.rgym import fixed_pool_candidates
    from spade_cli.sandbox import EnvSession, SandboxConfig

    cands = fixed_pool_candidates(["gcd", "spell_backward"])
    cfg = SandboxConfig(packages=("reasoning-gym",))
    out = list(validate_records(cands, lambda code: EnvSession(code, cfg), seeds=2, workers=2))
    assert [r["validation"]["reason"] for r in out] == ["ok", "ok"]
    bare = list(
        validate_records(cands[:1], lambda code: EnvSession(code, SandboxConfig()), seeds=1)
    )
    assert bare[0]["validation"]["reason"] == "import_crash"  # the jail hides what it was not given


# --------------------------------------------------------------------------- the tiny model


@needs_rg
@needs_ta
@pytest.mark.slow
def test_tiny_model_end_to_end_reasoning_gym_and_textarena(tiny_model, tmp_path):
    summary = tmp_path / "summary.json"
    r = run_cli(
        "eval",
        "--model",
        str(tiny_model),
        "--engine",
        "hf",
        "--suite",
        "reasoning-gym",
        "--suite",
        "textarena",
        "-n",
        "2",
        "--max-tokens",
        "8",
        "--max-turns",
        "2",
        "--seed",
        "1",
        "--summary",
        str(summary),
    )
    assert r.returncode == 0, r.stderr
    recs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [x["suite"] for x in recs] == ["reasoning-gym"] * 2 + ["textarena"] * 2
    for x in recs:
        assert x["kind"] == "eval" and x["agent"]["kind"] == "model"
        s = x["samples"][0]
        assert 0.0 <= s["return"] <= 1.0 and s["num_turns"] >= 1 and s["completion_tokens"] > 0
        assert s["stop"] in ("terminated", "truncated", "max_turns", "context", "env_error")
    err = r.stderr.decode()
    assert "reasoning-gym" in err and "textarena" in err and "accuracy" in err
    summ = json.loads(summary.read_text())
    assert summ["suites"]["reasoning-gym"]["tasks"] == 2 and summ["seed"] == 1


@needs_rg
@pytest.mark.slow
def test_tiny_model_pass_at_k_and_determinism(tiny_model):
    from spade_cli.engines import Sampling, load_engine

    acts = lambda rs: [[t["action"] for s in r["samples"] for t in s["turns"]] for r in rs]  # noqa: E731
    with load_engine(str(tiny_model), engine="hf") as eng:
        recs, summ = run_eval(
            ["reasoning-gym:gcd"],
            eng,
            n=2,
            samples=3,
            seed=0,
            sampling=Sampling(temperature=1.0, max_tokens=8),
        )
        again, _ = run_eval(
            ["reasoning-gym:gcd"],
            eng,
            n=2,
            samples=3,
            seed=0,
            sampling=Sampling(temperature=1.0, max_tokens=8),
        )
    assert all(len(r["samples"]) == 3 for r in recs)
    assert len({s["seed"] for s in recs[0]["samples"]}) == 3
    assert "pass@3" in summ["suites"]["reasoning-gym"] and summ["samples"] == 3
    assert acts(recs) == acts(again)  # same seed, same samples (hf engine)


@needs_bfcl
@pytest.mark.slow
def test_tiny_model_end_to_end_bfcl(tiny_model):
    from spade_cli.engines import Sampling, load_engine

    with load_engine(str(tiny_model), engine="hf") as eng:
        recs, summ = run_eval(
            ["bfcl:base"],
            eng,
            n=1,
            seed=0,
            max_turns=1,
            sampling=Sampling(temperature=0.0, max_tokens=8),
        )
    s = recs[0]["samples"][0]
    assert (
        recs[0]["suite"] == "bfcl"
        and s["num_turns"] == 1
        and s["stop"] in ("max_turns", "terminated")
    )
    assert summ["suites"]["bfcl"]["tasks"] == 1


@pytest.mark.requires_bwrap
@pytest.mark.slow
def test_tiny_model_end_to_end_library(tiny_model):
    r = run_cli(
        "eval",
        "--model",
        str(tiny_model),
        "--engine",
        "hf",
        "--suite",
        "library",
        "-n",
        "2",
        "--max-tokens",
        "8",
        "--max-turns",
        "2",
    )
    assert r.returncode == 0, r.stderr
    recs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(recs) == 2 and all(x["suite"] == "library" for x in recs)
    assert all(x["samples"][0]["stop"] != "env_error" for x in recs), [
        x["samples"][0].get("detail") for x in recs
    ]
