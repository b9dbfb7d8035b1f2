"""Designer environments: code extraction, the example library, validation, the gym wrapper.

- `extract_code(text)`: the one ```python block of a designer answer, or None.
- `library.load_library()`: the hand-written example environments (`library_dir()`).
- `checks`: the validation checks, each a small `check_*` function with a reason code.
- `validation.validate_records()`: the spade-validate stage (records in, records out).
- `gym_wrapper.SandboxedEnv`: a validated environment as a `gymnasium.Env`.
"""

from __future__ import annotations

import ast
import re

from .. import pyparse

# An opening fence with a python language tag; the block runs to the next fence line.
_BLOCK = re.compile(
    r"^[ \t]*```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)^[ \t]*```[ \t]*$",
    re.DOTALL | re.MULTILINE | re.IGNORECASE,
)


def extract_code(text: str | None) -> str | None:
    """The code of the single ```python block in `text`; None when there is no such block
    or more than one (the contract asks for exactly one complete module)."""
    if not text:
        return None
    blocks = _BLOCK.findall(text)
    if len(blocks) != 1:
        return None
    code = blocks[0].strip("\n")
    return code + "\n" if code.strip() else None


def module_summary(code: str) -> str:
    """The first line of the module docstring (or of the first class docstring): the
    one-line summary shown in the environment memory (at most 160 characters)."""
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return ""
    doc = ast.get_docstring(tree)
    if not doc:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and ast.get_docstring(node):
                doc = ast.get_docstring(node)
                break
    line = (doc or "").strip().splitlines()[0].strip() if (doc or "").strip() else ""
    # A docstring may spell a lone surrogate ("\\ud800"), which no UTF-8 writer accepts.
    line = line.encode("utf-8", "replace").decode()
    return line if len(line) <= 160 else line[:159] + "…"


__all__ = ["extract_code", "module_summary"]
