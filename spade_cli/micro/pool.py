"""The micro library's designs: one per family and level (spade_cli/micro/library/)."""

from __future__ import annotations

from pathlib import Path

from . import LIBRARY
from .site.spade_micro import FAMILIES, LEVELS

__all__ = ["FAMILIES", "LEVELS", "env_name", "library_source", "write_library"]


def env_name(family: str, level: int) -> str:
    return f"{family}_l{level}"


def library_source(family: str, level: int) -> str:
    """The library file of one family and level: a complete design with its summary."""
    from .transcripts import SUMMARIES, design_code

    name = family.capitalize() + f"Level{level}"
    return (
        f'"""{SUMMARIES[family][:-1]}, level {level} of 6.\n\nFamily: {FAMILIES[family].skill}\n"""\n\n'
        + design_code(family, name, level)
    )


def write_library(root: Path = LIBRARY) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for family in FAMILIES:
        for level in LEVELS:
            p = root / f"{env_name(family, level)}.py"
            p.write_text(library_source(family, level))
            out.append(p)
    return out
