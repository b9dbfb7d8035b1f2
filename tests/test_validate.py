"""spade-validate: every reason code, the library, the gym wrapper, a hostile batch, the CLI."""

from __future__ import annotations

import json
import os
import time
import warnings
from collections import Counter

import pytest
from gymnasium.utils.env_checker import check_env

from spade_cli.envs import checks, shared_checks
from spade_cli.envs.gym_wrapper import SandboxedEnv
from spade_cli.envs.library import broken_designs, library_candidates
from spade_cli.envs.shared_checks import Rejected
from spade_cli.envs.validation import candidate_code, seeds_for, validate_records
from spade_cli.records import REASONS
from spade_cli.sandbox import EnvSession, SandboxConfig

from .helpers import bwrap_works

BWRAP = bwrap_works()


def config(**kw) -> SandboxConfig:
    # Our own fixtures may run unconfined where bwrap is missing; hostile code never does.
    return SandboxConfig(unsafe=not BWRAP, **kw)


def opener(cfg: SandboxConfig):
    return lambda code: EnvSession(code, cfg)


def design(rid: str, text: str, **extra) -> dict:
    return {
        "kind": "candidate",
        "v": 1,
        "id": rid,
        "parents": [],
        "origin": "design",
        "design": {"text": text},
        **extra,
    }


def fenced(code: str) -> str:
    return f"Here you go.\n```python\n{code}```\n"


LIB = {c["env"]["name"]: c for c in library_candidates()}


# --------------------------------------------------------------------------- reason codes


@pytest.mark.slow
def test_every_reason_code_is_triggered_by_its_fixture():
    """examples/envs/broken/<reason>.* is rejected with <reason>; duplicate.py follows nim."""
    recs = [LIB["nim"]] + [design(f"broken-{r}", text, expect=r) for r, text in broken_designs()]
    out = list(
        validate_records(
            recs, opener(config(call_timeout=2.0)), seeds=3, workers=2, reject_single_shot=True
        )
    )
    assert [r["id"] for r in out] == [r["id"] for r in recs]  # nothing dropped, order kept
    got = {r.get("expect", "library"): r["validation"] for r in out}
    assert got["library"]["valid"], got["library"]
    for reason in REASONS:
        # the judge model's verdict and the skill check's (a design and its target skill,
        # with --skill micro): their own tests
        if reason in ("ok", "judged_invalid", "off_skill"):
            continue
        v = got[reason]
        assert (v["valid"], v["reason"]) == (False, reason), (reason, v, got)
        assert v["detail"], reason
    assert "lib-" in got["duplicate"]["detail"]
    for r in out:
        assert ("env" in r) == r["validation"]["valid"] or r.get("origin") == "library"


@pytest.mark.slow
def test_all_library_envs_validate():
    cands = list(LIB.values())
    out = list(validate_records(cands, opener(config()), seeds=3, workers=2))
    bad = {r["env"]["name"]: r["validation"] for r in out if not r["validation"]["valid"]}
    assert not bad
    for r in out:
        v = r["validation"]
        assert v["reason"] == "ok" and len(v["seeds"]) == 3 and v["seconds"] > 0
        assert r["env"]["summary"] and isinstance(r["env"]["max_turns"], int)
        assert ("tools" in r["env"]) == (r["family"] == "stateful tool use")


# --------------------------------------------------------------------------- unit checks


def test_hint_text_leaks():
    checks.check_hint_text("Try halving the interval.", ["512"], 0)
    checks.check_hint_text("Think of a vowel.", ["a"], 0)  # too short to judge
    checks.check_hint_text("Go up first, then think.", ["up", "left", "left"], 0)
    with pytest.raises(Rejected, match="hint_leak"):
        checks.check_hint_text("The answer is 512.", ["512"], 0)
    with pytest.raises(Rejected, match="hint_leak"):
        checks.check_hint_text("Moves: UP -> left, left!", ["up", "left", "left"], 0)


@pytest.mark.parametrize(
    "meta, ok",
    [
        ({"name": "x", "max_turns": 3}, True),
        ({"name": "x", "max_turns": 3, "tools": [{"name": "f", "parameters": {}}]}, True),
        (
            {
                "name": "x",
                "max_turns": 3,
                "tools": [{"type": "function", "function": {"name": "f"}}],
            },
            True,
        ),
        ({"name": "", "max_turns": 3}, False),
        ({"name": "x", "max_turns": 0}, False),
        ({"name": "x", "max_turns": True}, False),
        ({"name": "x", "max_turns": "5"}, False),
        ({"name": "x", "max_turns": 3, "tools": [{"description": "no name"}]}, False),
        ({"render_modes": []}, False),
    ],
)
def test_check_metadata(meta, ok):
    if ok:
        assert shared_checks.check_metadata(meta)["name"] == "x"
    else:
        with pytest.raises(Rejected, match="no_env_class"):
            shared_checks.check_metadata(meta)


@pytest.mark.parametrize(
    "out, reason",
    [
        (("obs", 1.0, True, False, {}), None),
        (("obs", 1, True, False, {}), None),
        (("obs", 1.0, True, {}), "bad_step"),
        ((3, 1.0, True, False, {}), "bad_step"),
        (("obs", "1", True, False, {}), "bad_step"),
        (("obs", 1.0, 1, False, {}), "bad_step"),
        (("obs", float("nan"), True, False, {}), "reward_out_of_range"),
    ],
)
def test_check_step(out, reason):
    if reason is None:
        shared_checks.check_step(out)
    else:
        with pytest.raises(Rejected, match=reason):
            shared_checks.check_step(out)


@pytest.mark.parametrize(
    "out",
    [
        # (an empty or missing hint is fine: hints are written by the model by default)
        ("obs",),
        ("obs", {"hint": "h"}),
        ("obs", {"hint": 3, "solution": ["a"]}),
        ("obs", {"hint": "h", "solution": []}),
        ("obs", {"hint": "h", "solution": "abc"}),
        (None, {"hint": "h", "solution": ["a"]}),
    ],
)
def test_check_reset_rejects(out):
    with pytest.raises(Rejected, match="bad_reset"):
        shared_checks.check_reset(out)


def test_seeds_are_per_record_and_stable():
    a, b = {"id": "cand-1"}, {"id": "cand-2"}
    assert seeds_for(a, 3, 0) == seeds_for(a, 3, 0)
    assert seeds_for(a, 3, 0) != seeds_for(b, 3, 0)
    assert seeds_for(a, 3, 0) != seeds_for(a, 3, 1)
    assert len(set(seeds_for(a, 5, 0))) == 5


def test_candidate_code_prefers_env_code():
    nim = LIB["nim"]["env"]["code"]
    assert candidate_code({"env": {"code": nim}, "design": {"text": "none"}}) == nim
    assert candidate_code(design("d", fenced(nim))) == nim
    assert candidate_code(design("d", "no block")) is None


def _never(code):
    raise AssertionError("this verdict must be reached without running the code")


def test_host_side_rejections_run_nothing():
    nim = LIB["nim"]["env"]["code"]
    memory = [{"id": "env-nim", "name": "nim", "code": nim}]
    recs = [
        design("a", "no code"),
        design("b", fenced("def broken(:\n  pass\n")),
        design("c", fenced("# a copy\n" + nim)),
    ]
    out = list(validate_records(recs, _never, memory=memory))
    assert [r["validation"]["reason"] for r in out] == ["no_code", "syntax_error", "duplicate"]
    assert "memory entry env-nim" in out[2]["validation"]["detail"]
    assert not any("env" in r for r in out)


def test_near_duplicates_only_when_asked():
    nim = LIB["nim"]["env"]["code"]
    tweaked = nim.replace("rng.randint(1, 9)", "rng.randint(2, 9)")
    memory = [{"id": "env-nim", "code": nim}]
    out = list(validate_records([design("c", fenced(tweaked))], _never, memory=memory, near=0.8))
    assert out[0]["validation"]["reason"] == "duplicate"
    assert "similar to memory entry env-nim" in out[0]["validation"]["detail"]


def test_copies_are_checked_like_any_design_when_allowed():
    """--copies allow: a copy of memory and of an earlier design is run through the
    checks, as the published validity check would, and can be valid."""
    nim = LIB["nim"]["env"]["code"]
    memory = [{"id": "env-nim", "code": nim}]
    recs = [design("a", fenced(nim)), design("b", fenced("# again\n" + nim))]
    out = list(validate_records(recs, opener(config()), memory=memory, seeds=1, copies="allow"))
    assert [r["validation"]["valid"] for r in out] == [True, True], out
    rejected = list(validate_records(recs, _never, memory=memory, seeds=1))
    assert [r["validation"]["reason"] for r in rejected] == ["duplicate", "duplicate"]


def micro_design(rid: str, skill: str, code: str) -> dict:
    return design(rid, fenced(code), skill=skill)


def test_a_design_of_another_skills_family_is_off_skill():
    """--skill micro: the design must subclass its target skill's family and name no
    other; nothing runs (the check reads the code). Without it every one is checked."""
    from spade_cli.micro import skill_families

    corridor = "from spade_micro import CorridorEnv\n\nclass A(CorridorEnv):\n    level = 3\n"
    switch = corridor.replace("CorridorEnv", "SwitchEnv")
    both = "from spade_micro import CorridorEnv, SwitchEnv\n\nclass A(SwitchEnv):\n    level = 3\n"
    computed = (
        "import spade_micro\n\nclass A(getattr(spade_micro, 'Corridor' + 'Env')):\n    level = 3\n"
    )
    attribute = "import spade_micro\n\nclass A(spade_micro.CorridorEnv):\n    level = 3\n"
    recs = [
        micro_design("a", "Logical Deduction", corridor),
        micro_design("b", "Logical Deduction", both),
        micro_design("c", "Logical Deduction", computed),
        micro_design("d", "Spatial Reasoning", switch),
        micro_design("e", "Spatial Reasoning", attribute),
        micro_design("f", "Mathematical Reasoning", corridor),  # no family: not judged
        {**micro_design("g", "Logical Deduction", corridor.replace("3", "4")), "origin": "replay"},
    ]
    families = skill_families()

    def only_on_skill(code):  # the designs the check lets through reach the sandbox
        raise Rejected("crash", "reached the sandbox")

    out = list(validate_records(recs, only_on_skill, skill_families=families, seeds=1))
    reasons = [r["validation"]["reason"] for r in out]
    assert reasons == ["off_skill"] * 4 + ["crash"] * 3, out
    assert "SwitchEnv" in out[0]["validation"]["detail"]
    assert "names CorridorEnv" in out[0]["validation"]["detail"]
    assert "no family" in out[2]["validation"]["detail"]
    unchecked = list(validate_records(recs, only_on_skill, seeds=1))
    assert "off_skill" not in {r["validation"]["reason"] for r in unchecked}


def test_replayed_env_is_not_a_duplicate_of_memory():
    nim = LIB["nim"]["env"]["code"]
    memory = [{"id": "env-nim", "code": nim}]
    rec = {**LIB["nim"], "id": "replay-1", "origin": "replay"}
    out = list(validate_records([rec], opener(config()), memory=memory, seeds=1))
    assert out[0]["validation"]["valid"], out[0]["validation"]


# --------------------------------------------------------------------------- gym wrapper


@pytest.mark.parametrize("name", ["file_system", "grid_maze", "arithmetic_word_problem"])
def test_wrapped_env_passes_check_env(name):
    with SandboxedEnv(LIB[name]["env"]["code"], config()) as env:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # gymnasium's soft problems are warnings
            check_env(env, skip_render_check=True)
        assert env.metadata["name"] == name


def test_wrapper_passes_seeds_through_and_truncates():
    code = LIB["grid_maze"]["env"]["code"]
    with SandboxedEnv(code, config()) as env, EnvSession(code, config()) as raw:
        obs, info = env.reset(seed=42)
        assert (obs, info) == tuple(raw.reset(seed=42))
        env.max_turns = 3  # the wrapper's own TimeLimit
        ends = [env.step("up")[3] for _ in range(3)]
        assert ends == [False, False, True]


# --------------------------------------------------------------------------- hostile batch


HOSTILE = {
    "infinite_loop": "    def step(self, action):\n        while True:\n            pass\n",
    "sleep": "    def step(self, action):\n        import time\n        time.sleep(3600)\n",
    "memory_bomb": "    def step(self, action):\n        x = bytearray(1 << 34)\n        return str(len(x)), 0.0, True, False, {}\n",
    "fork_bomb": (
        "    def step(self, action):\n        import os\n        while True:\n"
        "            try:\n                os.fork()\n            except OSError:\n"
        "                pass\n"
    ),
    "stdout_flood": (
        "    def step(self, action):\n        import sys\n        while True:\n"
        "            sys.stdout.write('x' * 65536)\n"
    ),
}
HOSTILE_HEAD = """import gymnasium as gym


class Hostile(gym.Env):
    metadata = {"name": "hostile", "max_turns": 3}

    def reset(self, seed=None, options=None):
        return "hi", {"hint": "none", "solution": ["go"]}

"""


def _sandbox_uid_processes() -> list[int]:
    """Live processes owned by the host uids this test process gives its sandboxed workers
    (a block of 1024 uids above 2**30 derived from our pid; see spade_cli.sandbox)."""
    low = (1 << 30) + ((os.getpid() & 0xFFFFF) << 10)
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/status") as fh:
                    uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if low <= uid < low + 1024:
                pids.append(int(p))
    return pids


@pytest.mark.requires_bwrap
@pytest.mark.slow
def test_hostile_batch_is_contained_and_good_envs_still_validate():
    recs = []
    for i, (name, body) in enumerate(HOSTILE.items()):
        recs.append(design(f"hostile-{name}", fenced(HOSTILE_HEAD + body), expect=name))
        good = ["caesar_cipher", "water_jugs", "shop_api", "nim", "word_guess"][i]
        recs.append({**LIB[good], "expect": "good"})
    cfg = SandboxConfig(call_timeout=2.0, episode_timeout=10.0)
    out = list(validate_records(recs, opener(cfg), seeds=2, workers=2))
    assert [r["id"] for r in out] == [r["id"] for r in recs]
    reasons = Counter()
    for r in out:
        v = r["validation"]
        if r["expect"] == "good":
            assert v["valid"], (r["env"]["name"], v)
        else:
            assert not v["valid"] and v["reason"] in (
                "timeout",
                "memory",
                "crash",
                "limit",
                "flood",
            ), (r["expect"], v)
            reasons[r["expect"], v["reason"]] += 1
    assert ("infinite_loop", "timeout") in reasons and ("memory_bomb", "memory") in reasons
    # the host is unharmed: no process of a sandbox uid survives the batch
    deadline = time.monotonic() + 5
    while _sandbox_uid_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _sandbox_uid_processes()


# --------------------------------------------------------------------------- the command


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_cli_validates_writes_rejects_and_summarises(cli, tmp_path):
    nim = LIB["nim"]["env"]["code"]
    src = _write(
        tmp_path / "cands.jsonl",
        [design("d1", fenced(nim)), design("d2", "no code here"), design("d3", fenced("x = (\n"))],
    )
    flags = [] if BWRAP else ["--unsafe-no-sandbox"]
    res = cli("validate", src, "--seeds", "2", "--rejects", tmp_path / "rej.jsonl", *flags)
    assert res.returncode == 0, res.stderr.decode()
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["id"] for r in out] == ["d1", "d2", "d3"]
    assert [r["validation"]["reason"] for r in out] == ["ok", "no_code", "syntax_error"]
    assert out[0]["env"]["name"] == "nim" and out[0]["env"]["code"] == nim
    assert out[0]["env"]["summary"].startswith("Nim against")
    rej = [json.loads(line) for line in (tmp_path / "rej.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rej] == ["d2", "d3"]
    err = res.stderr.decode()
    assert "3 candidates: 1 valid, 2 invalid (no_code 1, syntax_error 1)" in err


def test_cli_wrong_kind_is_a_data_error(cli, tmp_path):
    src = _write(tmp_path / "docs.jsonl", [{"kind": "doc", "v": 1, "id": "x", "parents": []}])
    res = cli("validate", src, "--unsafe-no-sandbox")
    assert res.returncode == 3
    assert f"{src}:1:" in res.stderr.decode() and "candidate" in res.stderr.decode()


def test_cli_help(cli):
    res = cli("validate", "--help")
    assert res.returncode == 0
    for flag in ("--seeds", "--workers", "--rejects", "--shard", "--unsafe-no-sandbox"):
        assert flag in res.stdout.decode()


def test_cli_limit_and_shards_partition(cli, tmp_path):
    src = _write(tmp_path / "c.jsonl", [design(f"d{i}", "no code") for i in range(8)])
    res = cli("validate", src, "--limit", "3", "--unsafe-no-sandbox")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 3
    ids = []
    for part in ("0/2", "1/2"):
        res = cli("validate", src, "--shard", part, "--unsafe-no-sandbox")
        assert res.returncode == 0
        ids += [json.loads(line)["id"] for line in res.stdout.splitlines()]
    assert sorted(ids) == sorted(f"d{i}" for i in range(8))


def test_cli_missing_bwrap_is_exit_4_with_hint(cli, tmp_path):
    src = _write(tmp_path / "c.jsonl", [design("d", "no code")])
    res = cli("validate", src, env={"PATH": str(tmp_path)})  # no bwrap on this PATH
    assert res.returncode == 4
    err = res.stderr.decode()
    assert "bwrap" in err and "--unsafe-no-sandbox" in err and len(err.splitlines()) == 1


def test_cli_unsafe_mode_warns_loudly(cli, tmp_path):
    src = _write(tmp_path / "c.jsonl", [LIB["caesar_cipher"]])
    res = cli("validate", src, "--seeds", "1", "--unsafe-no-sandbox")
    assert res.returncode == 0
    assert "WARNING" in res.stderr.decode() and "WITHOUT bubblewrap" in res.stderr.decode()
    assert json.loads(res.stdout)["validation"]["valid"]
