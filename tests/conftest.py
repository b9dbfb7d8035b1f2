"""Shared fixtures. Commands run as subprocesses of `python -m spade_cli` with this
checkout first on PYTHONPATH, so tests exercise the tree they live in."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)
os.environ.pop("SPADE_DEBUG", None)


def run_cli(command: str, *args: str, input: bytes | None = None, timeout: float = 600,
            env: dict | None = None, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
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


@pytest.fixture
def cli():
    return run_cli


EVAL_INSTALL = "install the eval suites with: pip install --no-deps -r requirements-eval.txt"


def require_module(name: str, install: str = EVAL_INSTALL):
    """Import `name` for a test that needs an optional package. Missing (or missing one of
    its own imports, as a --no-deps install can be), the test is skipped, except under CI
    (`CI` set), where it fails: CI installs every listed package, so a missing one is a bug."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        msg = f"{name} is not importable ({e}); {install}"
        if os.environ.get("CI"):
            pytest.fail(f"{msg} (CI is set, so this fails instead of skipping)", pytrace=False)
        pytest.skip(msg)


def pytest_runtest_setup(item):
    """`@pytest.mark.requires_module("a", "b")`: require_module() for each, before the test."""
    for mark in item.iter_markers("requires_module"):
        for name in mark.args:
            require_module(name)


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        # The marker, not `"gpu" in item.keywords`: keywords also hold the names of the
        # directories above the test, so a checkout in a directory named gpu matched.
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """Path of the tiny offline model (spade_cli.tinymodel), built once per test session."""
    from spade_cli.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(params=["forked", "own-bwrap"])
def worker_start(request, monkeypatch) -> str:
    """Run a sandbox test once per way a worker starts: forked from the fork server
    (where it applies) and with a bwrap and Python of its own."""
    from spade_cli.sandbox import ForkServer, SandboxConfig

    if request.param == "own-bwrap":
        monkeypatch.setenv("SPADE_SANDBOX_FORK", "0")
    elif not ForkServer.usable(SandboxConfig()):
        pytest.skip("the fork server needs root")
    else:
        monkeypatch.delenv("SPADE_SANDBOX_FORK", raising=False)
    return request.param


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model):
    """The tiny model's tokenizer (ChatML with Qwen-style tools), for token-level doubles."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model))
