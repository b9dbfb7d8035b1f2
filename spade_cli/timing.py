"""Where a command's time goes: model generation, training, model loading, the rest.

With SPADE_TIMINGS=FILE set, every command appends one JSON line to FILE when it ends:
{"command", "wall", "phases": {"generate": s, "train": s, "load": s}}. The rest of the
wall time is the toolchain's own work (process start, record I/O, sandbox, orchestration).
`bench/bench_loop.py` adds these up over a round. Nested phases count once, in the
outermost one.
"""

from __future__ import annotations

import functools
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

_START = time.perf_counter()
_phases: dict[str, float] = defaultdict(float)
_depth = 0


@contextmanager
def phase(name: str) -> Iterator[None]:
    global _depth
    if _depth:
        yield
        return
    _depth += 1
    t = time.perf_counter()
    try:
        yield
    finally:
        _phases[name] += time.perf_counter() - t
        _depth -= 1


def restart() -> None:
    """Start the clock again: a stage forked from a warm spade-loop is a new command."""
    global _START, _depth
    _START = time.perf_counter()
    _phases.clear()
    _depth = 0


def timed(obj: Any, name: str, *methods: str) -> Any:
    """Count calls of obj's methods as phase `name`; returns obj."""
    for m in methods:
        fn = getattr(obj, m, None)
        if fn is None:
            continue

        def wrapper(*args: Any, _fn: Any = fn, **kwargs: Any) -> Any:
            with phase(name):
                return _fn(*args, **kwargs)

        setattr(obj, m, functools.wraps(fn)(wrapper))
    return obj


def report(command: str) -> None:
    path = os.environ.get("SPADE_TIMINGS")
    if not path:
        return
    line = {
        "command": command,
        "wall": round(time.perf_counter() - _START, 4),
        "phases": {k: round(v, 4) for k, v in _phases.items()},
    }
    with open(path, "ab") as fh:  # one short append per process: atomic enough for O_APPEND
        fh.write(orjson.dumps(line) + b"\n")
