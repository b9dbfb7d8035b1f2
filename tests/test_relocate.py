"""A moved run directory: which paths follow it (spade_cli/loop/relocate.py)."""

from __future__ import annotations

import orjson
import pytest

from spade_cli.errors import UsageError
from spade_cli.loop.config import load_config
from spade_cli.loop.layout import model_of
from spade_cli.loop.relocate import LOCATION, Move, settle
from spade_cli.loop.runner import Loop


def test_paths_under_the_run_follow_it_and_beside_it_only_where_they_exist(tmp_path):
    (tmp_path / "home" / "exp" / "model").mkdir(parents=True)
    move = Move(str(tmp_path / "scratch/exp/a"), str(tmp_path / "home/exp/a"))
    assert move.tree == (str(tmp_path / "scratch"), str(tmp_path / "home"))
    # under the run: always (a checkpoint not written yet included)
    assert move.path(str(tmp_path / "scratch/exp/a/round-001/ckpt")) == str(
        tmp_path / "home/exp/a/round-001/ckpt"
    )
    # beside it in the tree that moved: where its counterpart exists
    assert move.path(str(tmp_path / "scratch/exp/model")) == str(tmp_path / "home/exp/model")
    assert move.path(str(tmp_path / "scratch/exp/gone")) == str(tmp_path / "scratch/exp/gone")
    # a name that merely starts like the run is not under it
    assert move.path(str(tmp_path / "scratch/exp/ab")) == str(tmp_path / "scratch/exp/ab")
    assert move.rebased({"x": [str(tmp_path / "scratch/exp/a")], "n": 3}) == {
        "x": [str(tmp_path / "home/exp/a")],
        "n": 3,
    }


def test_a_renamed_run_moves_only_itself():
    move = Move("/data/runs/a", "/data/runs/b")
    assert move.tree == move.run
    assert move.path("/data/runs/model") == "/data/runs/model"


def fake_run(runs, model):
    """A run directory whose round 1 trained: config.json, a checkpoint record, a manifest."""
    cfg = load_config(None, {"name": "t", "runs_dir": str(runs), "model": {"path": str(model)}})
    Loop(cfg).check_config()
    r1 = cfg.run_dir / "round-001"
    (r1 / "checkpoint").mkdir(parents=True)
    ckpt = {"kind": "checkpoint", "path": str(r1 / "checkpoint"), "base_model": str(model)}
    (r1 / "checkpoint.jsonl").write_bytes(orjson.dumps(ckpt) + b"\n")
    manifest = {"round": 1, "model": str(model), "stages": {}}
    (r1 / "manifest.json").write_bytes(orjson.dumps(manifest))
    return cfg


def test_a_moved_run_and_the_model_beside_it_resume_where_they_lie(tmp_path):
    (tmp_path / "old" / "exp" / "model").mkdir(parents=True)
    fake_run(tmp_path / "old" / "exp" / "runs", tmp_path / "old" / "exp" / "model")
    (tmp_path / "old").rename(tmp_path / "new")
    runs, model = tmp_path / "new" / "exp" / "runs", tmp_path / "new" / "exp" / "model"
    cfg = load_config(None, {"name": "t", "runs_dir": str(runs), "model": {"path": str(model)}})
    Loop(cfg).check_config()  # the same config where the run now lies: no error
    assert model_of(cfg, 2) == str(runs / "t" / "round-001" / "checkpoint")
    manifest = orjson.loads((runs / "t" / "round-001" / "manifest.json").read_bytes())
    assert manifest["model"] == str(model)
    config = orjson.loads((runs / "t" / "config.json").read_bytes())
    assert config[LOCATION] == str(runs / "t")
    assert settle(runs / "t") == config  # settled: nothing more to rewrite
    other = load_config(None, {"name": "t", "runs_dir": str(runs), "seed": 1})
    with pytest.raises(UsageError, match="different config"):
        Loop(other).check_config()  # where it lies aside, another seed is another run


def test_a_run_from_before_the_location_field_follows_its_absolute_runs_dir(tmp_path):
    cfg = fake_run(tmp_path / "a", tmp_path / "model")
    config = orjson.loads((cfg.run_dir / "config.json").read_bytes())
    del config[LOCATION]
    (cfg.run_dir / "config.json").write_bytes(orjson.dumps(config))
    (tmp_path / "a").rename(tmp_path / "b")
    moved = load_config(
        None,
        {"name": "t", "runs_dir": str(tmp_path / "b"), "model": {"path": str(tmp_path / "model")}},
    )
    Loop(moved).check_config()
    assert model_of(moved, 2) == str(tmp_path / "b" / "t" / "round-001" / "checkpoint")


def test_the_commands_printed_for_a_moved_run_name_where_it_lies(tmp_path):
    import subprocess
    import sys

    (tmp_path / "old" / "model").mkdir(parents=True)
    fake_run(tmp_path / "old" / "runs", tmp_path / "old" / "model")
    (tmp_path / "old").rename(tmp_path / "new")
    config = tmp_path / "t.toml"
    config.write_text(f'name = "t"\n[model]\npath = "{tmp_path / "new" / "model"}"\n')
    args = ["--runs-dir", str(tmp_path / "new" / "runs"), "--round", "2", "--print-commands"]
    r = subprocess.run(
        [sys.executable, "-m", "spade_cli", "loop", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert f"--model {tmp_path / 'new' / 'runs' / 't' / 'round-001' / 'checkpoint'} " in r.stdout
    assert str(tmp_path / "old") not in r.stdout


def test_a_run_that_has_not_moved_is_only_read(tmp_path):
    """Nothing written, not even the lock: a read-only run can be inspected."""
    cfg = fake_run(tmp_path / "runs", tmp_path / "model")
    before = {p: p.read_bytes() for p in cfg.run_dir.rglob("*") if p.is_file()}
    assert settle(cfg.run_dir)[LOCATION] == str(cfg.run_dir.resolve())
    assert {p: p.read_bytes() for p in cfg.run_dir.rglob("*") if p.is_file()} == before
