"""Per-skill metrics and the skills plot of the loop's report."""

from __future__ import annotations

import warnings

from spade_cli.loop.config import load_config
from spade_cli.loop.report import _write_metrics, plot_run, score_metrics


def cand(skill, valid, wins=(), regret=None):
    c = {
        "id": f"c-{skill}-{valid}-{len(wins)}",
        "origin": "design",
        "skill": skill,
        "validation": {"valid": valid, "reason": "ok" if valid else "no_class"},
    }
    if valid:
        c["rollouts"] = {"nohint": [{"success": w, "return": float(w)} for w in wins], "hint": []}
        c["score"] = {"regret": regret, "reward": regret}
    return c


def test_per_skill_valid_rate_win_rate_and_regret(tmp_path):
    scored = [
        cand("Optimization", True, (1, 0, 0, 0), 0.5),
        cand("Optimization", False),
        cand("Optimization", True, (1, 1), 0.1),
        cand("Causal Inference", True, (0, 0), -0.2),
        {
            "id": "r",
            "origin": "replay",
            "skill": "Optimization",
            "rollouts": {"nohint": [{"success": 1}]},
        },
    ]
    m = score_metrics(scored)["skills"]
    assert m["Optimization"] == {
        "designs": 3,
        "valid_rate": 0.6667,
        "win_rate": 0.5,
        "regret_mean": 0.3,
    }
    assert m["Causal Inference"] == {
        "designs": 1,
        "valid_rate": 1.0,
        "win_rate": 0.0,
        "regret_mean": -0.2,
    }
    cfg = load_config(None, {"runs_dir": str(tmp_path)})
    cfg.run_dir.mkdir(parents=True)
    for r in (1, 2):
        _write_metrics(cfg, {"round": r, **score_metrics(scored)})
    paths = plot_run(cfg)
    assert cfg.run_dir / "plots" / "skills.png" in paths
    assert (cfg.run_dir / "plots" / "skills.png").stat().st_size > 10_000


def test_plots_of_a_round_with_nothing_measured_warn_of_nothing(tmp_path):
    # Designs of a skill, none valid: no win rate, no regret, so the per-skill panels
    # (and the reward and training plots) have nothing to draw a legend for.
    cfg = load_config(None, {"runs_dir": str(tmp_path)})
    cfg.run_dir.mkdir(parents=True)
    _write_metrics(cfg, {"round": 1, **score_metrics([cand("Optimization", False)])})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = plot_run(cfg)
    assert cfg.run_dir / "plots" / "skills.png" in paths
