"""Shared fixtures and the markers' hooks (the helpers themselves are in helpers.py).
Commands run as subprocesses of `python -m spade_cli` with this checkout first on
PYTHONPATH, so tests exercise the tree they live in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .helpers import ROOT, require_bwrap, require_module, run_cli

os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)
os.environ.pop("SPADE_DEBUG", None)


@pytest.fixture
def cli():
    return run_cli


def pytest_runtest_setup(item):
    """`@pytest.mark.requires_module("a", "b")`: require_module() for each, before the test;
    `@pytest.mark.requires_bwrap`: require_bwrap(). Both skip, or fail under CI."""
    for mark in item.iter_markers("requires_module"):
        for name in mark.args:
            require_module(name)
    if item.get_closest_marker("requires_bwrap") is not None:
        require_bwrap()


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
