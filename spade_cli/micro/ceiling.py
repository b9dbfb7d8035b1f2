"""The best solve rate any agent can reach in the micro world, per family and level.

Each family hides one fact (a side, a symbol, a rule) that only the hint or a spent turn
reveals. Where the turn budget leaves no turn to spend, even a perfect agent without the
hint guesses, so the held-out suite's solve rate has a ceiling below 1: the expert of
transcripts.py (the best play on what the agent sees), never erring, estimated over many
seeds. With the hint that expert wins every episode.

    ceilings(episodes=2000, seed=0) -> {"corridor/L1": 1.0, ..., "corridor": ..., "all": ...}

The keys are the held-out suite's categories (`family/Ln`), each family's mean over its
levels, and the mean over all of them: the same weights as `spade-eval --suite micro`,
which plays every family and level equally often. A held-out gain reads against it: the
agent can only learn what lies between its solve rate and this ceiling.
"""

from __future__ import annotations

import random
import statistics

from .site.spade_micro import FAMILIES, LEVELS
from .transcripts import play


def ceiling(family: str, level: int, episodes: int = 2000, seed: int = 0) -> float:
    """The solve rate of the flawless expert without the hint, over `episodes` seeds."""
    rng = random.Random(f"{seed}/{family}/{level}")
    wins = 0
    for _ in range(episodes):
        _, ret, _, _ = play(family, level, rng.randrange(1 << 30), False, 1.0, rng)
        wins += ret >= 1.0
    return wins / episodes


def ceilings(episodes: int = 2000, seed: int = 0) -> dict[str, float]:
    """Per category, per family and overall, rounded to three places."""
    out: dict[str, float] = {}
    for family in FAMILIES:
        rates = [ceiling(family, lv, episodes, seed) for lv in LEVELS]
        out.update({f"{family}/L{lv}": round(r, 3) for lv, r in zip(LEVELS, rates, strict=True)})
        out[family] = round(statistics.fmean(rates), 3)
    out["all"] = round(statistics.fmean(out[f] for f in FAMILIES), 3)
    return out
