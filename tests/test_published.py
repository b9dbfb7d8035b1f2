"""The published environment contract: detection, the sandbox adapter, validation, action
formats in spade-rollout and spade-eval, importing a directory of environment files, and
designing in that contract. Fixtures: tests/data/published/ (games/, tools/, broken/, and
release/: environments written as the authors' release writes them -- ToolUseBaseEnv
subclasses, a game template with math_verify and no solution(), injected names)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import orjson
import pytest

from spade_cli.envs.actions import reply_actions
from spade_cli.envs.checks import validate_code
from spade_cli.envs.contracts import action_format, detect_contract, solution_actions
from spade_cli.envs.library import library_candidates
from spade_cli.envs.pool_import import is_released_pool, pool_from_dir
from spade_cli.envs.validation import validate_records
from spade_cli.errors import DataError
from spade_cli.loop.report import score_metrics
from spade_cli.rollout import AgentPrompt, ModelAgent, ReplayAgent, run_rollouts
from spade_cli.sandbox import EnvError, EnvSession, SandboxConfig

from .helpers import run_cli

# Everything here runs environment code, some of it hostile: only ever in the sandbox.
pytestmark = pytest.mark.requires_bwrap

DATA = Path(__file__).parent / "data" / "published"
CFG = SandboxConfig(call_timeout=5.0)
SEEDS = [11, 22, 33]

# fixture -> (valid, reason, genuinely multi-turn or None when not measured)
EXPECTED = {
    "games/guess_number.py": (True, "ok", True),
    "games/vault_code.py": (True, "ok", True),
    "games/dark_corridor.py": (True, "ok", True),
    "games/single_shot_quiz.py": (True, "ok", False),
    "tools/shelf_search.py": (True, "ok", True),
    "release/hidden_slope.py": (True, "ok", True),
    "release/warehouse_restock.py": (True, "ok", True),
    "release/ticket_workflow.py": (True, "ok", True),
    # no solution() is allowed, as released; but its episodes never end
    "broken/missing_solution.py": (False, "never_terminates", None),
    "broken/crash_in_step.py": (False, "bad_step", None),
    "broken/reward_out_of_range.py": (False, "reward_out_of_range", None),
    "broken/never_terminates.py": (False, "never_terminates", None),
    "broken/nondeterministic.py": (False, "nondeterministic", None),
}
VALID = [f for f, (ok, _, _) in EXPECTED.items() if ok]
REPLAYABLE = [f for f in VALID if f != "release/hidden_slope.py"]  # it has no solution()


def code(name: str) -> str:
    return (DATA / name).read_text()


def opener(cfg: SandboxConfig = CFG):
    return lambda c: EnvSession(c, cfg)


def validated(names: list[str]) -> list[dict]:
    recs = [_candidate(n, i) for i, n in enumerate(names)]
    out = list(validate_records(recs, opener(), seeds=2, workers=2))
    assert all(r["validation"]["valid"] for r in out), [r["validation"] for r in out]
    return out


def sums(root: Path) -> str:
    return "".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}\n"
        for p in sorted(root.rglob("*.py"))
    )


# --------------------------------------------------------------------------- the contract


def test_detection_tells_the_contracts_apart():
    for name in EXPECTED:
        assert detect_contract(code(name)) == "published", name
    for c in library_candidates():
        assert detect_contract(c["env"]["code"]) == "spade", c["env"]["name"]
    assert detect_contract("def broken(:\n") == "spade"
    assert (
        detect_contract(
            "class A:\n    metadata = {}\n    def reset(self): pass\n    def step(self, a): pass\n"
        )
        == "spade"
    )


def test_solution_text_as_actions():
    assert solution_actions("\\boxed{east} then \\boxed{ south }") == [
        "\\boxed{east}",
        "\\boxed{south}",
    ]
    assert solution_actions('<tool_call>{"name": "x"}</tool_call> <answer>done</answer>') == [
        '<tool_call>{"name": "x"}</tool_call>',
        "<answer>done</answer>",
    ]
    assert solution_actions("Open the vault by reasoning about the digits.") == []
    assert solution_actions(None) == []


def test_adapter_presents_a_published_class_as_ours():
    with EnvSession(code("games/vault_code.py"), CFG) as env:
        # the release forces 25 turns whatever the constructor says (its default is 12)
        assert env.metadata == {
            "name": "VaultCode",
            "max_turns": 25,
            "contract": "published",
            "has_solution": True,
        }
        obs, info = env.reset(seed=4)
        assert "\\boxed{try DDD}" in obs and "solution" not in info
        assert info["solution_text"] == info["hint"] and info["solution_text"].startswith(
            "\\boxed{try "
        )
        assert env.step("no command here")[1:3] == (0.0, False)
        assert env.step(info["solution_text"])[2] is True
    with EnvSession(
        code("games/vault_code.py"), SandboxConfig(extra_env={"SPADE_MAX_TURNS": "5"})
    ) as env:
        assert env.metadata["max_turns"] == 5
    with EnvSession(code("broken/missing_solution.py"), CFG) as env:
        assert env.metadata["has_solution"] is False
        obs, info = env.reset(seed=1)
        assert info == {"solution_text": ""} and "\\boxed{up}" in obs
    with pytest.raises(EnvError, match="no class with reset"):
        EnvSession("class Helper:\n    def reset(self, seed=None):\n        return 'o', {}\n", CFG)


# --------------------------------------------------------------------------- the release's loader


def test_tool_use_base_env_speaks_the_release_protocol():
    from spade_cli.sandbox.published import ToolUseBaseEnv, prefill

    ns: dict = {}
    prefill(ns)
    exec(compile(code("release/warehouse_restock.py"), "<env>", "exec"), ns)
    env = ns["WarehouseRestockEnv"](max_turns=6)
    obs, info = env.reset(seed=5)
    assert info == {} and "<answer>COST</answer>" in obs and isinstance(env, ToolUseBaseEnv)
    assert [t["function"]["name"] for t in env.get_tools()] == [
        "list_items",
        "get_stock",
        "get_price",
        "place_order",
    ]
    assert env.get_tools()[1]["function"]["parameters"]["required"] == ["item"]
    assert env.step("no protocol here") == (
        "Format error: use tools to call a function, or <answer>result</answer> to submit.",
        -0.1,
        False,
        False,
        {},
    )
    assert env.step("<tool_call>{not json</tool_call>")[1] == -0.1
    assert env.step('<tool_call>{"name": "fly", "arguments": {}}</tool_call>')[0].startswith(
        "Unknown tool 'fly'. Available: list_items, get_stock"
    )
    target = env._target
    stock = env.step(
        f'<tool_call>{{"name": "get_stock", "arguments": {{"item": "{target}"}}}}</tool_call>'
    )
    assert stock == (f"Tool result:\n{env._state['stock'][target]}", 0.0, False, False, {})
    assert env.step("<answer>0</answer>") == ("Incorrect. Keep using tools.", 0.0, False, False, {})
    # the sixth turn is the last: truncated, and the solution shown
    last = env.step("<answer>1</answer>")
    assert last[1:4] == (0.0, False, True) and "Solution:" in last[0]
    env.reset(seed=5)
    for action in solution_actions(env.solution()):
        out = env.step(action)
    assert out == ("Correct!", 1.0, True, False, {})
    assert env.execute_tool("get_price", {"item": target})["returncode"] == 0
    assert env.execute_tool("get_price", {"colour": "red"})["returncode"] == 1


def test_the_release_names_are_injected_and_math_verify_is_in_the_jail():
    from spade_cli.sandbox.published import common_names

    names = common_names()
    for n in (
        "random",
        "math",
        "re",
        "json",
        "itertools",
        "collections",
        "np",
        "numpy",
        "deque",
        "defaultdict",
        "Counter",
        "combinations",
        "reduce",
        "deepcopy",
        "heappush",
        "Tuple",
        "Dict",
        "List",
        "Optional",
    ):
        assert n in names, n
    assert len(names) >= 40
    # hidden_slope.py imports math_verify and uses `random` without importing it
    with EnvSession(code("release/hidden_slope.py"), CFG) as env:
        assert env.metadata["name"] == "HiddenSlopeEnv" and env.metadata["has_solution"] is False
        obs, info = env.reset(seed=3)
        assert info == {"solution_text": ""}
        pts = [env.step(f"\\boxed{{at {x}}}")[0] for x in (0, 1)]
        y0, y1 = (p.split("y = ")[1].rstrip(".") for p in pts)
        (n0, d), (n1, _) = (y.split("/") for y in (y0, y1))
        slope = (int(n1) - int(n0)) / int(d)
        assert env.step(f"\\boxed{{slope {slope:.6f}}}")[1:3] == (
            1.0,
            True,
        )  # math_verify: 0.75 == 3/4


def test_the_class_is_chosen_as_the_release_chooses_it():
    two = (
        "class Board:\n    def reset(self, seed=None): return 'b', {}\n"
        "    def step(self, a): return 'b', 0.0, True, False, {}\n"
        "class PuzzleEnv(Board):\n    pass\n"
        "class OtherEnv(Board):\n    pass\n"
    )
    with EnvSession(two, CFG) as env:  # the first class whose name ends in Env
        assert env.metadata["name"] == "PuzzleEnv"
    with EnvSession(code("release/ticket_workflow.py"), CFG) as env:
        assert env.metadata["name"] == "TicketWorkflowEnv"  # not the imported ToolUseBaseEnv
        assert [t["function"]["name"] for t in env.metadata["tools"]] == [
            "list_tickets",
            "assign",
            "close",
        ]
    with EnvSession(
        code("games/vault_code.py"), SandboxConfig(extra_env={"SPADE_MAX_TURNS": "5"})
    ) as env:
        assert env.metadata["max_turns"] == 5


def test_without_solution_the_environment_is_valid_and_unverified():
    out = validated(["release/hidden_slope.py", "release/ticket_workflow.py"])
    assert [r["validation"]["feasibility"] for r in out] == ["unverified", "reference"]
    assert [r["env"]["action_format"] for r in out] == ["boxed", "tool_call"]
    ours = validated_ours()
    assert ours["validation"]["feasibility"] == "verified"
    strict = validate_code(code("release/hidden_slope.py"), SEEDS, opener(), require_solution=True)
    assert (strict.valid, strict.reason) == (False, "no_env_class")
    assert "no solution()" in strict.detail and "--require-solution" in strict.detail
    assert validate_code(
        code("release/ticket_workflow.py"), SEEDS, opener(), require_solution=True
    ).valid
    r = run_cli(
        "validate",
        "-",
        "--seeds",
        "2",
        "--require-solution",
        input=orjson.dumps(_candidate("release/hidden_slope.py")) + b"\n",
    )
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["validation"]["reason"] == "no_env_class"


def test_rewards_within_the_release_range_pass():
    shaped = code("games/guess_number.py").replace('than {guess}.", 0.0,', 'than {guess}.", -5.0,')
    assert shaped != code("games/guess_number.py")
    assert validate_code(shaped, SEEDS, opener()).valid
    v = validate_code(code("broken/reward_out_of_range.py"), SEEDS, opener())
    assert (v.valid, v.reason) == (False, "reward_out_of_range") and "[-10, 10]" in v.detail


def _candidate(name: str, i: int = 0) -> dict:
    return {
        "kind": "candidate",
        "v": 1,
        "id": f"pub-{i}",
        "parents": [],
        "origin": "fixed",
        "env": {"code": code(name), "name": Path(name).stem},
    }


def validated_ours() -> dict:
    nim = next(c for c in library_candidates() if c["env"]["name"] == "nim")
    return next(iter(validate_records([nim], opener(), seeds=2, workers=1)))


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("name", list(EXPECTED))
def test_fixture_validates_as_expected(name):
    valid, reason, multi = EXPECTED[name]
    v = validate_code(code(name), SEEDS, opener())
    assert (v.valid, v.reason) == (valid, reason), (name, v.detail)
    assert v.contract == "published" and "three_steps" in v.checks and "feasible" not in v.checks
    if multi is not None:
        assert v.multi_turn is multi, name
    if not valid:
        assert v.detail


def test_single_shot_quizzes_are_rejected_on_request():
    v = validate_code(code("games/single_shot_quiz.py"), SEEDS, opener(), reject_single_shot=True)
    assert (v.valid, v.reason, v.multi_turn) == (False, "single_shot", False)
    assert validate_code(
        code("games/guess_number.py"), SEEDS, opener(), reject_single_shot=True
    ).valid


def test_a_contract_that_does_not_match_is_rejected():
    v = validate_code(code("games/guess_number.py"), SEEDS, opener(), contract="spade")
    assert (v.valid, v.reason) == (False, "no_env_class") and "--contract spade" in v.detail
    nim = next(c for c in library_candidates() if c["env"]["name"] == "nim")["env"]["code"]
    v = validate_code(nim, SEEDS, opener(), contract="published")
    assert (v.valid, v.reason, v.contract) == (False, "no_env_class", "published")
    v = validate_code(nim, SEEDS, opener())
    assert v.valid and v.contract == "spade" and "feasible" in v.checks and v.multi_turn is True


def test_observation_leaking_the_solution_is_a_hint_leak():
    leaky = code("games/guess_number.py").replace(
        'return ("I am thinking',
        'return ("It is \\\\boxed{" + str(self.secret) + "}. " "I am thinking',
    )
    v = validate_code(leaky, SEEDS, opener())
    assert (v.valid, v.reason) == (False, "hint_leak"), v.detail


def test_validated_record_carries_the_contract_and_the_action_format():
    out = validated(["games/dark_corridor.py", "tools/shelf_search.py"])
    assert [r["env"]["action_format"] for r in out] == ["boxed", "tool_call"]
    assert [r["env"]["max_turns"] for r in out] == [25, 25]  # the release's budget
    for r in out:
        assert r["env"]["contract"] == "published"
        assert r["validation"]["contract"] == "published" and r["validation"]["multi_turn"] is True
    share = score_metrics([{**r, "origin": "design"} for r in out])["multi_turn_rate"]
    assert share == 1.0


# --------------------------------------------------------------------------- hostile code


HOSTILE = """
import os, time

class Hostile:
    def __init__(self, max_turns=3):
        self.max_turns = max_turns

    def reset(self, seed=None):
        return "o", {}

    def step(self, action):
        %s

    def solution(self):
        %s
"""


@pytest.mark.parametrize(
    "step,solution,reason",
    [
        ("while True: pass", "return 'x'", "timeout"),
        ("x = bytearray(8 << 30)", "return 'x'", "memory"),
        ("return 'o', 0.0, False, False, {}", "while True: pass", "timeout"),
        ("open('/opt/spade/published.py', 'w').write('')", "return 'x'", "bad_step"),
        ("while True: os.fork()", "return 'x'", "limit"),
        ("while True: print('x' * 1000)", "return 'x'", "flood"),
    ],
)
def test_hostile_published_code_is_contained(step, solution, reason):
    v = validate_code(HOSTILE % (step, solution), [1], opener(SandboxConfig(call_timeout=2.0)))
    assert (v.valid, v.reason) == (False, reason), v.detail
    # the adapter file is read-only and the next environment still loads through it
    assert validate_code(code("games/guess_number.py"), [1], opener()).valid


# --------------------------------------------------------------------------- playing


def test_action_formats():
    guess, tools = code("games/guess_number.py"), code("tools/shelf_search.py")
    assert action_format("auto", "published", guess) == "boxed"
    assert action_format("auto", "published", tools) == "tool_call"
    assert action_format("plain", "published", guess) == "plain"
    assert action_format("auto", "spade", "") == "plain"
    assert action_format("boxed", "spade", "") == "boxed"
    reply = "<think>maybe \\boxed{1}</think> I go \\boxed{east} "
    assert reply_actions(reply, None, lambda t: [], "boxed") == ([], ["I go \\boxed{east}"])
    assert reply_actions(reply, None, lambda t: [], "plain") == ([], ["I go \\boxed{east}"])
    prompt = AgentPrompt()
    assert "\\boxed{<action>}" in prompt.system("G", 5, False, "boxed")
    assert "<answer>done</answer>" in prompt.system("G", 5, False, "tool_call")
    assert "\\boxed" not in prompt.system("G", 5, False, "plain")


def test_replay_agent_plays_published_environments():
    out = list(run_rollouts(validated(REPLAYABLE), ReplayAgent(), k=2, seed=3, sandbox_cfg=CFG))
    for rec in out:
        for ep in rec["rollouts"]["nohint"] + rec["rollouts"]["hint"]:
            assert ep["stop"] == "terminated" and ep["return"] == pytest.approx(1.0), rec["env"][
                "name"
            ]
            assert all(
                t["action"].startswith(("\\boxed{", "<tool_call>", "<answer>")) for t in ep["turns"]
            )


@pytest.mark.slow
def test_model_agent_plays_published_environments(tiny_model):
    from spade_cli.engines import Sampling, load_engine

    engine = load_engine(str(tiny_model), "hf", max_batch_size=8)
    agent = ModelAgent(engine, Sampling(max_tokens=12), seed=0)
    recs = validated(["games/guess_number.py", "tools/shelf_search.py"])
    out = list(run_rollouts(recs, agent, k=1, seed=0, sandbox_cfg=CFG, max_turns=3))
    for rec, rule in zip(out, ("\\boxed{<action>}", "<answer>done</answer>"), strict=True):
        for ep in rec["rollouts"]["nohint"] + rec["rollouts"]["hint"]:
            assert ep["stop"] in ("terminated", "truncated", "max_turns", "context"), ep.get(
                "detail"
            )
            assert ep["num_turns"] >= 1 and len(ep["env_mask"]) == len(ep["completion_ids"]) > 0
            assert rule in engine.tokenizer.decode(ep["prompt_ids"])
    # --action-format plain keeps our framing for the same environment
    plain = list(
        run_rollouts(
            recs[:1], agent, k=1, seed=0, sandbox_cfg=CFG, max_turns=2, action_format="plain"
        )
    )
    assert "\\boxed{<action>}" not in engine.tokenizer.decode(
        plain[0]["rollouts"]["nohint"][0]["prompt_ids"]
    )


# --------------------------------------------------------------------------- importing a pool


@pytest.fixture
def pool(tmp_path) -> Path:
    root = tmp_path / "pool"
    for sub in ("games", "tools", "broken", "release"):
        shutil.copytree(DATA / sub, root / sub)
    (root / "SHA256SUMS").write_text(sums(root))
    return root


def test_import_a_directory_with_its_manifest(pool, tmp_path):
    r = run_cli("cat", "--from-dir", pool)
    assert r.returncode == 0, r.stderr
    recs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(recs) == len(EXPECTED)
    by_path = {Path(x["path"]).relative_to(pool).as_posix(): x for x in recs}
    assert set(by_path) == set(EXPECTED)
    for rel, x in by_path.items():
        assert (
            x["kind"] == "candidate" and x["origin"] == "fixed" and x["skill"] == rel.split("/")[0]
        )
        assert x["env"]["code"] == code(rel) and x["env"]["contract"] == "published"
        assert x["sha256"] == hashlib.sha256(code(rel).encode()).hexdigest()
    assert by_path["games/vault_code.py"]["env"]["name"] == "VaultCode"
    assert by_path["games/vault_code.py"]["env"]["max_turns"] == 25  # as the release loads it
    assert run_cli("cat", "--from-dir", pool).stdout == r.stdout  # stable ids
    # validated as expected straight from the import
    v = run_cli("validate", "-", "--seeds", "2", input=r.stdout)
    assert v.returncode == 0, v.stderr
    got = {
        Path(x["path"]).relative_to(pool).as_posix(): x["validation"]
        for x in map(orjson.loads, v.stdout.splitlines())
    }
    assert {k: (g["valid"], g["reason"]) for k, g in got.items()} == {
        k: e[:2] for k, e in EXPECTED.items()
    }
    # the valid ones as an eval suite: the oracle plays solution() and solves them all
    f = tmp_path / "validated.jsonl"
    f.write_bytes(v.stdout)
    e = run_cli("eval", "--suite", f, "--oracle", "-n", "0")
    assert e.returncode == 0, e.stderr
    evals = [orjson.loads(x) for x in e.stdout.splitlines()]
    won = {x["id"]: x["samples"][0]["success"] for x in evals}
    assert len(evals) == len(VALID) and sum(won.values()) == len(REPLAYABLE), won
    # and as the loop's fixed pool
    p = run_cli("memory", "pool", pool, "-n", "3", "--round", "2")
    assert p.returncode == 0, p.stderr
    drawn = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert len(drawn) == 3 and all(x["origin"] == "fixed" and x["round"] == 2 for x in drawn)


def test_a_tampered_file_is_named_and_fails_with_exit_3(pool):
    target = pool / "games" / "guess_number.py"
    target.write_text(target.read_text().replace("randint(10, 99)", "randint(10, 11)"))
    r = run_cli("cat", "--from-dir", pool)
    assert r.returncode == 3 and r.stdout == b""
    err = r.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and str(target) in err and "SHA-256" in err
    with pytest.raises(DataError, match="missing"):
        (pool / "tools" / "shelf_search.py").unlink()
        target.write_text(code("games/guess_number.py"))
        pool_from_dir(pool)


def test_manifest_columns_give_the_skill(tmp_path):
    root = tmp_path / "flat"
    root.mkdir()
    for name in ("games/guess_number.py", "tools/shelf_search.py", "games/dark_corridor.py"):
        shutil.copy(DATA / name, root / Path(name).name)
    rows = ["path,sha256,skill"] + [
        f"{p.name},{hashlib.sha256(p.read_bytes()).hexdigest()},{'tool use' if 'shelf' in p.name else 'planning'}"
        for p in sorted(root.glob("*.py"))
        if p.name != "dark_corridor.py"
    ]
    (root / "manifest.csv").write_text("\n".join(rows) + "\n")
    recs = pool_from_dir(root)
    assert sorted((Path(r["path"]).name, r["skill"]) for r in recs) == [
        ("guess_number.py", "planning"),
        ("shelf_search.py", "tool use"),
    ]  # only what it lists
    (root / "manifest.csv").unlink()
    assert is_released_pool(root)  # published files directly in it
    assert sorted(r["skill"] for r in pool_from_dir(root)) == ["", "", ""]


def test_the_release_pool_layout_is_detected_with_its_skills(tmp_path):
    """Their static pool: games/game_*.py, checksums.sha256 at the top (covering the
    manifest too) and manifest.jsonl naming each game's skill."""
    root = tmp_path / "released"
    (root / "games").mkdir(parents=True)
    files = {
        "games/game_0001_mathematical_reasoning.py": "release/hidden_slope.py",
        "games/game_0002_logical_deduction.py": "games/vault_code.py",
    }
    for rel, src in files.items():
        shutil.copy(DATA / src, root / rel)
    rows = [
        {"file": "game_0001_mathematical_reasoning.py", "skill": "Mathematical Reasoning"},
        {"file": "game_0002_logical_deduction.py", "skill": "Logical Deduction"},
    ]
    (root / "manifest.jsonl").write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    listed = sorted([*files, "manifest.jsonl"])
    (root / "checksums.sha256").write_text(
        "".join(f"{hashlib.sha256((root / r).read_bytes()).hexdigest()}  {r}\n" for r in listed)
    )
    assert is_released_pool(root)
    recs = pool_from_dir(root)
    assert [(Path(r["path"]).name, r["skill"]) for r in recs] == [
        ("game_0001_mathematical_reasoning.py", "Mathematical Reasoning"),
        ("game_0002_logical_deduction.py", "Logical Deduction"),
    ]
    assert all(r["env"]["contract"] == "published" for r in recs)
    (root / "games" / "game_0002_logical_deduction.py").write_text("class X: pass\n")
    with pytest.raises(DataError, match="game_0002.*SHA-256"):
        pool_from_dir(root)
    (root / "checksums.sha256").unlink()  # manifest.jsonl alone lists the files too
    (root / "manifest.jsonl").write_text(
        '{"file": "games/game_0001_mathematical_reasoning.py", '
        '"category": "Spatial Reasoning"}\n{"skill": "x"}\n'
    )
    with pytest.raises(DataError, match="manifest.jsonl:2: .*path"):
        pool_from_dir(root)


# --------------------------------------------------------------------------- designing


@pytest.mark.slow
def test_design_in_the_published_contract(tiny_model):
    from spade_cli.design import design_records, load_contract
    from spade_cli.engines import Sampling, load_engine
    from spade_cli.stage_settings import DesignSettings

    text = load_contract("published")
    assert "\\boxed{" in text and "solution(self)" in text and "standard library" in text
    assert "gymnasium.Env` subclass" not in text
    ours = load_contract()
    for guidance in ("hidden", "partial reward", "never an exception", "doubled", "trace"):
        assert guidance in ours and guidance.split()[0] in text, guidance
    eng = load_engine(str(tiny_model), "hf")
    s = DesignSettings(
        designs_per_doc=1,
        sampling=Sampling(max_tokens=8),
        contract="published",
        max_prompt_tokens=3000,
    )
    doc = {"kind": "doc", "v": 1, "id": "d", "parents": [], "text": "Locks and keys.", "chars": 15}
    rec = next(iter(design_records([doc], eng, s)))
    system = rec["design"]["messages"][0]["content"]
    assert "solution(self)" in system and rec["design"]["exemplars"] == []
