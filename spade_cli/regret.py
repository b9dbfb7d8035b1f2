"""Regret estimators and the designer's reward: pure functions over candidate records.

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
  learning-potential  |mu_fast - mu_slow| / (2 (g_fast - g_slow)), mu = EMAs of w over
                      the rounds an environment is played (g_fast 0.98, g_slow 0.85;
                      both start at 0, so a first measurement gives w / 2)
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

import logging
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import memory
from .dedup import THRESHOLD, code_hash
from .options import RewardShape

CLIPPED = ("mean-gap", "max-gap", "learnability")
DEFAULT_ESTIMATOR = "blend"
DEFAULT_CLIP = (0.0, 1.0)
DEFAULT_INVALID_PENALTY = -1.0

log = logging.getLogger("spade")


# --------------------------------------------------------------------------- estimators


def _success(ep: dict) -> bool:
    s = ep.get("success")
    if isinstance(s, bool):
        return s
    return float(ep.get("return") or 0.0) >= 1.0


def _return(ep: dict) -> float:
    r = ep.get("return")
    return float(r) if isinstance(r, (int, float)) else 0.0


def condition_stats(episodes: list[dict]) -> dict:
    """n, mean/max/min return and success rate of one condition's episodes."""
    if not episodes:
        return {"n": 0, "mean_return": None, "max_return": None, "min_return": None,
                "var_return": None, "success_rate": None}
    rets = [_return(e) for e in episodes]
    mean = sum(rets) / len(rets)
    return {
        "n": len(rets),
        "mean_return": mean,
        "var_return": _round(sum((r - mean) ** 2 for r in rets) / len(rets)),  # population
        "max_return": max(rets),
        "min_return": min(rets),
        "success_rate": sum(_success(e) for e in episodes) / len(episodes),
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


def ema_step(state: dict | None, w: float, shape: RewardShape) -> dict:
    """One round of the learning-potential EMAs; state {"fast", "slow", "n"} (fresh: 0)."""
    state = state or {"fast": 0.0, "slow": 0.0, "n": 0}
    return {"fast": shape.gamma_fast * state["fast"] + (1 - shape.gamma_fast) * w,
            "slow": shape.gamma_slow * state["slow"] + (1 - shape.gamma_slow) * w,
            "n": int(state["n"]) + 1}


def learning_potential(state: dict, shape: RewardShape) -> float:
    return abs(state["fast"] - state["slow"]) / (2 * (shape.gamma_fast - shape.gamma_slow))


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
        "plateau": None if w is None else plateau(w, shape.plateau_lo, shape.plateau_hi, shape.plateau_ramp),
        "scaled_regret": None if gap is None else min(1.0, max(0.0, gap / shape.regret_scale)),
        "variance_reward": None if var is None else variance_reward(var, shape),
    }
    return {k: None if v is None else _round(v) for k, v in out.items()}


def shaped_reward(estimator: str, comp: dict, shape: RewardShape, lp_state: dict | None = None) -> float | None:
    """The reward of one of the published variants from its components (None: unmeasured)."""
    if estimator == "blend":
        if comp["plateau"] is None or comp["scaled_regret"] is None:
            return None
        return _round(shape.solve_weight * comp["plateau"] + shape.regret_weight * comp["scaled_regret"])
    if estimator == "regret":
        return None if comp["regret"] is None else max(0.0, comp["regret"])
    if estimator == "solve-rate":
        return comp["plateau"]
    if estimator == "learning-potential":
        return None if lp_state is None else _round(learning_potential(lp_state, shape))
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


# --------------------------------------------------------------------------- scoring


@dataclass
class ScoreConfig:
    estimator: str = DEFAULT_ESTIMATOR
    invalid_penalty: float = DEFAULT_INVALID_PENALTY
    duplicate_penalty: float | None = None  # None: same as invalid_penalty
    clip: tuple[float, float] | None = DEFAULT_CLIP
    dedup: bool = True
    threshold: float = THRESHOLD
    min_regret: float | None = None  # accept into memory only at or above this regret
    round: int | None = None  # overrides each candidate's own round
    invalid: str = "drop"  # drop: invalid designs and duplicates give no designer sample
    shape: RewardShape = field(default_factory=RewardShape)
    lp_state: dict | None = None  # learning-potential EMAs by code hash, updated in place


def no_reward(sc: dict, cfg: ScoreConfig, penalty: float) -> dict:
    """An invalid design's or a duplicate's reward: none under `drop`, else the penalty."""
    if cfg.invalid == "drop":
        sc.update(reward=None, sample=False)
    else:
        sc["reward"] = penalty
    return sc


def is_valid(cand: dict) -> bool:
    """Valid: it passed validation and broke no contract during rollout."""
    ro = cand.get("rollouts")
    if isinstance(ro, dict) and (ro.get("contract_broken") or ro.get("nondeterministic")):
        return False
    return bool((cand.get("validation") or {}).get("valid"))


def invalid_score(cand: dict, cfg: ScoreConfig) -> dict:
    reason = (cand.get("validation") or {}).get("reason") or "unvalidated"
    ro = cand.get("rollouts")
    if reason == "ok" and isinstance(ro, dict):  # valid in validation, not in rollout
        reason = "contract_broken" if ro.get("contract_broken") else "nondeterministic"
    penalty = cfg.invalid_penalty
    if reason == "duplicate" and cfg.duplicate_penalty is not None:
        penalty = cfg.duplicate_penalty  # spade-validate already caught the copy
    return no_reward({
        "valid": False, "reason": reason, "estimator": cfg.estimator, "regret": None,
        "reward": penalty, "estimates": {}, "nohint": None, "hint": None, "accepted": False,
    }, cfg, penalty)


def valid_score(cand: dict, cfg: ScoreConfig) -> dict:
    """Score of a valid candidate from its rollouts (dedup is decided by the caller)."""
    ro = cand["rollouts"]
    nohint = condition_stats(ro.get("nohint") or [])
    hint = condition_stats(ro.get("hint") or [])
    est = estimates(nohint, hint)
    comp = components(nohint, hint, cfg.shape)
    if cfg.estimator in CLIPPED:
        regret = est[cfg.estimator]
        reward = None if regret is None else _round(clip(regret, cfg.clip))
    else:
        regret = comp["regret"]
        state = None
        if cfg.estimator == "learning-potential" and comp["win_rate"] is not None:
            key = cand["env"].get("code_hash") or code_hash(cand["env"]["code"])
            store = cfg.lp_state if cfg.lp_state is not None else {}
            state = store[key] = ema_step(store.get(key), comp["win_rate"], cfg.shape)
            comp = {**comp, "ema_fast": _round(state["fast"]), "ema_slow": _round(state["slow"])}
        reward = shaped_reward(cfg.estimator, comp, cfg.shape, state)
        if reward is None:
            regret = None
    if regret is None or reward is None:
        # valid but no episodes were played in a needed condition: nothing measured, so
        # neither rewarded nor punished, and not accepted into memory
        return {"valid": True, "reason": "no_episodes", "estimator": cfg.estimator, "regret": None,
                "reward": 0.0, "estimates": est, "components": comp, "nohint": nohint, "hint": hint,
                "accepted": False}
    return {"valid": True, "reason": "ok", "estimator": cfg.estimator, "regret": regret,
            "reward": reward, "estimates": est, "components": comp, "nohint": nohint,
            "hint": hint, "accepted": True}


@dataclass
class Scorer:
    """Scores a stream of candidates, de-duplicating against memory and the batch.

    Feed candidates to `score` in order; the first of a group of duplicates wins.
    `accepted` collects new memory entries, `replayed` the fresh scores of environments
    replayed from memory (origin "replay", or origin "library" whose code memory holds:
    these are measured, never duplicates). A candidate already in memory *because of an earlier run on
    the same input* (its id is the entry's parent) is not its own duplicate, so a rerun
    of spade-regret after an interruption gives the same scores.
    """

    cfg: ScoreConfig
    entries: list[dict] = field(default_factory=list)
    accepted: list[dict] = field(default_factory=list)
    replayed: list[tuple[str, dict, int]] = field(default_factory=list)
    stats: Counter = field(default_factory=Counter)
    scored: list[dict] = field(default_factory=list)  # the score of every candidate, for the summary

    def __post_init__(self) -> None:
        self.index = memory.index_of(self.entries, self.cfg.threshold) if self.cfg.dedup else None
        self.own = {p: e["id"] for e in self.entries for p in e.get("parents", [])}
        self.memory_ids = {e["id"] for e in self.entries}
        self.by_hash = {e.get("code_hash") or code_hash(e["code"]): e["id"] for e in self.entries}

    def score(self, cand: dict, where: Any = None) -> dict:
        """`cand` with `score` added (a new dict; the input is not modified)."""
        round_ = self.cfg.round if self.cfg.round is not None else int(cand.get("round") or 0)
        if not is_valid(cand):
            sc = invalid_score(cand, self.cfg)
        else:
            if not isinstance(cand.get("rollouts"), dict):
                raise (where.error if where else ValueError)("valid candidate without rollouts (run spade-rollout first)")
            if not isinstance((cand.get("env") or {}).get("code"), str):
                raise (where.error if where else ValueError)("valid candidate without env.code")
            sc = valid_score(cand, self.cfg)
            if cand.get("origin", "design") != "design":
                self._measure_known(cand, sc, round_)
            elif sc["accepted"]:
                self._dedup_and_accept(cand, sc, round_)
        self.stats["n"] += 1
        self.scored.append(sc)
        return {**cand, "score": sc}

    def _measure_known(self, cand: dict, sc: dict, round_: int) -> None:
        """A replayed or library environment was not designed in this round, so it is
        never a duplicate: if memory holds it, its entry gets the fresh scores; a library
        environment memory does not hold yet is added."""
        env_id = (cand.get("replay") or {}).get("env_id")
        if env_id is None:
            env_id = self.by_hash.get(code_hash(cand["env"]["code"]))
        if env_id is None and cand.get("origin") == "replay":
            env_id = (cand.get("parents") or [None])[0]
        if sc["regret"] is None:
            sc["accepted"] = False
        elif env_id is not None and env_id in self.memory_ids:
            sc["accepted"] = False
            sc["memory_id"] = env_id
            self.replayed.append((env_id, sc, round_))
        elif cand.get("origin") == "replay":
            sc["accepted"] = False  # its entry is gone from this memory: nothing to refresh
        else:
            if self.index is not None:
                self.index.add(cand["id"], cand["env"]["code"])
            self.accepted.append(memory.entry_from_candidate(cand, sc, round_))

    def _dedup_and_accept(self, cand: dict, sc: dict, round_: int) -> None:
        code = cand["env"]["code"]
        if self.index is not None:
            mine = self.own.get(cand["id"])
            match = self.index.find(code, exclude={mine} if mine else frozenset())
            if match is not None:
                penalty = self.cfg.duplicate_penalty
                sc.update(accepted=False, reason="duplicate", duplicate_of=match.key,
                          duplicate=match.how, similarity=round(match.similarity, 4))
                no_reward(sc, self.cfg, self.cfg.invalid_penalty if penalty is None else penalty)
                return
        if self.cfg.min_regret is not None and sc["regret"] < self.cfg.min_regret:
            sc["accepted"] = False
            sc["reason"] = "below_min_regret"
            return
        if self.index is not None:
            self.index.add(cand["id"], code)
        self.accepted.append(memory.entry_from_candidate(cand, sc, round_))


def window_score(sc: dict, nohint: list[dict], steps: int, cfg: ScoreConfig) -> dict:
    """A step-1 score after a window of `steps` agent steps on the same environment: the win
    rate and return variance (and so the plateau, the variance reward and the rewards
    built on them: blend, solve-rate, regret-var, learnability) over all the window's
    no-hint plays, the first step's and the re-plays'; the regret stays as measured at
    the first step, where hinted and no-hint plays were matched in time. A score without
    a measured reward (invalid, duplicate, no episodes) and the regret-only rewards stay
    as they are; learning-potential keeps the EMA step of the first measurement."""
    comp = sc.get("components")
    if (not sc.get("valid") or sc.get("reason") == "duplicate" or sc.get("reward") is None
            or not isinstance(comp, dict) or comp.get("regret") is None):
        return sc
    stats = condition_stats(nohint)
    if stats["n"] == 0:
        return sc
    w = _round(stats["mean_return"])
    shape = cfg.shape
    comp = {**comp, "win_rate_first": comp.get("win_rate"), "win_rate": w,
            "plateau": _round(plateau(w, shape.plateau_lo, shape.plateau_hi, shape.plateau_ramp)),
            "variance_reward": _round(variance_reward(stats["var_return"], shape))}
    out = {**sc, "components": comp, "window": {"steps": steps, "nohint": stats}}
    if cfg.estimator in ("blend", "solve-rate", "regret", "regret-var"):
        out["reward"] = shaped_reward(cfg.estimator, comp, shape)
    elif cfg.estimator == "learnability":
        out["reward"] = _round(clip(learnability(stats), cfg.clip))
    return out


def merge_into_memory(old: list[dict], accepted: Iterable[dict],
                      replayed: Iterable[tuple[str, dict, int]],
                      seen_ids: set[str] | None = None, threshold: float | None = None) -> list[dict]:
    """The memory after a round: refreshed scores for replayed entries (PLR updates a
    level's score each time it is played), then new entries not already present.

    `seen_ids` are the entries this run de-duplicated against. Entries that appeared
    since (another shard finished first) are checked here too, when `threshold` is given:
    a new entry that duplicates one of them is left out, so concurrent shards cannot
    both add copies of one environment."""
    out = [dict(e) for e in old]
    pos = {e["id"]: i for i, e in enumerate(out)}
    for env_id, sc, round_ in replayed:
        i = pos.get(env_id)
        if i is None:
            continue
        e = out[i]
        e["scores"] = memory.scores_of(sc)
        e["replays"] = int(e.get("replays") or 0) + 1
        e["last_round"] = max(int(e.get("last_round") or 0), round_)
    late = None
    if seen_ids is not None and threshold is not None:
        newer = [e for e in old if e["id"] not in seen_ids]
        late = memory.index_of(newer, threshold) if newer else None
    for e in accepted:
        if e["id"] in pos:
            continue
        if late is not None and (m := late.find(e["code"])) is not None:
            log.warning("%s (%s) not added: %s duplicate of %s, added meanwhile by another run",
                        e["id"], e.get("name"), m.how, m.key)
            continue
        pos[e["id"]] = len(out)
        out.append(e)
    return out


# --------------------------------------------------------------------------- summary


def quantiles(values: list[float], qs: Iterable[float] = (0.0, 0.1, 0.5, 0.9, 1.0)) -> list[float]:
    """Linear-interpolation quantiles (numpy's default), without numpy."""
    v = sorted(values)
    out = []
    for q in qs:
        pos = q * (len(v) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(v) - 1)
        out.append(v[lo] + (v[hi] - v[lo]) * (pos - lo))
    return out


def summarize(scores: list[dict]) -> dict:
    """Counts and distributions of a batch of scores (for stderr and --summary-json)."""
    n = len(scores)
    valid = [s for s in scores if s["valid"]]
    reasons = Counter(s["reason"] for s in scores if s["reason"] != "ok")
    regrets = [s["regret"] for s in valid if s["regret"] is not None]
    rewards = [s["reward"] for s in scores if s["reward"] is not None]

    def rate(cond: str) -> float | None:
        eps = [(s[cond]["success_rate"], s[cond]["n"]) for s in valid if s.get(cond) and s[cond]["n"]]
        total = sum(k for _, k in eps)
        return sum(p * k for p, k in eps) / total if total else None

    out: dict[str, Any] = {
        "candidates": n,
        "valid": len(valid),
        "valid_rate": len(valid) / n if n else None,
        "accepted": sum(bool(s["accepted"]) for s in scores),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "success_nohint": rate("nohint"),
        "success_hint": rate("hint"),
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "dropped": sum(1 for s in scores if s.get("sample") is False),
    }
    if regrets:
        q = quantiles(regrets)
        out["regret"] = {"n": len(regrets), "mean": sum(regrets) / len(regrets), "min": q[0],
                         "p10": q[1], "median": q[2], "p90": q[3], "max": q[4]}
    return out


def summary_lines(s: dict, estimator: str) -> list[str]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    lines = [f"{s['candidates']} candidates, {s['valid']} valid ({pct(s['valid_rate'])}), "
             f"{s['accepted']} accepted into memory"]
    if s["reasons"]:
        lines.append("not accepted: " + ", ".join(f"{k} {v}" for k, v in s["reasons"].items()))
    if "regret" in s:
        r = s["regret"]
        lines.append(f"regret ({estimator}) over {r['n']}: mean {r['mean']:.3f}  min {r['min']:.3f}  "
                     f"p10 {r['p10']:.3f}  median {r['median']:.3f}  p90 {r['p90']:.3f}  max {r['max']:.3f}")
    lines.append(f"success without hint {pct(s['success_nohint'])}, with hint {pct(s['success_hint'])}")
    if s["reward_mean"] is not None:
        lines.append(f"designer reward mean {s['reward_mean']:.3f}")
    return lines
