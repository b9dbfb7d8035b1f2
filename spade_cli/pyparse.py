"""`ast.parse` (and compiling a parsed tree) for code read on the host, one call at a time.

CPython 3.11 keeps the AST recursion depth in interpreter-wide state, not per thread, so
two threads parsing at once (validation checks candidates in a thread pool) can fail
with "SystemError: AST constructor recursion depth mismatch" (python/cpython gh-106905):
a verdict, or the whole batch, decided by a race. Parsing takes microseconds; a lock
costs nothing that matters.
"""

from __future__ import annotations

import ast
import threading

# Held by every host-side parse, including code that must parse with plain `ast` (the
# sandbox's published.py, which the host also calls: envs/contracts.py).
LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    with LOCK:
        return ast.parse(source)


def compile_checked(source: str, filename: str) -> None:
    """Parse and compile `source` (raises SyntaxError and the like, as compile does)."""
    with LOCK:
        compile(ast.parse(source), filename, "exec", dont_inherit=True)
