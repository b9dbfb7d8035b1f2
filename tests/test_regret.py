"""spade-regret: estimators against hand-computed values, rewards, dedup, memory updates."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from spade_cli import memory, regret
from spade_cli.records import new_record

from .helpers import run_cli
from .test_memory import BANK, GUESS, GUESS_REFORMATTED, GUESS_RENAMED, NIM, variants

ENVS = Path(__file__).parent / "data" / "envs"

# Today's scoring (mean-gap, penalties for invalid designs); the published defaults have
# their own tests in test_recipe_rewards.py.
LEGACY_ARGS = ("--estimator", "mean-gap", "--invalid", "penalty")


def legacy(**kw) -> regret.ScoreConfig:
    return regret.ScoreConfig(**{"estimator": "mean-gap", "invalid": "penalty", **kw})


def ep(ret: float, success: bool | None = None, seed: int = 0) -> dict:
    e = {"seed": seed, "return": ret, "turns": [], "num_turns": 1, "stop": "terminated"}
    e["success"] = ret >= 1.0 if success is None else success
    return e


def cand(
    cid: str,
    code: str | None,
    nohint: list[float] | None = None,
    hint: list[float] | None = None,
    valid: bool = True,
    reason: str = "ok",
    round_: int = 1,
    origin: str = "design",
    **extra,
) -> dict:
    rec = new_record(
        "candidate",
        cid,
        [f"doc-{cid}"],
        origin=origin,
        round=round_,
        group=f"g-{cid}",
        doc={"id": f"doc-{cid}", "text": "...", "source": {}},
    )
    rec["validation"] = {
        "valid": valid,
        "reason": reason,
        "detail": "",
        "seconds": 0.1,
        "seeds": [0, 1],
    }
    if valid:
        rec["env"] = {
            "code": code,
            "name": f"name-{cid}",
            "summary": f"summary of {cid}",
            "max_turns": 5,
        }
        rec["rollouts"] = {
            "agent": "a",
            "k": len(nohint or []),
            "nohint": [ep(r, seed=i) for i, r in enumerate(nohint or [])],
            "hint": [ep(r, seed=i) for i, r in enumerate(hint or [])],
        }
    rec.update(extra)
    return rec


def jsonl(recs: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


def parse(out: bytes) -> list[dict]:
    return [orjson.loads(x) for x in out.splitlines()]


# --------------------------------------------------------------------------- estimators

# Fixed rollouts: no-hint returns 0, 0.5, 1, 0 (successes: 1 of 4); hinted 1, 1, 0.5, 0.
NOHINT = [0.0, 0.5, 1.0, 0.0]
HINT = [1.0, 1.0, 0.5, 0.0]


def test_condition_stats():
    s = regret.condition_stats([ep(r) for r in NOHINT])
    assert s == {
        "n": 4,
        "mean_return": 0.375,
        "max_return": 1.0,
        "min_return": 0.0,
        "var_return": 0.171875,
        "success_rate": 0.25,
        "won_rate": 0.5,
    }  # won: return above 0, as released
    assert regret.condition_stats([])["mean_return"] is None


def test_success_falls_back_to_return_of_one():
    eps = [{"return": 1.0}, {"return": 0.99}, {"return": 0.2, "success": True}]
    assert regret.condition_stats(eps)["success_rate"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "estimator,expected",
    [
        ("mean-gap", 0.625 - 0.375),  # mean(1, 1, .5, 0) - mean(0, .5, 1, 0)
        ("max-gap", 1.0 - 0.375),  # max(hint) - mean(nohint)
        ("learnability", 0.25 * 0.75),  # p = 1/4 no-hint successes
    ],
)
def test_estimators_by_hand(estimator, expected):
    c = cand("c1", GUESS, NOHINT, HINT)
    sc = regret.valid_score(c, legacy(estimator=estimator))
    assert sc["regret"] == pytest.approx(expected)
    assert sc["reward"] == pytest.approx(expected)  # inside the default clip [0, 1]
    assert sc["estimates"] == pytest.approx(
        {"mean-gap": 0.25, "max-gap": 0.625, "learnability": 0.1875}
    )
    assert sc["valid"] and sc["accepted"] and sc["estimator"] == estimator


def test_negative_gap_is_clipped_for_the_reward_only():
    c = cand("c1", GUESS, nohint=[1.0, 1.0, 0.0], hint=[0.0, 0.0, 0.5])
    sc = regret.valid_score(c, legacy())
    assert sc["regret"] == pytest.approx(0.5 / 3 - 2 / 3)
    assert sc["reward"] == 0.0
    raw = regret.valid_score(c, legacy(clip=None))
    assert raw["reward"] == pytest.approx(-0.5)
    narrow = regret.valid_score(cand("c2", GUESS, [0.0, 0.0], [1.0, 1.0]), legacy(clip=(0.0, 0.8)))
    assert narrow["regret"] == 1.0 and narrow["reward"] == 0.8


def test_learnability_extremes():
    always = regret.valid_score(
        cand("c", GUESS, [1, 1, 1], [1, 1, 1]), legacy(estimator="learnability")
    )
    never = regret.valid_score(cand("c", GUESS, [0, 0], [1, 1]), legacy(estimator="learnability"))
    half = regret.valid_score(cand("c", GUESS, [1, 0], [1, 1]), legacy(estimator="learnability"))
    assert (always["regret"], never["regret"], half["regret"]) == (0.0, 0.0, 0.25)


def test_no_episodes_scores_zero_and_is_not_accepted():
    sc = regret.valid_score(cand("c", GUESS, [], []), legacy())
    assert (
        sc["reason"] == "no_episodes"
        and sc["regret"] is None
        and sc["reward"] == 0.0
        and not sc["accepted"]
    )


# --------------------------------------------------------------------------- scorer


def test_invalid_designs_get_the_penalty():
    s = regret.Scorer(legacy(invalid_penalty=-0.7))
    bad = s.score(cand("c1", None, valid=False, reason="syntax_error"))
    unvalidated = s.score({"kind": "candidate", "id": "c2", "v": 1, "parents": []})
    for rec, reason in ((bad, "syntax_error"), (unvalidated, "unvalidated")):
        sc = rec["score"]
        assert sc["reward"] == -0.7 and sc["valid"] is False and sc["reason"] == reason
        assert sc["regret"] is None and sc["accepted"] is False
    assert s.accepted == []
    # a duplicate already rejected by spade-validate gets the duplicate penalty when one is set
    dup = cand("c3", None, valid=False, reason="duplicate")
    assert s.score(dup)["score"]["reward"] == -0.7
    s2 = regret.Scorer(legacy(invalid_penalty=-0.7, duplicate_penalty=-0.2))
    assert s2.score(dup)["score"]["reward"] == -0.2


def test_duplicates_in_batch_and_memory():
    mem = [memory.entry_from_candidate(cand("old", NIM, [0.0], [1.0]), {"regret": 1.0}, 0)]
    s = regret.Scorer(legacy(duplicate_penalty=-0.5), mem)
    first = s.score(cand("a", GUESS, NOHINT, HINT))["score"]
    renamed = s.score(cand("b", GUESS_RENAMED, NOHINT, HINT))["score"]
    reformatted = s.score(cand("c", GUESS_REFORMATTED, NOHINT, HINT))["score"]
    of_memory = s.score(
        cand("d", NIM.replace("Take 1, 2 or 3", "Take one to three"), NOHINT, HINT)
    )["score"]
    different = s.score(cand("e", BANK, NOHINT, HINT))["score"]
    assert first["accepted"] and first["reward"] == 0.25
    for sc in (renamed, reformatted):
        assert (
            sc["reason"] == "duplicate" and sc["duplicate_of"] == "a" and sc["duplicate"] == "exact"
        )
        assert sc["reward"] == -0.5 and not sc["accepted"] and sc["regret"] == 0.25
    assert of_memory["duplicate_of"] == mem[0]["id"] and of_memory["duplicate"] == "near"
    assert different["accepted"]
    assert [e["name"] for e in s.accepted] == ["name-a", "name-e"]


def test_no_dedup_accepts_copies():
    s = regret.Scorer(legacy(dedup=False))
    s.score(cand("a", GUESS, NOHINT, HINT))
    assert s.score(cand("b", GUESS_RENAMED, NOHINT, HINT))["score"]["accepted"]


def test_a_design_memory_already_holds_refreshes_its_entry_without_dedup():
    """With de-duplication off, designing an environment memory holds (the micro world's
    designs are its library's code) is a new play of it: the entry takes the latest
    scores and the design's skill, and memory does not grow or go stale."""
    lib = memory.entries_from_library([{"name": "nim", "code": NIM, "max_turns": 20}])
    assert lib[0]["scores"]["regret"] is None and "skill" not in lib[0]
    s = regret.Scorer(legacy(dedup=False), lib)
    first = s.score(cand("a", NIM, [0.0, 0.0], [1.0, 1.0], skill="Logic"))["score"]
    again = s.score(cand("b", NIM, [1.0, 0.0], [1.0, 1.0], round_=2, skill="Logic"))["score"]
    assert first["accepted"] and again["accepted"]
    merged = memory.merge_into_memory(lib, s.accepted, s.replayed)
    assert len(merged) == 1 and merged[0]["origin"] == "library"
    assert merged[0]["scores"]["regret"] == again["regret"] == 0.5
    assert merged[0]["skill"] == "Logic" and merged[0]["replays"] == 2
    assert merged[0]["last_round"] == 2 and merged[0]["parents"][-2:] == ["a", "b"]
    assert memory.merge_into_memory(merged, s.accepted, []) == merged  # merged twice: no change
    # and its scores now put it among the exemplars of its skill
    assert memory.select_published(merged, "Logic", 2) == merged


def test_min_regret():
    s = regret.Scorer(legacy(min_regret=0.3))
    assert s.score(cand("a", GUESS, NOHINT, HINT))["score"]["reason"] == "below_min_regret"
    assert s.score(cand("b", NIM, [0.0], [1.0]))["score"]["accepted"]


def test_merge_refreshes_replayed_entries_and_adds_new():
    e_old = memory.entry_from_candidate(cand("old", NIM, [0.0], [1.0]), {"regret": 1.0}, 0)
    s = regret.Scorer(legacy(), [e_old])
    rep = memory.replay_candidate(e_old, 4)
    rep["rollouts"] = {"nohint": [ep(1.0), ep(0.0)], "hint": [ep(1.0), ep(1.0)]}
    out = s.score(rep)["score"]
    assert out["accepted"] is False and out["regret"] == 0.5  # a replay is not its own duplicate
    s.score(cand("new", GUESS, NOHINT, HINT, round_=4))
    merged = memory.merge_into_memory([e_old], s.accepted, s.replayed)
    assert [e["name"] for e in merged] == ["name-old", "name-new"]
    assert merged[0]["replays"] == 1 and merged[0]["last_round"] == 4
    assert merged[0]["scores"]["learnability"] == 0.25 and merged[0]["scores"]["regret"] == 0.5
    assert e_old["replays"] == 0  # the input list is not modified
    assert (
        memory.merge_into_memory(merged, s.accepted, []) == merged
    )  # same ids are not added twice


def test_summary():
    scores = [
        regret.valid_score(cand("a", GUESS, [0, 0], [1, 1]), legacy()),
        regret.valid_score(cand("b", GUESS, [1, 1], [1, 1]), legacy()),
        regret.invalid_score(cand("c", None, valid=False, reason="timeout"), legacy()),
    ]
    s = regret.summarize(scores)
    assert s["candidates"] == 3 and s["valid"] == 2 and s["valid_rate"] == pytest.approx(2 / 3)
    assert s["reasons"] == {"timeout": 1}
    assert s["regret"]["mean"] == 0.5 and s["regret"]["median"] == 0.5 and s["regret"]["max"] == 1.0
    assert s["success_nohint"] == 0.5 and s["success_hint"] == 1.0
    assert s["reward_mean"] == pytest.approx((1 + 0 - 1) / 3)
    assert regret.quantiles([0, 10], (0.25,)) == [2.5]


# --------------------------------------------------------------------------- command


def batch() -> list[dict]:
    return [
        cand("a", GUESS, NOHINT, HINT),
        cand("b", None, valid=False, reason="infeasible"),
        cand("c", GUESS_RENAMED, NOHINT, HINT),
        cand("d", NIM, [0.0, 0.0], [1.0, 0.0]),
    ]


def test_cli_scores_every_candidate_and_updates_memory(tmp_path):
    mem_path = tmp_path / "memory.jsonl.zst"
    summary = tmp_path / "s.json"
    r = run_cli(
        "regret",
        *LEGACY_ARGS,
        "--memory",
        mem_path,
        "--invalid-penalty",
        "-2",
        "--summary-json",
        summary,
        input=jsonl(batch()),
    )
    assert r.returncode == 0, r.stderr
    out = parse(r.stdout)
    assert [c["id"] for c in out] == ["a", "b", "c", "d"]
    assert [c["score"]["reward"] for c in out] == [0.25, -2.0, -2.0, 0.5]
    assert out[2]["score"]["duplicate_of"] == "a"
    err = r.stderr.decode()
    assert "4 candidates, 3 valid (75.0%), 2 accepted" in err
    assert "infeasible 1" in err and "duplicate 1" in err
    assert "success without hint" in err and "regret (mean-gap) over 3" in err
    entries = memory.load_memory(str(mem_path))
    assert [e["name"] for e in entries] == ["name-a", "name-d"]
    assert (
        entries[0]["parents"] == ["a"]
        and entries[0]["doc_id"] == "doc-a"
        and entries[0]["round"] == 1
    )
    assert entries[0]["scores"]["regret"] == 0.25 and entries[0]["summary"] == "summary of a"
    assert orjson.loads(summary.read_bytes())["accepted"] == 2

    # a rerun on the same input (say after an interruption) gives the same scores and memory
    r2 = run_cli(
        "regret",
        *LEGACY_ARGS,
        "--memory",
        mem_path,
        "--invalid-penalty",
        "-2",
        input=jsonl(batch()),
    )
    assert r2.returncode == 0, r2.stderr
    assert [c["score"]["reward"] for c in parse(r2.stdout)] == [0.25, -2.0, -2.0, 0.5]
    assert memory.load_memory(str(mem_path)) == entries

    # a later round: a reformatted copy of a is a duplicate of memory; a new env is added
    later = [
        cand("e", GUESS_REFORMATTED, NOHINT, HINT, round_=2),
        cand("f", BANK, [0.0], [1.0], round_=2),
    ]
    r3 = run_cli("regret", *LEGACY_ARGS, "--memory", mem_path, "-e", "max-gap", input=jsonl(later))
    out3 = parse(r3.stdout)
    assert (
        out3[0]["score"]["duplicate_of"] == entries[0]["id"] and out3[0]["score"]["reward"] == -1.0
    )
    assert out3[1]["score"]["estimator"] == "max-gap" and out3[1]["score"]["reward"] == 1.0
    assert [e["name"] for e in memory.load_memory(str(mem_path))] == ["name-a", "name-d", "name-f"]


def test_cli_dry_run_and_options(tmp_path):
    mem_path = tmp_path / "m.jsonl"
    r = run_cli(
        "regret",
        *LEGACY_ARGS,
        "--memory",
        mem_path,
        "--dry-run",
        "--no-dedup",
        "--clip",
        "none",
        "--estimator",
        "learnability",
        input=jsonl(batch()),
    )
    assert r.returncode == 0, r.stderr
    assert not mem_path.exists()
    assert [c["score"]["reward"] for c in parse(r.stdout)] == [0.1875, -1.0, 0.1875, 0.0]
    bad = run_cli("regret", *LEGACY_ARGS, "--estimator", "median", input=b"")
    assert bad.returncode == 2 and b"--estimator must be one of" in bad.stderr
    bad = run_cli("regret", *LEGACY_ARGS, "--clip", "1", input=b"")
    assert bad.returncode == 2 and b"--clip must be LO,HI" in bad.stderr


def test_cli_valid_without_rollouts_is_a_data_error():
    c = cand("a", GUESS, NOHINT, HINT)
    del c["rollouts"]
    r = run_cli("regret", *LEGACY_ARGS, input=jsonl([cand("z", NIM, [0.0], [1.0]), c]))
    assert r.returncode == 3
    assert b"<stdin>:2: valid candidate without rollouts" in r.stderr


def test_spade_memory_commands(tmp_path):
    mem_path = tmp_path / "memory.jsonl"
    recs = [cand(f"v{i}", code, [0.0, 1.0], [1.0, 1.0]) for i, code in enumerate(variants(4))]
    recs.append(cand("g", GUESS, [0.0, 0.0], [1.0, 1.0]))
    assert (
        run_cli("regret", *LEGACY_ARGS, "--memory", mem_path, "-q", input=jsonl(recs)).returncode
        == 0
    )
    assert run_cli("memory", "count", mem_path).stdout == b"5\n"
    top = run_cli("memory", "top", mem_path, "-n", "2").stdout.decode().splitlines()
    assert (
        top[0].startswith("id\tname\tround\tregret")
        and top[1].split("\t")[1] == "name-g"
        and len(top) == 3
    )
    assert run_cli("memory", "show", mem_path, "name-g").stdout.decode() == GUESS
    eid = memory.load_memory(str(mem_path))[0]["id"]
    assert orjson.loads(run_cli("memory", "show", mem_path, eid, "--record").stdout)["id"] == eid
    missing = run_cli("memory", "show", mem_path, "nope")
    assert missing.returncode == 3 and b"no environment with id" in missing.stderr
    listing = run_cli("memory", "list", mem_path).stdout.decode()
    assert "- name-g: summary of g" in listing and len(listing.splitlines()) == 5
    rep = parse(
        run_cli("memory", "replay", mem_path, "-n", "3", "--round", "2", "--seed", "7").stdout
    )
    assert rep == memory.replay_candidates(memory.load_memory(str(mem_path)), 3, 2, seed=7)
    assert len(rep) == 3 and all(c["origin"] == "replay" for c in rep)
    ex = parse(run_cli("memory", "exemplars", mem_path, "-k", "2").stdout)
    assert ex[0]["name"] == "name-g" and len(ex) == 2
    assert run_cli("memory", "count", tmp_path / "none.jsonl").returncode == 3


def test_spade_memory_add_seeds_memory(tmp_path):
    mem_path = tmp_path / "memory.jsonl"
    recs = [
        cand("n", NIM),
        cand("b", BANK),
        cand("x", None, valid=False, reason="bad_step"),
        cand("g2", NIM),
    ]
    for r in recs:
        r.pop("rollouts", None)
    r = run_cli("memory", "add", mem_path, "-", input=jsonl(recs))
    assert r.returncode == 0, r.stderr
    assert [e["name"] for e in memory.load_memory(str(mem_path))] == ["name-n", "name-b"]
    assert b"added 2 environments (2 skipped)" in r.stderr


def test_library_candidates_refresh_memory_instead_of_duplicating():
    lib = memory.entries_from_library([{"name": "nim", "code": NIM, "max_turns": 20}])
    s = regret.Scorer(legacy(), lib)
    known = s.score(cand("l1", NIM, [1.0, 0.0], [1.0, 1.0], origin="library"))["score"]
    new = s.score(cand("l2", BANK, [0.0, 0.0], [1.0, 1.0], origin="library"))["score"]
    assert known["reason"] == "ok" and known["memory_id"] == lib[0]["id"] and not known["accepted"]
    assert new["accepted"] and new["reward"] == 1.0
    merged = memory.merge_into_memory(lib, s.accepted, s.replayed)
    assert [e["origin"] for e in merged] == ["library", "library"]
    assert merged[0]["scores"]["learnability"] == 0.25 and merged[0]["replays"] == 1


def test_merge_drops_copies_added_meanwhile_by_another_shard():
    # shard 1 and shard 2 both start from an empty memory; shard 1 merges first
    s1, s2 = regret.Scorer(legacy()), regret.Scorer(legacy())
    s1.score(cand("a", GUESS, NOHINT, HINT))
    s2.score(cand("b", GUESS_RENAMED.replace("Correct!", "Right!"), NOHINT, HINT))
    s2.score(cand("c", NIM, NOHINT, HINT))
    after1 = memory.merge_into_memory([], s1.accepted, [], set(), 0.8)
    after2 = memory.merge_into_memory(after1, s2.accepted, [], set(), 0.8)
    assert [e["parents"] for e in after2] == [["a"], ["c"]]
    # without the late check (no threshold) both copies would land
    assert len(memory.merge_into_memory(after1, s2.accepted, [])) == 3


def test_shuffle_memory_scores_hides_the_signal_from_memory_only(tmp_path):
    """The negative control's memory: the scores its entries keep are permuted within each
    skill (so exemplars chosen by score are chosen by chance), while the scored output,
    which the designer's own training reads, is untouched."""
    codes = variants(8)
    batch_ = [
        cand(f"c{i}", code, [0.0] * (8 - i) + [1.0] * i, [1.0] * 8, skill=("s1", "s2")[i % 2])
        for i, code in enumerate(codes)
    ]
    plain, shuffled = tmp_path / "plain.jsonl", tmp_path / "shuffled.jsonl"
    r1 = run_cli("regret", "--no-dedup", "--memory", plain, input=jsonl(batch_))
    r2 = run_cli(
        "regret", "--no-dedup", "--memory", shuffled, "--shuffle-memory-scores", input=jsonl(batch_)
    )
    assert r1.returncode == 0 and r2.returncode == 0, r2.stderr
    assert r1.stdout == r2.stdout
    true = {e["id"]: e for e in memory.load_memory(str(plain))}
    mixed = {e["id"]: e for e in memory.load_memory(str(shuffled))}
    assert true.keys() == mixed.keys() and len(true) == 8
    for skill in ("s1", "s2"):
        ids = [k for k, e in true.items() if e["skill"] == skill]
        assert sorted(orjson.dumps(true[k]["scores"]) for k in ids) == sorted(
            orjson.dumps(mixed[k]["scores"]) for k in ids
        )
    assert [true[k]["scores"] for k in true] != [mixed[k]["scores"] for k in true]
    # and a rerun permutes them the same way
    again = tmp_path / "again.jsonl"
    run_cli(
        "regret", "--no-dedup", "--memory", again, "--shuffle-memory-scores", input=jsonl(batch_)
    )
    assert memory.load_memory(str(again)) == memory.load_memory(str(shuffled))
