"""bench/micro_experiment.py's bookkeeping (the configuration overrides, the training-side
step gain, the win rate a design's reward saw) and bench/micro_report.py's tables; the
experiment itself is run by hand: it takes most of an hour."""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

import pytest

from spade_cli.loop.config import load_config
from spade_cli.loop.recipe import round_stages
from spade_cli.recordio import write_records

from .helpers import bench_module

ROOT = Path(__file__).resolve().parents[1]


bench = bench_module("micro_experiment")
tables = bench_module("micro_report")


def test_overrides_set_tables_and_top_level_fields_as_toml_values():
    cfg = {"rounds": 5, "train": {"learning_rate": 2e-4}}
    bench.apply_overrides(
        cfg, ["train.learning_rate=1e-3", "train.tis=false", "rounds=8", "rollout.episodes = 16"]
    )
    assert cfg == {
        "rounds": 8,
        "train": {"learning_rate": 1e-3, "tis": False},
        "rollout": {"episodes": 16},
    }


@pytest.mark.parametrize("item", ["train.epochs", "train.lr=fast", "=3"])
def test_a_malformed_override_is_refused_with_its_text(item):
    with pytest.raises(ValueError, match="--set"):
        bench.apply_overrides({}, [item])


def candidate(cid: str, returns: list[float]) -> dict:
    return {
        "kind": "candidate",
        "id": cid,
        "rollouts": {"nohint": [{"return": r} for r in returns]},
    }


def test_step_gain_pairs_the_same_environments_before_and_after_a_step(tmp_path):
    write_records(
        str(tmp_path / "rollouts.jsonl.zst"),
        [candidate("a", [0, 0, 1, 0]), candidate("b", [1, 1, 1, 1]), candidate("c", [0, 0])],
    )
    # c was not re-played; a rose by 0.5, b fell by 0.25
    write_records(
        str(tmp_path / "rollouts-s2.jsonl.zst"),
        [candidate("a", [1, 1, 1, 0]), candidate("b", [1, 1, 1, 0])],
    )
    assert bench.step_gain(tmp_path) == pytest.approx((0.5 - 0.25) / 2)
    assert bench.step_gain(tmp_path / "missing") is None


def test_the_win_rate_is_the_windows_when_the_reward_used_one():
    step1 = {"nohint": {"success_rate": 0.5}}
    assert bench.win_rate({"score": step1}) == 0.5
    assert bench.win_rate({"score": {**step1, "window": {"nohint": {"success_rate": 0.4375}}}}) == (
        0.4375
    )
    assert bench.win_rate({}) is None


def test_agent_groups_sum_the_agent_steps_and_leave_the_designer_step_out(tmp_path):
    def ckpt(name, role, agent, flat):
        rec = {"kind": "checkpoint", "role": role, "groups": {"agent": agent}}
        rec["skipped"] = {"flat_reward_group": flat}
        (tmp_path / name).write_text(json.dumps(rec) + "\n")

    ckpt("checkpoint-s1.jsonl", "agent", 5, 3)
    ckpt("checkpoint-s2.jsonl", "agent", 4, 4)
    ckpt("checkpoint.jsonl", "designer", 0, 2)
    assert bench.agent_groups(tmp_path) == {"trained": 9, "flat": 7}


def test_the_summary_puts_seeds_side_by_side_and_curves_per_round(tmp_path):
    def run(final, rewards):
        rounds = [{"round": 0, "heldout": {"all": 0.2}}]
        for i, rew in enumerate(rewards, 1):
            rounds.append(
                {
                    "round": i,
                    "heldout": {"all": final if i == len(rewards) else 0.25},
                    "designer_reward": rew,
                    "designer_reward_fixed_agent": rew / 2,
                    "valid_rate": 0.5,
                    "mean_level": 3.0,
                    "plateau_share": 0.25,
                    "agent_groups": {"trained": 10, "flat": 6},
                }
            )
        return {"rounds": rounds, "wall_seconds": 300.0}

    results = {"runs": {"spade": {"0": run(0.4, [0.3, 0.4, 0.5]), "1": run(0.3, [0.5, 0.4, 0.3])}}}
    text = tables.summary(results)
    assert (
        "| spade | 0.200 → 0.400 / 0.300 | +0.150 | 0.30 → 0.50; 0.50 → 0.30 | – "
        "| 0.15 → 0.25; 0.25 → 0.15 | 50% |"
    ) in text
    assert "| 10.0 / 6.0 | 5.0 min |" in text
    assert "reference workload" not in text  # no invocation measured the machine
    results["invocations"] = [{"reference_seconds": 2.35}, {"reference_seconds": 0.8}]
    assert "whose reference workload took 0.80 to 2.35 s" in tables.summary(results)
    results["invocations"] = [{"reference_seconds": 0.64}]
    assert "whose reference workload took 0.64 s" in tables.summary(results)
    del results["invocations"]
    assert "| spade | 0.200 | 0.250 | 0.250 | 0.350 |" in text  # mean over seeds per round
    tables.report(results, tmp_path)
    assert (tmp_path / "summary.md").read_text() == text
    assert (tmp_path / "micro-heldout.png").stat().st_size > 0
    assert (tmp_path / "micro-designer_reward_fixed_agent.png").stat().st_size > 0
    verdict = tables.verdicts(results)[0]
    assert "designer reward first third 0.300, last third 0.500 (up)" in verdict
    assert "with a fixed agent first third 0.150, last third 0.250 (up)" in verdict
    assert "The designer's reward, last third" in text and "draw of its designs" not in text
    for rnd in results["runs"]["spade"]["0"]["rounds"][1:]:  # results that hold the spread
        rnd["designer_reward_fixed_agent_se"] = 0.03
    text = tables.summary(results)
    assert "| +0.000 ± 0.100 (+0.10 ± 0.04 / -0.10) |" in text  # hypot(0.03, 0.03)
    assert "the draw of its designs alone moves it" in text


def test_level_entropy_is_zero_for_one_level_and_log2_6_for_all_six_alike(tmp_path):
    one = {"levels": {"1": 0, "2": 7, "3": 0, "4": 0, "5": 0, "6": 0}}
    uniform = {"levels": {str(lv): 2 for lv in range(1, 7)}}
    half = {"levels": {"1": 3, "2": 3}}
    assert tables.level_entropy(one) == 0
    assert abs(tables.level_entropy(uniform) - 2.585) < 1e-3
    assert tables.level_entropy(half) == 1.0
    assert tables.level_entropy({"levels": {}}) is None and tables.level_entropy({}) is None

    def run(rounds):
        return {"rounds": [{"round": 0, "heldout": {"all": 0.2}}, *rounds], "wall_seconds": 1.0}

    r = {"heldout": {"all": 0.3}}
    results = {"runs": {"spade": {"0": run([{**r, **uniform}, {**r, **half}, {**r, **one}])}}}
    assert "| spade | 2.58 | 1.00 | 0.00 |" in tables.summary(results)
    assert "level entropy 2.58 -> 0.00 bits" in tables.verdicts(results)[0]
    assert "micro-level_entropy.png" in {p.name for p in tables.plot(results, tmp_path)}


def test_the_fixed_agent_reward_averages_each_rounds_designs(tmp_path):
    def scored(cid, rnd, origin, reward):
        return {
            "kind": "candidate",
            "id": cid,
            "round": rnd,
            "origin": origin,
            "score": {"reward": reward},
        }

    assert bench.fixed_agent_rewards(tmp_path, 2, {}, tmp_path / "log") == {}  # nothing designed
    for r in (1, 2):
        (tmp_path / f"round-{r:03d}").mkdir()
        write_records(str(tmp_path / f"round-{r:03d}" / "validated.jsonl.zst"), [])
    write_records(
        str(tmp_path / "fixed-agent-scored.jsonl.zst"),  # already measured: not played again
        [scored("a", 1, "design", 0.5), scored("b", 1, "design", 0.25)]
        + [scored("r", 1, "replay", 1.0), scored("x", 2, "design", None)]
        + [scored("c", 2, "design", 0.75)],
    )
    per_round = bench.fixed_agent_rewards(tmp_path, 2, {}, tmp_path / "log")
    assert per_round == {1: [0.5, 0.25], 2: [0.75]}
    assert bench.mean_and_error(per_round[1]) == (0.375, 0.125)  # sd 0.1768 / sqrt(2)
    assert bench.mean_and_error(per_round[2]) == (0.75, None)  # one design: no spread
    assert bench.mean_and_error(None) == (None, None)


def test_the_loop_runs_the_held_out_suite_on_the_suites_seed(tmp_path):
    args = argparse.Namespace(eval_items=24, eval_seed=1, rounds=2, set=[], jobs=1)
    path = bench.write_config({"eval": {"suites": []}}, "frozen-designer", 3, args, tmp_path)
    cfg = tomllib.loads(path.read_text())
    assert cfg["seed"] == 3 and cfg["train"]["role"] == "agent"
    assert cfg["eval"] == {
        "suites": ["micro"],
        "num_items": 24,
        "temperature": 1.0,
        "max_tokens": 4,
        "seed": 1,
    }
    args = {s.name: s for s in round_stages(load_config(str(path)), 1)}["eval"].args
    assert [args[i + 1] for i, a in enumerate(args) if a == "--seed"] == ["1"]
    # Without [eval] seed the suite runs on the loop's seed.
    path.write_text(path.read_text().replace("seed = 1\n", ""))
    args = {s.name: s for s in round_stages(load_config(str(path)), 1)}["eval"].args
    assert [args[i + 1] for i, a in enumerate(args) if a == "--seed"] == ["3"]


def test_set_wins_over_the_arms_own_settings(tmp_path):
    pool = 'baseline.pool="/data/switches"'
    sets = [pool, "train.epochs=3", "train.threads=3"]
    args = argparse.Namespace(eval_items=24, eval_seed=0, rounds=2, set=sets, jobs=1)
    base = {"train": {"epochs": 3}}
    cfg = tomllib.loads(bench.write_config(base, "fixed-pool", 0, args, tmp_path).read_text())
    assert cfg["baseline"] == {"mode": "fixed-pool", "pool": "/data/switches", "pool_size": 8}
    assert cfg["train"] == {"epochs": 3, "role": "agent", "threads": 3}


def test_training_takes_the_cores_a_run_may_have(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 4)
    for jobs, threads in ((1, 4), (2, 2), (3, 1), (8, 1)):
        args = argparse.Namespace(eval_items=24, eval_seed=0, rounds=2, set=[], jobs=jobs)
        path = bench.write_config({}, "spade", 0, args, tmp_path)
        assert tomllib.loads(path.read_text())["train"]["threads"] == threads
        args = {s.name: s for s in round_stages(load_config(str(path)), 1)}["train"].args
        assert args[args.index("--threads") + 1] == str(threads)


def test_a_run_finished_earlier_keeps_the_commit_it_ran_at():
    results = {"commit": "bbb", "runs": {"spade": {"0": {"commit": "aaa"}}}}
    bench.keep(results, "spade", 0, {"rounds": [1], "finished_before": True})
    bench.keep(results, "spade", 1, {"rounds": [2], "finished_before": True})
    assert results["runs"]["spade"] == {
        "0": {"rounds": [1], "commit": "aaa"},
        "1": {"rounds": [2], "commit": "bbb"},
    }
    bench.keep(results, "spade", 0, {"rounds": [3], "finished_before": False})
    assert results["runs"]["spade"]["0"]["commit"] == "bbb"


def test_a_later_invocation_with_the_same_settings_adds_its_runs(tmp_path, capsys):
    settings = {k: None for k in bench.SETTINGS} | {"rounds": 5, "config": "micro.toml"}
    first = {**settings, "commit": "aaa", "arms": ["spade"], "seeds": [0], "wall_seconds": 9.0}
    first["runs"] = {"spade": {"0": {"rounds": []}}}
    (tmp_path / "results.json").write_text(json.dumps(first))
    later = {**settings, "commit": "bbb", "arms": ["spade-invalid-penalty"], "seeds": [0, 1]}
    out = bench.merged({**later, "runs": {}}, tmp_path / "results.json")
    assert out["runs"] == {"spade": {"0": {"rounds": [], "commit": "aaa"}}}
    assert out["arms"] == ["spade", "spade-invalid-penalty"] and out["seeds"] == [0, 1]
    assert out["invocations"][0]["commit"] == "aaa"
    # other settings: the runs are not comparable, so a new results file starts
    fresh = bench.merged({**later, "rounds": 10, "runs": {}}, tmp_path / "results.json")
    assert fresh["runs"] == {} and fresh["invocations"] == []
    assert "other settings" in capsys.readouterr().err


def test_the_configuration_is_named_relative_to_the_checkout(tmp_path):
    assert bench.config_name(ROOT / "examples" / "micro.toml") == "examples/micro.toml"
    assert bench.config_name(tmp_path / "mine.toml") == str((tmp_path / "mine.toml").resolve())


def design(cid: str, family: str, level: int, valid: bool, score: dict) -> dict:
    """A scored design record of one family and level, as round_metrics reads it."""
    return {
        "kind": "candidate",
        "id": cid,
        "origin": "design",
        "env": {"code": f"class X({family}Env):\n    level = {level}\n"},
        "validation": {"valid": valid},
        "score": score,
    }


def test_round_metrics_split_the_designs_by_family(tmp_path):
    def wins(rate):
        return {"reward": 0.5, "nohint": {"success_rate": rate}}

    recs = [
        design("a", "Corridor", 2, True, wins(0.75)),
        design("b", "Corridor", 4, True, wins(0.25)),
        design("c", "Switch", 1, False, wins(None)),
        design("d", "Switch", 25646662653, False, wins(None)),  # no level of the table
    ]
    # the micro prompt's form: the module imported whole, the family named in the base
    recs[1]["env"]["code"] = (
        "import spade_micro\n\nclass X(spade_micro.CorridorEnv):\n    level = 4\n"
    )
    write_records(str(tmp_path / "scored.jsonl.zst"), recs)
    m = bench.round_metrics(tmp_path)
    assert m["mean_level"] == 2.333 and sum(m["levels"].values()) == 3
    assert m["families"] == {
        "corridor": {"designs": 2, "mean_level": 3.0, "win_rate_nohint": 0.5},
        "switch": {"designs": 1, "mean_level": 1.0, "win_rate_nohint": None},
    }
    held = {"all": 0.3, "corridor": 0.25, "code": 0.5, "switch": 0.125}
    run = {"rounds": [{"round": 0, "heldout": held}, {**m, "heldout": held}]}
    table = tables.family_table({"runs": {"spade": {"0": run}}})
    assert "| spade | 0.25 → 0.25 / 3.00 → 3.00 / 0.50 → 0.50 | 0.50 → 0.50 |" in "\n".join(table)


def test_round_metrics_count_the_designs_of_their_skills_family(tmp_path):
    """The share of designs, valid or not, that subclass their target skill's family; a
    design with no skill of the world or no family is not counted."""
    skilled = [
        ("a", "Corridor", "Spatial Reasoning"),
        ("b", "Corridor", "Logical Deduction"),
        ("c", "Switch", "Logical Deduction"),
        ("d", "Corridor", "Pattern Recognition"),
        ("e", "Code", "Mathematical Reasoning"),
    ]
    recs = [{**design(c, f, 2, c != "d", {}), "skill": sk} for c, f, sk in skilled]
    recs.append({**design("f", "Corridor", 2, True, {}), "skill": "Spatial Reasoning"})
    recs[-1]["env"]["code"] = "level = 2\n"  # no family
    write_records(str(tmp_path / "scored.jsonl.zst"), recs)
    m = bench.round_metrics(tmp_path)
    assert m["on_skill_share"] == 0.5
    run = {"rounds": [{"round": 0, "heldout": {"all": 0.3}}, {**m, "heldout": {"all": 0.3}}]}
    text = tables.summary({"runs": {"spade": {"0": run | {"wall_seconds": 1}}}})
    assert "their target skill's family" in text and "| spade | 0.50 |" in text


def test_the_oracle_pools_picks_are_its_designs(tmp_path):
    """The library's records are not designs; the oracle pool's picks stand for them."""

    def picked(cid: str, family: str, level: int, reward: float) -> dict:
        score = {"reward": reward, "nohint": {"success_rate": 0.5}}
        return {**design(cid, family, level, True, score), "origin": "library"}

    everything = [picked(f"l{lv}", "Code", lv, 0.1 * lv) for lv in range(1, 7)]
    write_records(str(tmp_path / "scored.jsonl.zst"), everything)
    assert bench.round_metrics(tmp_path)["designs"] == 0  # the uniform pool: no choice
    write_records(str(tmp_path / "picked.jsonl.zst"), everything[4:])
    m = bench.round_metrics(tmp_path)
    assert m["designs"] == 2 and m["levels"] == {"1": 0, "2": 0, "3": 0, "4": 0, "5": 1, "6": 1}
    assert m["designer_reward"] == 0.55 and m["plateau_share"] == 1.0


def test_the_valid_designs_reward_is_kept_apart_from_the_penalties(tmp_path):
    """Under the invalid penalty the designer trains on its invalid answers too: its reward
    as trained on counts the penalties, and its valid designs' alone compares with the
    published recipe's, which drops the invalid ones."""
    write_records(
        str(tmp_path / "scored.jsonl.zst"),
        [
            design("a", "Corridor", 2, True, {"reward": 0.75}),
            design("b", "Corridor", 4, True, {"reward": 0.25}),
            design("c", "Switch", 1, False, {"reward": -1.0}),  # the penalty
        ],
    )
    m = bench.round_metrics(tmp_path)
    assert (m["designer_reward"], m["designer_reward_valid"]) == (0.0, 0.5)
    write_records(
        str(tmp_path / "scored.jsonl.zst"),
        [
            design("a", "Corridor", 2, True, {"reward": 0.75}),
            design("c", "Switch", 1, False, {}),  # dropped, as published
        ],
    )
    m = bench.round_metrics(tmp_path)
    assert (m["designer_reward"], m["designer_reward_valid"]) == (0.75, 0.75)
    rounds = [{"round": 0, "heldout": {"all": 0.2}}]
    rounds += [
        {
            "round": i,
            "heldout": {"all": 0.3},
            "designer_reward": -0.5 * i,
            "designer_reward_valid": 0.2 * i,
        }
        for i in (1, 2, 3)
    ]
    verdict = tables.verdicts({"runs": {"spade-invalid-penalty": {"0": {"rounds": rounds}}}})[0]
    assert "designer reward first third -0.500, last third -1.500 (not up)" in verdict
    assert "on its valid designs first third 0.200, last third 0.600 (up)" in verdict


def test_the_landscape_pools_valid_designs_per_family_and_level_and_half(tmp_path):
    def corridor(cid, level, valid, reward, win, regret):
        score = {"reward": reward, "regret": regret, "components": {"win_rate": win}}
        return design(cid, "Corridor", level, valid, score)

    write_records(
        str(tmp_path / "scored.jsonl.zst"),
        [
            corridor("a", 3, True, 0.9, 0.5, 0.25),
            corridor("b", 3, True, 0.5, 0.75, 0.0),
            corridor("c", 3, False, None, None, None),  # invalid: no cell
            corridor("d", 1, True, 0.0, 1.0, -0.125),
        ],
    )
    m = bench.round_metrics(tmp_path)
    assert m["landscape"] == {
        "corridor/L1": {"designs": 1, "reward": 0.0, "win_rate": 1.0, "regret": -0.125},
        "corridor/L3": {"designs": 2, "reward": 0.7, "win_rate": 0.625, "regret": 0.125},
    }
    # Round 1 is the first half, round 2 the second; a half's mean weighs each design once.
    late = {"corridor/L3": {"designs": 1, "reward": 0.1, "win_rate": 0.9, "regret": 0.0}}
    run = {"rounds": [{"round": 0}, {"landscape": m["landscape"]}, {"landscape": late}]}
    table = "\n".join(tables.landscape_table({"runs": {"spade": {"0": run}, "fixed-pool": {}}}))
    assert "| spade | corridor/L1 | 1: 0.00 / 1.00 / -0.12 | – |" in table
    assert "| spade | corridor/L3 | 2: 0.70 / 0.62 / +0.12 | 1: 0.10 / 0.90 / +0.00 |" in table
    assert "fixed-pool" not in table


def test_answers_with_no_code_block_are_counted_with_those_ending_in_an_action(tmp_path):
    def malformed(cid, text):
        rec = design(cid, "Corridor", 1, False, {})
        rec.pop("env")
        return {
            **rec,
            "validation": {"valid": False, "reason": "no_code"},
            "design": {"text": text},
        }

    head = "```python\nfrom spade_micro import CorridorEnv\n\n\nclass Hall(CorridorEnv):\n    level = 1\n"
    write_records(
        str(tmp_path / "scored.jsonl.zst"),
        [
            design("ok", "Corridor", 2, True, {"reward": 0.5}),
            malformed("s", head + "s"),  # a switch's symbol where the fence belongs
            malformed("left", head + "left\n"),  # a corridor's command
            malformed("cut", head),  # no action: the answer just stops
            {**design("crash", "Switch", 9, False, {}), "validation": {"reason": "import_crash"}},
        ],
    )
    m = bench.round_metrics(tmp_path)
    assert (m["malformed"], m["malformed_action_end"]) == (3, 2)
    run = {"rounds": [{"round": 0, "heldout": {"all": 0.25}}, {**m, "heldout": {"all": 0.4}}]}
    none = {**m, "malformed": 0, "malformed_action_end": 0, "heldout": {"all": 0.4}}
    runs = {"0": run, "1": {"rounds": [run["rounds"][0], none]}}
    table = "\n".join(tables.erosion_table({"runs": {"spade": runs}}))
    assert "| spade | 2 / 3 |" in table  # summed over the seeds
    fixed = {"0": {"rounds": [run["rounds"][0], {"designs": 0, "heldout": {"all": 0.3}}]}}
    assert "fixed-pool" not in "\n".join(tables.erosion_table({"runs": {"fixed-pool": fixed}}))


def test_the_sampling_error_of_a_held_out_figure_is_binomial_over_its_episodes():
    runs = {"0": {"rounds": [{"heldout": {"all": 0.25}}, {"heldout": {"all": 0.4}}]}}
    line = tables.sampling_error({"eval_items": 216, "runs": {"spade": runs}})[-1]
    assert "is 0.033 to 0.033" in line and "about ±0.07" in line  # sqrt(0.4 * 0.6 / 216)
    assert tables.sampling_error({"runs": {"spade": runs}}) == []  # older results: no count


def test_the_results_name_the_versions_of_the_packages_that_decide_the_figures(monkeypatch):
    import torch
    import transformers

    found = bench.packages()
    assert found["torch"] == torch.__version__
    assert found["transformers"] == transformers.__version__
    monkeypatch.setattr(bench, "PACKAGES", ("torch", "no-such-package-spade"))
    assert bench.packages()["no-such-package-spade"] == "absent"


def test_the_gain_table_states_each_arms_mean_gain_and_the_first_arms_lead_with_errors():
    def arm(*finals):
        return {
            str(i): {"rounds": [{"heldout": {"all": 0.25}}, {"heldout": {"all": f}}]}
            for i, f in enumerate(finals)
        }

    results = {"runs": {"spade": arm(0.35, 0.40, 0.45), "fixed-pool": arm(0.30, 0.30, 0.33)}}
    table = "\n".join(tables.gain_table(results))
    # gains 0.10 / 0.15 / 0.20: mean 0.15, sample sd 0.05, standard error 0.05 / sqrt(3)
    assert "| spade | 3 | +0.150 | 0.029 | +0.100 to +0.200 | – |" in table
    # 0.40 - 0.31 = 0.09; errors 0.0289 and 0.01 give 0.0306
    assert "| fixed-pool | 3 | +0.060 | 0.010 | +0.050 to +0.080 | +0.090 ± 0.031 |" in table
    assert tables.gain_table({"runs": {"spade": arm(0.4)}}) == []  # one seed: no spread


def test_the_reward_change_table_sizes_each_seeds_rise_of_the_designers_reward():
    def run(*rewards):
        later = [{"designer_reward": r} for r in rewards]
        return {"rounds": [{"heldout": {"all": 0.25}}, *later]}

    # thirds of three rounds: the first round against the last
    runs = {"0": run(0.2, 0.5, 0.6), "1": run(0.4, 0.1, 0.4), "2": run(0.5, 0.5, 0.3)}
    table = "\n".join(tables.reward_change_table({"runs": {"spade": runs}}))
    # changes +0.4, 0.0, -0.2: mean +0.067, sample sd 0.306, standard error 0.176
    assert "| spade | +0.067 ± 0.176 (+0.40 / +0.00 / -0.20) | – |" in table
    fixed = {"0": {"rounds": [{"heldout": {"all": 0.25}}, {"designs": 0}]}}
    assert tables.reward_change_table({"runs": {"fixed-pool": fixed}}) == []
