"""The micro world: SPADE's whole loop, unchanged, at a size that learns on a laptop CPU.

    site/spade_micro.py  the environment families (CorridorEnv, CodeEnv, SwitchEnv), six
                         levels each; the jail exposes the module as `spade_micro`
    transcripts.py       synthetic transcripts in the real design and agent prompt formats
    model.py             the micro model (spade-init-model --kind micro): pretrained on them
    library/             one environment per family and level: the first memory of a micro
                         run and the fixed pool of the fixed-pool baseline

A design is a subclass choosing a family and a `level` (prompts/design_micro.md); the
held-out suite (`spade-eval --suite micro`, evals/micro.py) plays every family and level
on seeds no round trains on. `examples/micro.toml` is the published recipe at this size
and `bench/micro_experiment.py` compares SPADE with its baselines.
"""

from __future__ import annotations

from pathlib import Path

from .site.spade_micro import FAMILIES, LEVELS

LIBRARY = Path(__file__).resolve().with_name("library")


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
