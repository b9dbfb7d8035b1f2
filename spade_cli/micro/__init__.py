"""The micro world: SPADE's whole loop, unchanged, at a size that learns on a laptop CPU.

    site/spade_micro.py  the environment families (CorridorEnv, CodeEnv, SwitchEnv), six
                         levels each; the jail exposes the module as `spade_micro`
    transcripts.py       synthetic transcripts in the real design and agent prompt formats
    model.py             the micro model (spade-init-model --kind micro): pretrained on them
    pool.py, library/    one environment per family and level: the first memory of a micro
                         run and the fixed pool of the fixed-pool baseline

A design is a subclass choosing a family and a `level` (prompts/design_micro.md); the
held-out suite (`spade-eval --suite micro`, evals/micro.py) plays every family and level
on seeds no round trains on. `examples/micro.toml` is the published recipe at this size
and `bench/micro_experiment.py` compares SPADE with its baselines.
"""

from __future__ import annotations

from pathlib import Path

# A plain path: the loop's recipe names it without importing gymnasium (the families do).
LIBRARY = Path(__file__).resolve().with_name("library")


def skill_families() -> dict[str, str]:
    """Skill name -> the class name of its family (spade-validate --skill micro)."""
    from .site.spade_micro import SKILLS

    return {skill: cls.__name__ for skill, cls in SKILLS.items()}
