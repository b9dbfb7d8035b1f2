"""Same seed, same episode in every worker: spade-validate replays each seed in a fresh
worker of another identity (uid slot, start mode, address layout) and compares."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spade_cli.envs.library import library_candidates

pytestmark = pytest.mark.skipif(
    os.system("command -v bwrap >/dev/null") or os.geteuid() != 0,
    reason="needs bwrap and root (one host uid per worker)",
)

CAESAR = next(c for c in library_candidates() if c["env"]["name"] == "caesar_cipher")
CODE = CAESAR["env"]["code"]
SEEDED = "rng = random.Random(seed)"
assert SEEDED in CODE


def validate(cli, tmp_path: Path, code: str) -> dict:
    rec = {**CAESAR, "id": "probe", "env": {**CAESAR["env"], "code": code}}
    src = tmp_path / "cand.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    r = cli("validate", src, "--seeds", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["validation"]


@pytest.mark.parametrize(
    "draw",
    [
        "rng = random.Random(seed + os.getuid())",  # the task follows the worker's uid slot
        # where the worker's modules lie in memory, on one seed of the three (not the first,
        # which validation also replays in the same worker): the only one that differs.
        # Twenty bits of the address, not eight: two random layouts agree on eight bits
        # one time in 256, and the draw then looks deterministic.
        "rng = random.Random(seed + (id(gym) >> 12 & 0xFFFFF if seed % 3 == 2 else 0))",
    ],
)
def test_a_task_drawn_from_the_workers_identity_is_nondeterministic(
    cli, tmp_path, worker_start, draw
):
    assert validate(cli, tmp_path, CODE)["valid"] is True
    code = "import os\n" + CODE.replace(SEEDED, draw)
    verdict = validate(cli, tmp_path, code)
    assert verdict["reason"] == "nondeterministic", verdict
    assert "another uid, start mode and address layout" in verdict["detail"]
