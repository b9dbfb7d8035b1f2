"""Scoring candidates: a score for every candidate record (`valid_score`,
`invalid_score`), the stateful `Scorer` that de-duplicates a stream against memory and
the batch, and `window_score`, a score recomputed over a window of agent steps.

The estimators and rewards these scores hold, and why the designer reward is clipped
and how invalid designs are treated, are described in estimators.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .. import memory
from ..dedup import THRESHOLD, code_hash
from ..stage_settings import RewardShape
from .estimators import (
    CLIPPED,
    DEFAULT_CLIP,
    DEFAULT_ESTIMATOR,
    DEFAULT_INVALID_PENALTY,
    _round,
    clip,
    components,
    condition_stats,
    estimates,
    learnability,
    lp_components,
    lp_update,
    plateau,
    shaped_reward,
    variance_reward,
)


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
    lp_state: dict | None = None  # learning-potential trackers by skill (update_lp_state)


def skill_of(cand: dict) -> str:
    """The key of a candidate's learning-potential tracker ("" without a skill)."""
    return str(cand.get("skill") or "")


def update_lp_state(
    state: dict, plays_by_skill: dict[str, list[float]], shape: RewardShape
) -> dict:
    """Each skill's tracker after this window: updated with the mean of the skill's
    no-hint returns (every play of every valid design of that skill), as the release's
    delayed path does before it computes the window's rewards. In place; returns it."""
    for skill, returns in plays_by_skill.items():
        if returns:
            state[skill] = lp_update(state.get(skill), sum(returns) / len(returns), shape)
    return state


def lp_plays(cand: dict, nohint: list[dict] | None = None) -> list[float]:
    """The no-hint returns a candidate adds to its skill's window mean: a valid design's."""
    if not is_valid(cand) or cand.get("origin", "design") != "design":
        return []
    ro = cand.get("rollouts") if isinstance(cand.get("rollouts"), dict) else {}
    episodes = nohint if nohint is not None else ro.get("nohint") or []
    return [float(e["return"]) for e in episodes if isinstance(e.get("return"), (int, float))]


def no_reward(sc: dict, cfg: ScoreConfig, penalty: float) -> dict:
    """An invalid design's or a duplicate's reward: none under `drop`, else the penalty."""
    if cfg.invalid == "drop":
        sc.update(reward=None, sample=False)
    else:
        sc["reward"] = penalty
    return sc


ROLLOUT_REFUSALS = ("contract_broken", "nondeterministic")
"""The marks rollout's checks leave on a candidate (rollout/verify.py): either refuses it."""


def is_valid(cand: dict) -> bool:
    """Valid: it passed validation and broke no contract during rollout."""
    ro = cand.get("rollouts")
    if isinstance(ro, dict) and any(ro.get(mark) for mark in ROLLOUT_REFUSALS):
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
    return no_reward(
        {
            "valid": False,
            "reason": reason,
            "estimator": cfg.estimator,
            "regret": None,
            "reward": penalty,
            "estimates": {},
            "nohint": None,
            "hint": None,
            "accepted": False,
        },
        cfg,
        penalty,
    )


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
        if cfg.estimator == "learning-potential":
            comp = lp_components(comp, (cfg.lp_state or {}).get(skill_of(cand)), cfg.shape)
        reward = shaped_reward(cfg.estimator, comp, cfg.shape)
        if reward is None:
            regret = None
    if regret is None or reward is None:
        # valid but no episodes were played in a needed condition: nothing measured, so
        # neither rewarded nor punished, and not accepted into memory
        return {
            "valid": True,
            "reason": "no_episodes",
            "estimator": cfg.estimator,
            "regret": None,
            "reward": 0.0,
            "estimates": est,
            "components": comp,
            "nohint": nohint,
            "hint": hint,
            "accepted": False,
        }
    return {
        "valid": True,
        "reason": "ok",
        "estimator": cfg.estimator,
        "regret": regret,
        "reward": reward,
        "estimates": est,
        "components": comp,
        "nohint": nohint,
        "hint": hint,
        "accepted": True,
    }


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
    scored: list[dict] = field(
        default_factory=list
    )  # the score of every candidate, for the summary

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
                raise (where.error if where else ValueError)(
                    "valid candidate without rollouts (run spade-rollout first)"
                )
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
                sc.update(
                    accepted=False,
                    reason="duplicate",
                    duplicate_of=match.key,
                    duplicate=match.how,
                    similarity=round(match.similarity, 4),
                )
                no_reward(sc, self.cfg, self.cfg.invalid_penalty if penalty is None else penalty)
                return
        if self.cfg.min_regret is not None and sc["regret"] < self.cfg.min_regret:
            sc["accepted"] = False
            sc["reason"] = "below_min_regret"
            return
        if self.index is not None:
            self.index.add(cand["id"], code)
        self.accepted.append(memory.entry_from_candidate(cand, sc, round_))


def refused_in_window(cand: dict, marks: dict, cfg: ScoreConfig) -> tuple[dict, dict]:
    """A valid candidate whose re-play in a window left rollout's `marks` on it: the
    candidate carrying them and its invalid score (`window.refused`), as rollout's own
    refusal would have scored it. The window's plays are not its to be paid for."""
    cand = {**cand, "rollouts": {**(cand.get("rollouts") or {}), **marks}}
    return cand, {**invalid_score(cand, cfg), "window": {"refused": marks}}


def window_score(
    sc: dict, nohint: list[dict], steps: int, cfg: ScoreConfig, skill: str = ""
) -> dict:
    """A step-1 score after a window of `steps` agent steps on the same environment: the win
    rate and return variance (and so the plateau, the variance reward and the rewards
    built on them: blend, solve-rate, regret-var, learnability) over all the window's
    no-hint plays, the first step's and the re-plays'; the regret stays as measured at
    the first step, where hinted and no-hint plays were matched in time. A score without
    a measured reward (invalid, duplicate, no episodes) and the regret-only rewards stay
    as they are; learning-potential is |window win rate - mu_slow| of the skill's tracker
    in `cfg.lp_state`, as the window updated it (the caller's update_lp_state)."""
    comp = sc.get("components")
    if (
        not sc.get("valid")
        or sc.get("reason") == "duplicate"
        or sc.get("reward") is None
        or not isinstance(comp, dict)
        or comp.get("regret") is None
    ):
        return sc
    stats = condition_stats(nohint)
    if stats["n"] == 0:
        return sc
    w = _round(stats["mean_return"])
    shape = cfg.shape
    comp = {
        **comp,
        "win_rate_first": comp.get("win_rate"),
        "win_rate": w,
        "plateau": _round(plateau(w, shape.plateau_lo, shape.plateau_hi, shape.plateau_ramp)),
        "variance_reward": _round(variance_reward(stats["var_return"], shape)),
    }
    out = {**sc, "components": comp, "window": {"steps": steps, "nohint": stats}}
    if cfg.estimator == "learning-potential":
        comp = lp_components(comp, (cfg.lp_state or {}).get(skill), shape)
        out["components"] = comp
    if cfg.estimator in ("blend", "solve-rate", "regret", "regret-var", "learning-potential"):
        out["reward"] = shaped_reward(cfg.estimator, comp, shape)
    elif cfg.estimator == "learnability":
        out["reward"] = _round(clip(learnability(stats), cfg.clip))
    return out
