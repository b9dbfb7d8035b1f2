"""bench/designer_bandit.py's bookkeeping: the reward table, what counts as a design and
what it is paid (the bandit itself is run by hand: a few minutes of designer steps)."""

from __future__ import annotations

import pytest

from spade_cli.recordio import RecordReader, write_records

from .helpers import bench_module

bandit = bench_module("designer_bandit")


def design(cid: str, skill: str, text: str) -> dict:
    return {"kind": "candidate", "id": cid, "skill": skill, "design": {"text": text}}


def code(family: str, level: int) -> str:
    return f"A task.\n```python\nimport spade_micro\n\n\nclass X(spade_micro.{family}Env):\n    level = {level}\n```"


def test_each_family_is_paid_most_at_its_own_level():
    for family, best in bandit.TARGETS.items():
        rewards = {lv: bandit.reward(family, lv) for lv in range(1, 7)}
        assert max(rewards, key=rewards.get) == best and rewards[best] == 1.0
        assert all(0.0 <= r <= 1.0 for r in rewards.values())
    assert len(set(bandit.TARGETS.values())) == len(bandit.TARGETS)  # no two alike


def test_designs_are_paid_from_the_table_and_unparsed_ones_dropped(tmp_path):
    cands, scored = tmp_path / "cands.jsonl.zst", tmp_path / "scored.jsonl.zst"
    write_records(
        str(cands),
        [
            design("a", "Spatial Reasoning", code("Corridor", 5)),
            design("b", "Logical Deduction", code("Switch", 2)),
            design("c", "Pattern Recognition", code("Corridor", 5)),  # not its skill's family
            design("d", "Pattern Recognition", "no code at all"),
            design("e", "Pattern Recognition", code("Code", 9)),  # no such level
        ],
    )
    parsed, paid = bandit.score(cands, scored)
    assert parsed == [("corridor", 5), ("switch", 2), ("corridor", 5), None, None]
    recs = list(RecordReader([str(scored)]))
    assert [r["score"]["reward"] for r in recs] == [1.0, pytest.approx(2 / 3), 0.0, None, None]
    assert [r["score"]["sample"] for r in recs] == [True, True, True, False, False]
    figures = bandit.step_figures(parsed, paid)
    assert figures["parsed"] == 3 and figures["reward"] == round(5 / 9, 4)
    assert figures["families"]["switch"] == {"designs": 1, "mean_level": 2.0, "levels": {"2": 1}}
    assert figures["families"]["corridor"]["designs"] == 2
    assert "code" not in figures["families"]


def test_the_verdict_reads_the_first_and_last_third():
    steps = [
        {"step": t, "reward": r, "families": {"corridor": {"mean_level": lv}}}
        for t, (r, lv) in enumerate([(0.2, 2.0), (0.5, 3.0), (0.8, 5.0)], 1)
    ]
    line = bandit.verdict("signal", steps)
    assert "corridor 2.00 -> 5.00 (best 5)" in line and "reward 0.20 -> 0.80" in line


def test_the_verdict_reads_the_change_after_five_ten_and_every_step():
    # Rewards 0..11: after 5 steps the thirds are steps 1 and 5 (0 -> 4); after 10, steps
    # 1-3 against 8-10 (1 -> 8); after all 12, steps 1-4 against 9-12 (1.5 -> 9.5).
    steps = [{"step": t, "reward": float(t - 1), "families": {}} for t in range(1, 13)]
    line = bandit.verdict("signal", steps)
    assert line.endswith("change after 5: +4.00, 10: +7.00, 12: +8.00")
    assert bandit.rise([0.3, 0.1, 0.2]) == pytest.approx(-0.1)
