"""Errors that end a command with a one-line message and a documented exit code.

Exit codes (docs/concepts/conventions.md#exit-codes):
  0  success (also when a downstream reader such as `head` closes the pipe)
  1  internal error: a bug; the traceback is printed with -v or SPADE_DEBUG=1
  2  usage error: bad flags or option values
  3  bad input data: unreadable file, corrupt stream, bad JSON, wrong record kind
  4  missing resource: a required program, package, model or device is not there
  130 interrupted (Ctrl-C)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_DATA = 3
EXIT_RESOURCE = 4
EXIT_INTERRUPTED = 130


class SpadeError(Exception):
    """An expected failure, reported as `spade-<cmd>: error: <message>`."""

    exit_code = EXIT_INTERNAL


class UsageError(SpadeError):
    exit_code = EXIT_USAGE


class DataError(SpadeError):
    """Bad input data; carries the file and line it was found at."""

    exit_code = EXIT_DATA

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.path, self.line, self.problem = path, line, message
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


class ResourceError(SpadeError):
    exit_code = EXIT_RESOURCE


class PipeClosed(Exception):
    """The reader of our stdout went away (`| head`): stop quietly."""
