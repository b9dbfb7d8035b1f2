"""SPADE_TIMINGS: each command reports its wall time and phases, nested phases once."""

from __future__ import annotations

import orjson

from spade_cli import timing

from .helpers import run_cli


def test_command_appends_one_timing_line(tmp_path):
    path = tmp_path / "t.jsonl"
    for _ in range(2):
        r = run_cli("cat", input=b'{"kind": "doc", "id": "a"}\n', env={"SPADE_TIMINGS": str(path)})
        assert r.returncode == 0
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [x["command"] for x in lines] == ["spade-cat", "spade-cat"]
    assert all(x["wall"] > 0 and x["phases"] == {} for x in lines)


def test_nested_phases_count_once():
    timing._phases.clear()
    with timing.phase("generate"):
        with timing.phase("load"):
            pass
    assert set(timing._phases) == {"generate"}

    class Engine:
        def generate(self, n):
            return self.chat(n)

        def chat(self, n):
            return n

    e = timing.timed(Engine(), "generate", "generate", "chat")
    assert e.generate(3) == 3
    assert set(timing._phases) == {"generate"}
