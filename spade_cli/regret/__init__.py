"""spade-regret's library: regret estimators and designer rewards (estimators.py), the
scores of candidate records and the de-duplicating `Scorer` (scoring.py), and a batch's
summary (summary.py). This package re-exports their names (`regret.valid_score`, ...).
The memory a round leaves behind is `memory.merge_into_memory`.
"""

from .estimators import (
    CLIPPED,
    DEFAULT_CLIP,
    DEFAULT_ESTIMATOR,
    DEFAULT_INVALID_PENALTY,
    clip,
    components,
    condition_stats,
    estimates,
    learnability,
    learning_potential,
    lp_update,
    max_gap,
    mean_gap,
    plateau,
    shaped_reward,
    variance_reward,
)
from .scoring import (
    ROLLOUT_REFUSALS,
    ScoreConfig,
    Scorer,
    invalid_score,
    is_valid,
    lp_plays,
    no_reward,
    refused_in_window,
    skill_of,
    update_lp_state,
    valid_score,
    window_score,
)
from .summary import (
    quantiles,
    summarize,
    summary_lines,
)

__all__ = [
    "CLIPPED",
    "DEFAULT_ESTIMATOR",
    "DEFAULT_CLIP",
    "DEFAULT_INVALID_PENALTY",
    "condition_stats",
    "mean_gap",
    "max_gap",
    "learnability",
    "estimates",
    "plateau",
    "lp_update",
    "learning_potential",
    "variance_reward",
    "components",
    "shaped_reward",
    "clip",
    "ScoreConfig",
    "no_reward",
    "ROLLOUT_REFUSALS",
    "is_valid",
    "invalid_score",
    "valid_score",
    "Scorer",
    "skill_of",
    "lp_plays",
    "update_lp_state",
    "refused_in_window",
    "window_score",
    "quantiles",
    "summarize",
    "summary_lines",
]
