"""How the loop starts a stage's command: forked from the loop, or as a fresh interpreter.

A stage is `python -m spade_cli <command> ...`, the command a user would type. Started
fresh, every stage that loads a model imports torch, transformers, PEFT, TRL and datasets
again: about 5 s on two cores, most of a small round's wall time. Forked, the loop
imports them once and each stage is a child of that warm interpreter, whose imported
objects are frozen out of the stage's garbage collections. It is still a
process of its own (its exit code, its memory, its stdout sent to /dev/null, killed with
the loop) running the same `main` with the same argv, so it writes the same records.

A CUDA driver does not survive fork, so `auto` forks only where no GPU device is
visible; and a loop that runs threads of its own starts the stage fresh, since a fork
copies only the calling thread.
"""

from __future__ import annotations

import ctypes
import gc
import glob
import importlib
import os
import signal
import subprocess
import sys
import threading

from .. import timing
from ..commands import COMMANDS
from ..errors import UsageError
from ..logs import log

MODES = ("auto", "fork", "exec")

# Imported by the loop before its first fork: what the model stages import. Optional
# packages that are absent are skipped (the stage that needs one reports it).
WARM_MODULES = (
    "torch",
    "transformers",
    "peft",
    "trl",
    "datasets",
    "accelerate",
    "spade_cli.engines.hf",
    "spade_cli.train.trainer",
    *COMMANDS.values(),
)

_GPU_DEVICES = ("/dev/nvidia[0-9]*", "/dev/kfd")

_state: dict[str, object] = {"mode": "auto", "warm": False}


def use(mode: str) -> None:
    """Set how this process starts stages (spade-loop --stage-process)."""
    if mode not in MODES:
        raise UsageError(f"--stage-process must be one of {', '.join(MODES)}, not {mode!r}")
    _state["mode"] = mode


def forks() -> bool:
    """Whether stages are forked: mode fork, or auto on a machine without a GPU."""
    mode = _state["mode"]
    if mode == "exec" or not hasattr(os, "fork"):
        return False
    return mode == "fork" or not any(glob.glob(p) for p in _GPU_DEVICES)


def die_with_parent() -> None:
    # A stage must not outlive a killed loop: the kernel sends it SIGKILL when we die.
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def keep_single_threaded() -> None:
    """Called before the loop draws its progress bar: tqdm's monitor thread would make
    every later stage start fresh."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0


def _warm_up() -> None:
    """Import the stages' heavy modules once, before the first fork, and freeze them.

    The imports leave some 500,000 objects that every stage inherits. Frozen (moved to
    the collector's permanent generation), they are skipped by a stage's garbage
    collections; as imported, a stage's first full collection and every explicit
    `gc.collect()` (accelerate's, after training) walk them all again, 0.25 s a pass on
    two cores (`bench/bench_fork_heap.py`). They live as long as the loop anyway; what
    the imports left as garbage is collected first, not frozen."""
    if _state["warm"]:
        return
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            log.debug("stage process: %s is not installed; not preloaded", name)
    gc.collect()
    gc.freeze()
    _state["warm"] = True


def run_command(argv: list[str], quiet_stdout: bool = True) -> int:
    """Run `spade-<argv[0]> argv[1:]` as a child process; returns its exit code."""
    if forks() and threading.active_count() == 1:
        _warm_up()
        return _fork(argv, quiet_stdout)
    proc = subprocess.run(
        [sys.executable, "-m", "spade_cli", *argv],
        preexec_fn=die_with_parent,
        stdout=subprocess.DEVNULL if quiet_stdout else None,
    )
    return proc.returncode


def _fork(argv: list[str], quiet_stdout: bool) -> int:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else the child would write the loop's buffered output again
    loop = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent()
        if os.getppid() != loop:  # the loop died before the line above: go with it
            os._exit(137)
        os._exit(_child(argv, quiet_stdout))
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:  # interrupted: the stage goes with the loop, as subprocess.run does
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status)


def _child(argv: list[str], quiet_stdout: bool) -> int:
    code = 1
    try:
        if quiet_stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
            sys.stdout = open(1, "w", closefd=False)  # fd 1 even where sys.stdout was replaced
        timing.restart()
        sys.argv = [sys.argv[0], *argv]
        from .. import __main__ as spade_main

        spade_main.main()
        code = 0
    except SystemExit as e:
        if isinstance(e.code, int):
            code = e.code
        elif e.code is None:
            code = 0
        else:
            sys.stderr.write(f"{e.code}\n")
    except BaseException:  # noqa: BLE001 - a child must never return into the loop's code
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    return code
