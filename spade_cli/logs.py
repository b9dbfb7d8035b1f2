"""Logging and progress bars on stderr, shared by the commands and the library.

One logger, `spade`, prints `spade-<command>: message` (warnings and errors with their
level); `-v` / `-q` set its level. Progress bars are tqdm bars on stderr, shown only
when stderr is a terminal and not `--quiet`. Nothing here imports Typer.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

log = logging.getLogger("spade")
T = TypeVar("T")

_state = {"verbose": 0, "quiet": False, "prog": "spade"}


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING:
            msg = f"{record.levelname.lower()}: {msg}"
        return f"{_state['prog']}: {msg}"


def _apply_log_level() -> None:
    if _state["quiet"]:
        log.setLevel(logging.ERROR)
    elif _state["verbose"] >= 1:
        log.setLevel(logging.DEBUG)
    else:
        log.setLevel(logging.INFO)


def set_verbosity(verbose: int | None = None, quiet: bool | None = None) -> None:
    if verbose is not None:
        _state["verbose"] = verbose or 0
    if quiet is not None:
        _state["quiet"] = bool(quiet)
    _apply_log_level()


def prog() -> str:
    return str(_state["prog"])


def setup_logging(prog: str) -> None:
    _state["prog"] = prog
    if not any(getattr(h, "_spade", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Formatter())
        handler._spade = True  # type: ignore[attr-defined]
        log.addHandler(handler)
        log.propagate = False
    _apply_log_level()


def verbosity_args() -> list[str]:
    """The -q / -v flags of this command, for the commands it starts."""
    if _state["quiet"]:
        return ["-q"]
    return ["-v"] * int(_state["verbose"])


def debug_enabled() -> bool:
    return bool(_state["verbose"]) or os.environ.get("SPADE_DEBUG", "") not in ("", "0")


def quiet() -> bool:
    return bool(_state["quiet"])


def progress(
    it: Iterable[T], desc: str, total: int | None = None, unit: str = "rec"
) -> Iterable[T]:
    """A tqdm bar on stderr, only when stderr is a terminal and not --quiet."""
    if _state["quiet"] or not sys.stderr.isatty():
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False)


class _NoBar:
    """What progress_bar gives when no bar is shown: tqdm's calls, doing nothing (and
    tqdm not imported)."""

    total: float | None = None

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None


def progress_bar(desc: str, total: int | None = None, unit: str = "it") -> Any:
    disable = _state["quiet"] or not sys.stderr.isatty()
    if disable:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(desc=desc, total=total, unit=unit, disable=disable, file=sys.stderr, leave=False)
