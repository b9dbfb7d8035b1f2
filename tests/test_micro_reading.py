"""bench/micro_reading.py: which facts of the micro world the shipped micro model acts on."""

from __future__ import annotations

from spade_cli.micro import model as micro
from spade_cli.micro.site.spade_micro import FAMILIES

from .helpers import bench_module

reading = bench_module("micro_reading")


def test_every_family_hint_and_move_is_asked_with_the_experts_answer():
    cases = reading.cases(episodes=1, seed=0)
    groups = {g for g, _, _ in cases}
    for family in ("corridor", "code", "switch/first", "switch/last"):
        for hint in ("hint", "no hint"):
            assert {f"{family}/{hint}/first", f"{family}/{hint}/later"} <= groups
    for group, messages, want in cases:
        assert messages[-1]["role"] == "user" and messages[0]["role"] == "system"
        family = group.split("/")[0]
        if family == "corridor":
            assert want in ("left", "right", "enter")
        else:  # a symbol shown in the observation (or stated by the hint)
            assert len(want) == 1 and want in " ".join(m["content"] for m in messages[1:])
    assert len(groups) == 4 * len(FAMILIES) + 4  # the switches split by rule


def test_the_shipped_model_reads_corridors_and_locks():
    table = reading.reading(str(micro.WEIGHTS), episodes=2, seed=0)
    # After the first move the next one is stated at the end of the observation: the
    # shipped build walks the corridor it is told and copies the lock's next symbol nine
    # times in ten, where a guess is right about one time in three (bench/micro_reading.py,
    # docs/concepts/micro.md).
    for group in ("corridor/no hint/later", "corridor/hint/first"):
        assert table[group]["right"] >= 0.9, (group, table[group])
    assert table["code/no hint/later"]["right"] >= 0.8, table["code/no hint/later"]
    assert all(row["moves"] > 0 for row in table.values())
