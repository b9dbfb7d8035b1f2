"""A run directory that was moved or copied resumes where it now lies.

The loop's bookkeeping names files by absolute path: the checkpoint records spade-train
writes (the model of the next round), each round's `manifest.json` (the model it played)
and the run's `metrics.jsonl`; and a config may name a model beside the run. A run copied
off a cluster's scratch disk, or renamed, would otherwise look for its next model where
the run used to be: missing after a move, and after a copy the original run's, silently.
So the run's `config.json` records where the run lies (`location`), and a loop that finds
it elsewhere first rewrites those paths: every path under the run's old location, and
every path under the directory that moved with it (the names the two locations share at
their ends, as `scratch/exp/a` moved to `home/exp/a` moved `scratch` to `home`) whose
counterpart exists there.

The stages' own records (`*.jsonl.zst`) and the command lines in the manifests keep the
paths they were written with: they are provenance, never read back as inputs.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

import orjson

from ..errors import UsageError
from ..logs import log
from ..recordio import atomic_write_bytes

LOCATION = "location"
"""config.json's field: the resolved path of the run directory when it last ran."""


def previous_location(old_config: dict) -> str | None:
    """Where the run lay when config.json was written: its `location`, or for a run from
    before that field, its runs_dir and name where runs_dir was absolute (else unknown)."""
    if old_config.get(LOCATION):
        return str(old_config[LOCATION])
    runs_dir, name = old_config.get("runs_dir"), old_config.get("name")
    if runs_dir and name and Path(runs_dir).is_absolute():
        return str(Path(runs_dir, name))
    return None


def bookkeeping(run_dir: Path) -> list[Path]:
    """The loop's own files that name paths in the run."""
    files = [run_dir / "metrics.jsonl"]
    for rdir in sorted(run_dir.glob("round-[0-9][0-9][0-9]")):
        files += [rdir / "manifest.json", *sorted(rdir.glob("checkpoint*.jsonl"))]
    return [f for f in files if f.is_file()]


class Move:
    """The run's old and new location, and the directories that moved with it."""

    def __init__(self, old: str, new: str):
        self.run = (old, new)
        o, n = Path(old), Path(new)
        while o.name == n.name and len(o.parts) > 2 and len(n.parts) > 2:
            o, n = o.parent, n.parent
        self.tree = (str(o), str(n))

    def path(self, value: str) -> str:
        for (old, new), must_exist in ((self.run, False), (self.tree, True)):
            if value == old or value.startswith(old + "/"):
                moved = new + value[len(old) :]
                if not must_exist or Path(moved).exists():
                    return moved
        return value

    def rebased(self, value: Any) -> Any:
        """`value` (JSON) with every path that moved replaced by where it now lies."""
        if isinstance(value, str):
            return self.path(value)
        if isinstance(value, list):
            return [self.rebased(v) for v in value]
        if isinstance(value, dict):
            return {k: self.rebased(v) for k, v in value.items()}
        return value


def follow_move(run_dir: Path, move: Move) -> int:
    """Rewrite the run's bookkeeping to where it now lies; returns the files changed. Each
    file is replaced atomically and the rewrite is idempotent, so a loop killed halfway
    finishes it on its next start (config.json, which names the old location until then,
    is written last)."""
    changed = 0
    for path in bookkeeping(run_dir):
        data = path.read_bytes()
        if path.suffix == ".jsonl":
            lines = [orjson.loads(line) for line in data.splitlines() if line.strip()]
            out = b"".join(orjson.dumps(move.rebased(x)) + b"\n" for x in lines)
        else:
            out = orjson.dumps(move.rebased(orjson.loads(data)), option=orjson.OPT_INDENT_2)
        if out != data:
            atomic_write_bytes(str(path), out)
            changed += 1
    old, new = move.run
    log.info("%s: the run was at %s; %d of its records rewritten", new, old, changed)
    return changed


def settle(run_dir: Path) -> dict | None:
    """The run's config.json (None before its first start); if the run lies elsewhere than
    it says, first its records and its own paths are rewritten to where the run now lies.
    The rewrite runs under a lock (the stage jobs of a scheduler may start together); a
    run that has not moved is only read, so a read-only one can still be inspected."""
    path = run_dir / "config.json"
    if not path.exists():
        return None
    here = str(run_dir.resolve())
    config = orjson.loads(path.read_bytes())
    if previous_location(config) == here:
        return config
    try:
        lock = open(run_dir / ".relocate.lock", "w")
    except OSError as e:
        raise UsageError(
            f"{run_dir}: the run was at {previous_location(config)} and its records cannot "
            f"be rewritten to name where it lies now ({e.strerror})"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        config = orjson.loads(path.read_bytes())  # another job may have settled it
        before = previous_location(config)
        if before == here:
            return config
        if before is not None:
            move = Move(before, here)
            follow_move(run_dir, move)
            config = move.rebased(config)
        config[LOCATION] = here
        atomic_write_bytes(str(path), orjson.dumps(config, option=orjson.OPT_INDENT_2))
        return config
