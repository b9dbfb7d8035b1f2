"""The wheel is a working toolchain: built from the sources, installed (not editable) into a
fresh virtualenv, its commands run from outside the checkout, with the example library and
the prompts found in the installed package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from .helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.requires_bwrap]  # the library suite runs in it


def _run(argv: list, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, f"{argv}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def test_wheel_installs_a_working_toolchain(tmp_path):
    # Build from a copy of what the wheel is made of, so no stale build/ of the checkout
    # can slip files into it (nor the build write into the checkout).
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "spade_cli", src / "spade_cli", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPADE_ENV_LIBRARY")}
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            tmp_path / "dist",
            src,
        ],
        tmp_path,
        env,
    )
    (wheel,) = (tmp_path / "dist").glob("spade_cli-*.whl")

    # The heavy dependencies come from the environment running this test (a .pth file
    # adds its site-packages, whether that is a virtualenv, as in CI, or the system's);
    # spade-cli itself only from the wheel, whatever copy that environment holds.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path, env)
    py, bin_ = venv / "bin" / "python", venv / "bin"
    site = _run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env
    )
    host = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site.stdout.strip()) / "_host_packages.pth").write_text("".join(f"{p}\n" for p in host))
    _run(
        [py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall", wheel],
        tmp_path,
        env,
    )
    env["PATH"] = f"{bin_}{os.pathsep}{env.get('PATH', '')}"
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    where = _run(
        [py, "-c", "import spade_cli; print(spade_cli.__file__)"], outside, env
    ).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where
    from spade_cli.envs.library import library_dir

    def files(root: Path) -> list[str]:
        return sorted(
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )

    assert files(Path(where).parent / "envs" / "examples") == files(library_dir())

    # Every example environment passes its oracle in the sandbox, found without the checkout.
    r = _run([bin_ / "spade-eval", "--suite", "library", "--oracle", "-n", "0"], outside, env)
    recs = [line for line in r.stdout.splitlines() if line.strip()]
    assert len(recs) >= 10, r.stdout[-2000:]
    # The prompts ship too, beside the code that reads them.
    prompts = Path(where).parent / "prompts"
    assert {p.name for p in prompts.iterdir()} >= {"design.md", "contract.md", "agent.toml"}
