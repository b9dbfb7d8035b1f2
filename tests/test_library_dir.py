"""One example library for every user of it: $SPADE_ENV_LIBRARY redirects the loader, the
library eval suite, `spade-memory pool` and the loop's first memory and fixed pool alike."""

from __future__ import annotations

from pathlib import Path

from spade_cli.envs.library import library_dir, load_library
from spade_cli.loop.config import load_config
from spade_cli.loop.layout import Round
from spade_cli.loop.recipe import round_stages
from spade_cli.loop.runner import run_in
from spade_cli.memory import load_memory

ENVS = Path(__file__).parent / "data" / "envs"


def _library(tmp_path: Path) -> Path:
    d = tmp_path / "lib"
    d.mkdir()
    for f in ("guess_number.py", "nim.py"):
        (d / f).write_text((ENVS / f).read_text())
    return d


def test_default_library_ships_inside_the_package():
    import spade_cli

    assert library_dir() == Path(spade_cli.__file__).resolve().parent / "envs" / "examples"
    assert len(load_library()) >= 10 and (library_dir() / "broken").is_dir()


def test_loop_uses_the_library_of_spade_env_library(tmp_path, monkeypatch):
    lib = _library(tmp_path)
    monkeypatch.setenv("SPADE_ENV_LIBRARY", str(lib))
    assert library_dir() == lib and {e["name"] for e in load_library()} == {
        "guess-number",
        "nim-single-heap",
    }
    cfg = load_config(
        None,
        {"runs_dir": str(tmp_path / "runs"), "baseline": {"mode": "fixed-pool", "pool": "library"}},
    )
    stages = {s.name: s for s in round_stages(cfg, 1)}
    assert stages["pool"].argv()[:3] == ["memory", "pool", str(lib)]
    run_in(Round(cfg, 1), stages["memory-init"])  # `spade-memory init`, in a child process
    memory = load_memory(str(stages["memory-init"].outputs[0]))
    assert sorted(e["name"] for e in memory) == ["guess-number", "nim-single-heap"]
