"""Helpers the tests share: the checkout's root, running a command as a subprocess,
comparing two runs' records, and the requirements behind the `requires_module` and `requires_bwrap` markers (conftest.py
applies the markers; a test that needs a requirement's result imports it from here)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EVAL_INSTALL = "install the eval suites with: pip install --no-deps -r requirements-eval.txt"


def bench_module(name: str):
    """bench/NAME.py imported as a module (bench/ is scripts, not a package; its scripts
    import each other by name)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_cli(
    command: str,
    *args: str,
    input: bytes | None = None,
    timeout: float = 600,
    env: dict | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess:
    """Run `spade-<command> args...`; returns the CompletedProcess (stdout/stderr as bytes)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "spade_cli", command, *map(str, args)],
        input=input if input is not None else b"",
        capture_output=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
    )


def missing(msg: str) -> None:
    """Skip the test for a missing requirement, except under CI (`CI` set), where it
    fails: CI installs every requirement, so a missing one there is a bug."""
    if os.environ.get("CI"):
        pytest.fail(f"{msg} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(msg)


def require_module(name: str, install: str = EVAL_INSTALL):
    """Import `name` for a test that needs an optional package; `missing` when it does not
    import (or one of its own imports does not, as a --no-deps install can leave it)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(f"{name} is not importable ({e}); {install}")


@functools.cache
def bwrap_problem() -> str | None:
    """Why the bubblewrap sandbox cannot run here (spade_cli.sandbox.check_sandbox's
    message), or None when it can."""
    from spade_cli.sandbox import check_sandbox

    try:
        check_sandbox()
    except Exception as e:
        return str(e)
    return None


def bwrap_works() -> bool:
    return bwrap_problem() is None


def require_bwrap() -> None:
    """`missing` unless the bubblewrap sandbox runs here."""
    problem = bwrap_problem()
    if problem is not None:
        missing(f"needs the bubblewrap sandbox: {problem}")


def mismatch(a, b, where: str = "") -> str | None:
    """Where two runs' records first differ (`[3].turns[2].logprobs[5]: a != b`), or None.
    Floats agree to 1e-3: a sampling logprob can differ in its last bits between two
    processes on a CPU, as the kernels torch picks for a batch do, and no rounding hides
    a value that straddles a rounding boundary. Tokens and everything else must be equal."""
    if isinstance(a, float) and isinstance(b, float):
        return None if math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-3) else f"{where}: {a} != {b}"
    if type(a) is not type(b):
        return f"{where}: {a!r} != {b!r}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(a)} != {sorted(b)}"
        return next((m for k in a if (m := mismatch(a[k], b[k], f"{where}.{k}"))), None)
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        pairs = enumerate(zip(a, b, strict=True))
        return next((m for i, (x, y) in pairs if (m := mismatch(x, y, f"{where}[{i}]"))), None)
    return None if a == b else f"{where}: {a!r} != {b!r}"


def assert_same(a, b, what: str = "") -> None:
    """Two runs' records agree (see `mismatch`); the error names the first difference."""
    diff = mismatch(a, b)
    assert diff is None, f"{what}{diff}"
