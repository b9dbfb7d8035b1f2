"""The published recipe's ablation configs under examples/ablations/ load and shape the round."""

from __future__ import annotations

from pathlib import Path

import pytest

from spade_cli.loop.config import load_config
from spade_cli.loop.recipe import round_stages
from spade_cli.stage_settings import ESTIMATORS

ABLATIONS = sorted((Path(__file__).resolve().parents[1] / "examples" / "ablations").glob("*.toml"))


def test_every_published_ablation_is_shipped():
    assert {p.stem for p in ABLATIONS} == {"no-corpus", "no-memory", "no-designer-training-no-memory",
                                           "fixed-pool", "two-skills", "solve-rate", "learning-potential", "regret-var"}


@pytest.mark.parametrize("path", ABLATIONS, ids=lambda p: p.stem)
def test_ablation_config_loads_and_gives_a_round(path):
    estimator = next((line.split('"')[1] for line in path.read_text().splitlines()
                      if line.startswith("estimator")), None)
    if estimator is not None and estimator not in ESTIMATORS:
        pytest.skip(f"regret estimator {estimator!r} is not available in this build")
    cfg = load_config(str(path))
    stages = {s.name: s for s in round_stages(cfg, 1)}
    assert "train" in stages and "regret" in stages
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
