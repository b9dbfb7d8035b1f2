"""bench/micro_designer_probe.py's measures: what a probe's designs earned, and the
bootstrap interval that decides whether a designer changed (the probe itself runs on
finished experiment runs, by hand)."""

from __future__ import annotations

from spade_cli.recordio import write_records

from .helpers import bench_module

probe = bench_module("micro_designer_probe")


def code(level: int) -> str:
    return f"from spade_micro import CorridorEnv\n\n\nclass D(CorridorEnv):\n    level = {level}\n"


def design(cid: str, level: int, reward: float | None, win: float | None, valid: bool = True):
    rec = {"kind": "candidate", "id": cid, "validation": {"valid": valid, "reason": "ok"}}
    if valid:
        rec["env"] = {"code": code(level)}
        rec["score"] = {"reward": reward, "nohint": {"success_rate": win}}
    else:
        rec["validation"]["reason"] = "no_code"
    return rec


def copy_of(cid: str, level: int) -> dict:
    """A design validation rejected as the same code as an earlier one in its batch."""
    text = f"A corridor.\n```python\n{code(level)}```"
    return {
        "kind": "candidate",
        "id": cid,
        "design": {"text": text},
        "validation": {"valid": False, "reason": "duplicate"},
    }


def test_measures_count_valid_designs_only_for_reward_plateau_and_levels(tmp_path):
    path = tmp_path / "scored.jsonl.zst"
    write_records(
        str(path),
        [
            design("a", 3, 1.0, 0.5),
            design("b", 3, 0.5, 0.9),
            design("c", 6, 0.0, 0.0),
            design("x", 0, None, None, valid=False),
            copy_of("c2", 6),  # counts as "c", whose code it repeats
            copy_of("orphan", 2),  # repeats no valid design here: not counted
        ],
    )
    m = probe.measures(path)
    assert m["designs"] == 6 and m["valid"] == 4 and m["distinct"] == 3
    assert m["valid_share"] == round(4 / 6, 4)
    assert m["rewards"] == [1.0, 0.5, 0.0, 0.0] and m["reward"] == 0.375
    assert m["plateau_share"] == 0.25
    assert m["levels"] == {"3": 2, "6": 2}


def test_the_interval_brackets_the_difference_and_excludes_zero_only_for_a_real_shift():
    def side(rewards):
        return {"rewards": rewards, "reward": sum(rewards) / len(rewards)}

    start = [0.2, 0.4, 0.3, 0.5, 0.1, 0.3] * 10
    up = [x + 0.3 for x in start]
    r = probe.compare(side(start), side(up), reps=2000, seed=0)
    lo, hi = r["interval"]
    assert 0 < lo < 0.3 < hi and r["difference"] == 0.3 and r["verdict"] == "up"
    assert probe.compare(side(up), side(start), 2000, 0)["verdict"] == "down"
    r = probe.compare(side(start), side(list(reversed(start))), 2000, 0)
    assert r["interval"][0] < 0 < r["interval"][1] and r["verdict"] == "no change"
    assert probe.interval(start, up, 2000, 0) == probe.interval(start, up, 2000, 0)  # seeded
    # a side with fewer valid designs than MIN_VALID gets no verdict, however far it moved
    few = probe.compare(side(start), side([1.0] * (probe.MIN_VALID - 1)), 2000, 0)
    assert few["interval"] is None and few["verdict"].startswith("too few valid designs")


def test_a_run_whose_last_designer_step_kept_its_model_is_probed_with_that_model(tmp_path):
    """A round with no reward spread leaves no `checkpoint` directory: its record names
    the model it kept, and that is the run's final model."""
    import orjson

    def record(run: str, path: str, fmt: str) -> None:
        rdir = tmp_path / run / "round-002"
        rdir.mkdir(parents=True)
        line = {"kind": "checkpoint", "path": path, "format": fmt}
        (rdir / "checkpoint.jsonl").write_bytes(orjson.dumps(line) + b"\n")

    record("spade-s0", str(tmp_path / "spade-s0" / "round-002" / "checkpoint-s4"), "unchanged")
    record("spade-s1", str(tmp_path / "spade-s1" / "round-002" / "checkpoint"), "full")
    results = {"rounds": 2, "runs": {"spade": {"0": {}, "1": {}, "2": {}}}}  # seed 2 unfinished
    assert probe.final_models(tmp_path, results) == {
        "spade-s0": str(tmp_path / "spade-s0" / "round-002" / "checkpoint-s4"),
        "spade-s1": str(tmp_path / "spade-s1" / "round-002" / "checkpoint"),
    }
