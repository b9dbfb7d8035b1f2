"""What the sandbox tells the user on stderr, once per process."""

from __future__ import annotations

import sys

_warned = False
_warned_once: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned_once:
        _warned_once.add(message)
        sys.stderr.write(message + "\n")


def warn_unsafe() -> None:
    """The loud warning printed once per process when designer code runs unconfined."""
    global _warned
    if _warned:
        return
    _warned = True
    bar = "!" * 78
    sys.stderr.write(
        f"{bar}\n!! WARNING: --unsafe-no-sandbox: designer code runs WITHOUT bubblewrap, as your\n"
        f"!! user, with your files and your network. Only resource limits apply. Use only\n"
        f"!! for code you trust, or in a throwaway VM/container.\n{bar}\n"
    )
    sys.stderr.flush()
