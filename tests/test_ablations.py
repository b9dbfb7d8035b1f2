"""The published recipe's ablation configs under examples/ablations/ load and shape the round."""

from __future__ import annotations

from pathlib import Path

import pytest

from spade_cli.errors import UsageError
from spade_cli.loop.config import load_config
from spade_cli.loop.recipe import round_stages
from spade_cli.stage_settings import ESTIMATORS

ABLATIONS = sorted((Path(__file__).resolve().parents[1] / "examples" / "ablations").glob("*.toml"))


def test_every_published_ablation_is_shipped():
    assert {p.stem for p in ABLATIONS} == {
        "no-corpus",
        "no-memory",
        "no-designer-training-no-memory",
        "fixed-pool",
        "two-skills",
        "solve-rate",
        "learning-potential",
        "regret-var",
    }


@pytest.mark.parametrize("path", ABLATIONS, ids=lambda p: p.stem)
def test_ablation_config_loads_and_gives_a_round(path):
    estimator = next(
        (
            line.split('"')[1]
            for line in path.read_text().splitlines()
            if line.startswith("estimator")
        ),
        "blend",
    )
    assert estimator in ESTIMATORS
    cfg = load_config(str(path))
    stages = {s.name: s for s in round_stages(cfg, 1)}
    assert "train" in stages and "regret" in stages
    args = stages["regret"].args  # the estimator reaches spade-regret (the default: no flag)
    assert (args[args.index("--estimator") + 1] if "--estimator" in args else "blend") == estimator
    if path.stem == "fixed-pool":
        assert "design" not in stages and "pool" in stages
    else:
        assert "design" in stages and "replay" not in stages
    if path.stem == "two-skills":
        args = stages["design"].args
        assert args[args.index("--skills") + 1] == "Mathematical Reasoning,Pattern Recognition"
        assert args[args.index("--skills-per-round") + 1] == "2"
    if path.stem == "no-designer-training-no-memory":
        assert stages["train"].args[stages["train"].args.index("--role") + 1] == "agent"
        assert "--no-memory" in stages["design"].args


def test_doc_per_design_samples_one_document_per_design(tmp_path):
    cfg = load_config(None, {"runs_dir": str(tmp_path)})
    n = cfg.corpus.docs_per_round * cfg.design.designs_per_doc
    docs = next(s for s in round_stages(cfg, 1) if s.name == "sample-docs")
    assert docs.args[docs.args.index("--num") + 1] == str(n)
    shared = load_config(None, {"runs_dir": str(tmp_path), "design": {"doc_per_design": False}})
    docs = next(s for s in round_stages(shared, 1) if s.name == "sample-docs")
    assert "--num" not in docs.args  # the default document count


def test_learning_potential_trackers_update_where_the_window_is_scored(tmp_path):
    """One designer step per round: spade-regret updates them. A window of agent steps:
    regret-window does, from the window's plays; the step-1 scoring only reads them."""
    lp = {
        "runs_dir": str(tmp_path),
        "regret": {"estimator": "learning-potential"},
        "train": {"role": "both"},
    }
    one = {s.name: s for s in round_stages(load_config(None, lp), 2)}
    assert "--state" in one["regret"].args and "--state-from" in one["regret"].args
    window = load_config(None, {**lp, "loop": {"agent_steps": 4}})
    stages = {s.name: s for s in round_stages(window, 2)}
    assert "--state" not in stages["regret"].args and "--state-from" in stages["regret"].args
    w = stages["regret-window"].args
    assert w[w.index("--state") + 1].endswith("round-002/lp-state.json")
    assert w[w.index("--state-from") + 1].endswith("round-001/lp-state.json")
    assert any(str(o).endswith("lp-state.json") for o in stages["regret-window"].outputs)


def test_each_design_pass_after_the_first_samples_fresh_documents(tmp_path):
    cfg = load_config(None, {"runs_dir": str(tmp_path), "design": {"attempts": 3}})
    stages = {s.name: s for s in round_stages(cfg, 1)}
    for a in (2, 3):
        docs = stages[f"sample-docs-{a}"]
        assert (
            docs.args[docs.args.index("--seed") + 1]
            != stages["sample-docs"].args[stages["sample-docs"].args.index("--seed") + 1]
        )
        design = stages[f"design-{a}"].args
        assert design[design.index("--fresh-docs") + 1] == str(docs.output)
    same = load_config(
        None, {"runs_dir": str(tmp_path), "design": {"attempts": 3, "redesign_doc": "same"}}
    )
    names = [s.name for s in round_stages(same, 1)]
    assert (
        "sample-docs-2" not in names
        and "--fresh-docs"
        not in next(s for s in round_stages(same, 1) if s.name == "design-2").args
    )


def test_the_pool_drawn_by_reward_plays_every_environment_and_trains_on_the_best(tmp_path):
    """baseline.pool_draw = reward: the whole pool plays, spade-memory pool --by reward
    picks pool_size of the scored records, and every agent step trains on those."""
    base = {
        "runs_dir": str(tmp_path),
        "loop": {"world": "micro"},
        "baseline": {"mode": "fixed-pool", "pool": "micro", "pool_size": 8},
        "train": {"role": "agent"},
    }
    uniform = {s.name: s for s in round_stages(load_config(None, base), 2)}
    assert uniform["pool"].args[uniform["pool"].args.index("-n") + 1] == "8"
    assert "pick" not in uniform and uniform["train"].inputs[0].endswith("scored.jsonl.zst")

    by_reward = {**base, "baseline": {**base["baseline"], "pool_draw": "reward"}}
    for steps in (1, 3):
        cfg = load_config(None, {**by_reward, "loop": {"world": "micro", "agent_steps": steps}})
        stages = {s.name: s for s in round_stages(cfg, 2)}
        assert stages["pool"].args[stages["pool"].args.index("-n") + 1] == "0"  # all play
        pick = stages["pick"]
        assert pick.cmd == "memory" and pick.inputs[0] == "pool"
        assert pick.inputs[1].endswith("round-002/scored.jsonl.zst")
        assert pick.args[pick.args.index("-n") + 1] == "8" and "reward" in pick.args
        picked = str(pick.output)
        first = stages["train" if steps == 1 else "train-s1"]
        assert first.inputs == [picked]
        for s in range(2, steps + 1):  # the further steps re-play the picked environments
            assert stages[f"rollout-s{s}"].inputs == [picked]


def test_the_pool_draw_needs_the_fixed_pool(tmp_path):
    with pytest.raises(UsageError, match="baseline.pool_draw"):
        load_config(None, {"runs_dir": str(tmp_path), "baseline": {"pool_draw": "reward"}})


def test_the_skill_check_reaches_every_validation_pass(tmp_path):
    """validate.skill = "micro" is passed to the round's first validation and to the
    later design attempts' alike."""
    cfg = load_config(
        None, {"runs_dir": str(tmp_path), "design": {"attempts": 2}, "validate": {"skill": "micro"}}
    )
    stages = {s.name: s for s in round_stages(cfg, 1)}
    for name in ("validate", "validate-2"):
        args = stages[name].args
        assert args[args.index("--skill") + 1] == "micro", name
    default = {s.name: s for s in round_stages(load_config(None, {"runs_dir": str(tmp_path)}), 1)}
    args = default["validate"].args
    assert "--skill" not in args or args[args.index("--skill") + 1] == "any"
