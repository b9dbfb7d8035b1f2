"""bench/micro_criteria.py: the micro experiment's bars read from its results."""

from __future__ import annotations

import json

from .helpers import bench_module

criteria = bench_module("micro_criteria")
tables = bench_module("micro_report")


def run(gain=0.2, rewards=(0.3, 0.4, 0.5), fixed=None, plateau=None, wall=200.0):
    rounds = [{"heldout": {"all": 0.3}}]
    for i, r in enumerate(rewards):
        rnd = {"heldout": {"all": 0.3 + (gain if i == len(rewards) - 1 else 0.0)}}
        rnd["designer_reward"] = r
        if fixed:
            rnd["designer_reward_fixed_agent"] = fixed[i]
        if plateau:
            rnd["plateau_share"] = plateau[i]
        rounds.append(rnd)
    return {"rounds": rounds, "wall_seconds": wall}


def rows_by_bar(results: dict) -> dict[str, list[str]]:
    return {r[0]: r[1:] for r in criteria.criteria(results)}


def row(results: dict, words: str) -> list[str]:
    (found,) = [v for k, v in rows_by_bar(results).items() if words in k]
    return found


def test_the_agents_bar_asks_fifteen_points_of_every_seed():
    results = {"runs": {"spade": {"0": run(gain=0.16), "1": run(gain=0.14)}}}
    assert row(results, "held-out solve rate") == ["+0.160 / +0.140", "not met (1 of 2)"]
    results["runs"]["spade"]["1"] = run(gain=0.15)
    assert row(results, "held-out solve rate") == ["+0.160 / +0.150", "met"]


def test_the_designers_bar_holds_in_a_seed_where_spade_rises_and_its_control_does_not():
    up, down = (0.3, 0.4, 0.5), (0.5, 0.4, 0.3)
    results = {
        "runs": {
            "spade": {"0": run(rewards=up), "1": run(rewards=up)},
            "negative-control": {"0": run(rewards=down), "1": run(rewards=up)},
        }
    }
    measured, verdict = row(results, "designer reward as trained on")
    assert measured == "seed 0 +0.20 vs -0.20 ✓; seed 1 +0.20 vs +0.20 ✗"
    assert verdict == "not met (1 of 2)"
    assert not [k for k in rows_by_bar(results) if "fixed agent" in k]  # not measured
    results["runs"]["negative-control"]["1"] = run(rewards=(0.4, 0.4, 0.4))  # flat: not up
    assert row(results, "designer reward as trained on")[1] == "met"
    for r in (*results["runs"]["spade"].values(), *results["runs"]["negative-control"].values()):
        for rnd in r["rounds"][1:]:
            rnd["designer_reward_fixed_agent"] = 0.5
    assert row(results, "with a fixed agent")[1] == "not met (0 of 2)"  # flat SPADE: not up


def test_a_seed_only_spade_ran_is_left_out_of_the_designers_bar():
    up, down = (0.3, 0.4, 0.5), (0.5, 0.4, 0.3)
    results = {
        "runs": {
            "spade": {"0": run(rewards=up), "1": run(rewards=up)},
            "negative-control": {"0": run(rewards=down)},
        }
    }
    assert row(results, "designer reward as trained on") == ["seed 0 +0.20 vs -0.20 ✓", "met"]


def test_a_spade_variant_is_read_against_its_own_control():
    results = {
        "runs": {
            "spade-invalid-penalty": {"0": run(rewards=(0.3, 0.4, 0.5))},
            "negative-control": {"0": run(rewards=(0.5, 0.5, 0.9))},
            "negative-control-invalid-penalty": {"0": run(rewards=(0.5, 0.4, 0.3))},
        }
    }
    assert row(results, "spade-invalid-penalty's up")[1] == "met"


def test_the_plateau_share_rises_only_beyond_two_standard_errors_of_its_seeds_changes():
    rising = {str(s): run(plateau=(0.1, 0.2, 0.3 + s / 100)) for s in range(3)}
    measured, verdict = row({"runs": {"spade": rising}}, "plateau band")
    assert measured == "0.10 → 0.31 (+0.21 ± 0.01; up in 3 of 3 seeds)" and verdict == "met"
    drifting = {"0": run(plateau=(0.1, 0.2, 0.4)), "1": run(plateau=(0.3, 0.2, 0.1))}
    measured, verdict = row({"runs": {"spade": drifting}}, "plateau band")
    assert measured == "0.20 → 0.25 (+0.05 ± 0.25; up in 1 of 2 seeds)"
    assert verdict == "not met"


def test_spade_is_set_beside_the_fixed_pool_and_the_frozen_designer_whichever_way():
    def arm(*gains):
        return {str(i): run(gain=g) for i, g in enumerate(gains)}

    results = {
        "runs": {
            "spade": arm(0.20, 0.21, 0.22),
            "fixed-pool": arm(0.10, 0.11, 0.12),
            "frozen-designer": arm(0.19, 0.22, 0.25),
        }
    }
    measured, verdict = row(results, "beside the fixed pool")
    assert measured == (
        "fixed-pool +0.100 ± 0.008 (ahead); frozen-designer -0.010 ± 0.018 (not apart)"
    )
    assert verdict == "reported"


def test_time_sums_the_runs_and_asks_five_minutes_of_each():
    results = {
        "runs": {
            "spade": {"0": run(wall=290.0), "1": run(wall=400.0)},
            "fixed-pool": {"0": run(wall=150.0)},
        }
    }
    assert row(results, "whole experiment") == ["14.0 min over 3 runs", "met"]
    assert row(results, "every run") == ["150 to 400 s", "not met (2 of 3)"]
    results["runs"]["fixed-pool"]["0"] = run(wall=3000.0)
    assert row(results, "whole experiment") == ["61.5 min over 3 runs", "not met"]
    # a run's loop and the measurements after it: the loops' own figure beside the verdict
    for r, loop in zip(results["runs"]["spade"].values(), (250.0, 310.0), strict=True):
        r["loop_seconds"] = loop
    results["runs"]["fixed-pool"]["0"]["loop_seconds"] = 3000.0
    assert row(results, "every run") == [
        "290 to 3000 s; the loops alone 250 to 3000 s, 1 of 3 within",
        "not met (1 of 3)",
    ]


def test_the_summary_opens_with_the_bars_and_the_script_reads_results_files(tmp_path, capsys):
    results = {"runs": {"spade": {"0": run()}}}
    assert tables.summary(results).startswith("The experiment's bars")
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert criteria.main([str(path)]) == 0
    assert "| met |" in capsys.readouterr().out
    assert criteria.main([str(tmp_path / "missing.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"micro_criteria: {tmp_path / 'missing.json'}: ") and err.count("\n") == 1


def test_read_at_fewer_rounds_the_bars_are_those_of_the_first_rounds_and_no_time(tmp_path, capsys):
    # Up to round 3 SPADE's reward rises and the control's falls; round 4 turns both.
    spade = run(rewards=(0.3, 0.4, 0.5, 0.2), wall=400.0)
    control = run(rewards=(0.5, 0.4, 0.3, 0.6), wall=400.0)
    results = {"runs": {"spade": {"0": spade}, "negative-control": {"0": control}}}
    assert row(results, "as trained on")[1] == "not met (0 of 1)"
    early = criteria.first_rounds(results, 3)
    assert row(early, "as trained on")[1] == "met"
    assert not [k for k in rows_by_bar(early) if "minutes" in k]
    assert len(results["runs"]["spade"]["0"]["rounds"]) == 5  # the results are left as read
    assert criteria.first_rounds(results, 5)["runs"]["spade"] == {}  # no run that long
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert criteria.main(["--rounds", "3", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(read at round 3)" in out and "| met |" in out and "minutes" not in out
