"""Regret estimators and the designer's reward shapes: pure maths over episode stats.

For one valid environment the rollout stage ran K episodes without the hint (returns
R_nohint, successes S_nohint) and K with it (R_hint). Estimators (docs/commands/spade-regret.md):

  mean-gap      mean(R_hint) - mean(R_nohint)                      in [-1, 1]
  max-gap       max(R_hint) - mean(R_nohint)                       in [-1, 1]
                PAIRED's estimate: the best hinted episode stands in for the
                antagonist, the average no-hint episode for the protagonist.
  learnability  p * (1 - p),  p = mean(S_nohint)                   in [0, 0.25]
                highest when the agent solves it half the time (no hint needed).

The published recipe's designer rewards (docs/concepts/fidelity.md),
with regret = mean-gap and win rate w = mean(R_nohint):

  blend               a * plateau(w) + b * clip(regret / scale, 0, 1)   (default;
                      a 0.6, b 0.4, scale 0.15)
  regret              max(0, regret)
  solve-rate          plateau(w)
  learning-potential  |w - mu_slow(skill)|: one tracker per skill, updated at the end of
                      each window with the skill's mean no-hint return r over the window
                      before the window's rewards are computed; the first update sets
                      mu_fast = mu_slow = r, later ones mu <- (1 - g) mu + g r (g_fast
                      0.98, g_slow 0.85: g weights the new value). The gap
                      |mu_fast - mu_slow| / (2 (g_fast - g_slow)) is only logged.
  regret-var          max(0, regret) + exp(-(v - 0.25)^2 / (2 * 0.01)), v = variance of
                      the no-hint returns: most for an agent that wins half its plays

  plateau(w) = 1 on [lo, hi], falling linearly to 0 over `ramp` on either side
  (lo 0.4, hi 0.6, ramp 0.25): an environment the agent wins about half the time.

These five are rewards already: --clip applies to the raw estimators only.

Designer reward: the estimate clipped to [lo, hi] (default [0, 1]) for a valid, accepted
environment. The lower clip matters: a negative gap means the hint *hurt* (a misleading
hint, or noise on a hard environment); without the clip the designer would be pushed
away from such environments harder than from one that is trivially easy, which says
nothing useful about either. Invalid designs and duplicates are handled by `invalid`:
`drop` (default, as published) gives them no reward (`reward` null, `sample` false), so
the designer is never trained on them; `penalty` gives invalid designs `invalid_penalty`
(default -1.0), below every valid reward so that writing a working environment always
pays, and duplicates of memory or of the batch `duplicate_penalty` (default: the invalid
penalty), since the memory exists to stop the designer from resubmitting what it has.
"""

from __future__ import annotations

import math

from ..stage_settings import RewardShape

CLIPPED = ("mean-gap", "max-gap", "learnability")
DEFAULT_ESTIMATOR = "blend"
DEFAULT_CLIP = (0.0, 1.0)
DEFAULT_INVALID_PENALTY = -1.0


def _success(ep: dict) -> bool:
    s = ep.get("success")
    if isinstance(s, bool):
        return s
    return float(ep.get("return") or 0.0) >= 1.0


def _return(ep: dict) -> float:
    r = ep.get("return")
    return float(r) if isinstance(r, (int, float)) else 0.0


def condition_stats(episodes: list[dict]) -> dict:
    """n, mean/max/min return, success rate (solved: return 1) and won rate (return above
    0, as the release's memory counts a win) of one condition's episodes."""
    if not episodes:
        return {
            "n": 0,
            "mean_return": None,
            "max_return": None,
            "min_return": None,
            "var_return": None,
            "success_rate": None,
            "won_rate": None,
        }
    rets = [_return(e) for e in episodes]
    mean = sum(rets) / len(rets)
    return {
        "n": len(rets),
        "mean_return": mean,
        "var_return": _round(sum((r - mean) ** 2 for r in rets) / len(rets)),  # population
        "max_return": max(rets),
        "min_return": min(rets),
        "success_rate": sum(_success(e) for e in episodes) / len(episodes),
        # the release's memory counts a play as won when its return is above 0
        "won_rate": sum(r > 0 for r in rets) / len(rets),
    }


def mean_gap(nohint: dict, hint: dict) -> float:
    return hint["mean_return"] - nohint["mean_return"]


def max_gap(nohint: dict, hint: dict) -> float:
    return hint["max_return"] - nohint["mean_return"]


def learnability(nohint: dict, hint: dict | None = None) -> float:
    p = nohint["success_rate"]
    return p * (1.0 - p)


_FUNCS = {"mean-gap": mean_gap, "max-gap": max_gap, "learnability": learnability}


def estimates(nohint: dict, hint: dict) -> dict[str, float | None]:
    """Every estimator on the two conditions' stats; None where a condition is empty."""
    out: dict[str, float | None] = {}
    for name, fn in _FUNCS.items():
        needs_hint = name != "learnability"
        if nohint["n"] == 0 or (needs_hint and hint["n"] == 0):
            out[name] = None
        else:
            out[name] = _round(fn(nohint, hint))
    return out


def plateau(w: float, lo: float = 0.4, hi: float = 0.6, ramp: float = 0.25) -> float:
    """1 on [lo, hi], linearly down to 0 over `ramp` outside it."""
    if w < lo:
        return max(0.0, 1.0 - (lo - w) / ramp)
    if w > hi:
        return max(0.0, 1.0 - (w - hi) / ramp)
    return 1.0


def lp_update(tracker: dict | None, r: float, shape: RewardShape) -> dict:
    """A skill's learning-potential tracker {"fast", "slow", "n"} after one window whose
    mean no-hint return is `r` (the release's LearningPotential.update)."""
    if tracker is None:
        return {"fast": r, "slow": r, "n": 1}
    return {
        "fast": (1 - shape.gamma_fast) * tracker["fast"] + shape.gamma_fast * r,
        "slow": (1 - shape.gamma_slow) * tracker["slow"] + shape.gamma_slow * r,
        "n": int(tracker["n"]) + 1,
    }


def learning_potential(tracker: dict, shape: RewardShape) -> float:
    """The logged gap |mu_fast - mu_slow| / (2 (g_fast - g_slow))."""
    return abs(tracker["fast"] - tracker["slow"]) / (2 * (shape.gamma_fast - shape.gamma_slow))


def lp_components(comp: dict, tracker: dict | None, shape: RewardShape) -> dict:
    """`comp` with the skill tracker's slow and fast means and its gap."""
    if tracker is None:
        return comp
    return {
        **comp,
        "lp_fast": _round(tracker["fast"]),
        "lp_slow": _round(tracker["slow"]),
        "lp_gap": _round(learning_potential(tracker, shape)),
    }


def variance_reward(var: float, shape: RewardShape) -> float:
    """regret-var's bonus: a bell over the variance of the no-hint returns."""
    return math.exp(-((var - shape.variance_target) ** 2) / (2 * shape.variance_width))


def components(nohint: dict, hint: dict, shape: RewardShape) -> dict[str, float | None]:
    """regret, win rate, plateau, scaled regret and variance reward: the parts of the
    published rewards."""
    w = nohint["mean_return"] if nohint["n"] else None
    gap = hint["mean_return"] - w if (w is not None and hint["n"]) else None
    var = nohint.get("var_return") if nohint["n"] else None
    out: dict[str, float | None] = {
        "regret": gap,
        "win_rate": w,
        "plateau": None
        if w is None
        else plateau(w, shape.plateau_lo, shape.plateau_hi, shape.plateau_ramp),
        "scaled_regret": None if gap is None else min(1.0, max(0.0, gap / shape.regret_scale)),
        "variance_reward": None if var is None else variance_reward(var, shape),
    }
    return {k: None if v is None else _round(v) for k, v in out.items()}


def shaped_reward(estimator: str, comp: dict, shape: RewardShape) -> float | None:
    """The reward of one of the published variants from its components (None: unmeasured)."""
    if estimator == "blend":
        if comp["plateau"] is None or comp["scaled_regret"] is None:
            return None
        return _round(
            shape.solve_weight * comp["plateau"] + shape.regret_weight * comp["scaled_regret"]
        )
    if estimator == "regret":
        return None if comp["regret"] is None else max(0.0, comp["regret"])
    if estimator == "solve-rate":
        return comp["plateau"]
    if estimator == "learning-potential":
        if comp["win_rate"] is None or comp.get("lp_slow") is None:
            return None
        return _round(abs(comp["win_rate"] - comp["lp_slow"]))
    if estimator == "regret-var":
        if comp["regret"] is None or comp["variance_reward"] is None:
            return None
        return _round(max(0.0, comp["regret"]) + comp["variance_reward"])
    raise ValueError(f"unknown estimator {estimator!r}")


def clip(value: float, bounds: tuple[float, float] | None) -> float:
    if bounds is None:
        return value
    lo, hi = bounds
    return min(hi, max(lo, value))


def _round(x: float) -> float:
    # float noise such as 0.30000000000000004 makes jq output and tests noisy
    return round(x, 12)
