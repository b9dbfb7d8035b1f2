"""Memory entries drawn into a round: replay into the agent's training set
(spade-rollout --replay) and uniform draws for the fixed-pool baseline.

Replay policy (`select_replay`), after prioritised level replay (Jiang et al., 2021):
  P(i) = (1 - rho) * P_S(i) + rho * P_C(i)
  P_S(i) = h(rank_i)^(1/beta) / sum_j h(rank_j)^(1/beta),  h(r) = 1/r, rank by score
           (learnability p(1-p) of the latest no-hint success rate, ties by id; an entry
           never played counts as 0.25, the maximum, so each is measured once);
  P_C(i) = (round - last_round_i) / sum_j (round - last_round_j)   (staleness);
  n distinct entries are drawn without replacement (renormalising after each draw).
  The defaults are REPLAY_BETA and REPLAY_RHO below, declared once for the functions and
  spade-memory's options: PLR's beta = 0.1 suits thousands of levels; a memory of tens
  of environments needs a flatter rank distribution to replay more than the top one.
"""

from __future__ import annotations

import random
from itertools import zip_longest

from ..records import make_id, new_record, stable_hash
from .store import Entry

REPLAY_BETA = 0.3
"""PLR's rank temperature: lower is greedier."""
REPLAY_RHO = 0.3
"""PLR's weight of staleness."""


def _learnability(e: Entry) -> float:
    """Latest learnability; an entry never played (a library seed) counts as the maximum
    0.25 so that it is measured once: PLR likewise visits unseen levels before replaying."""
    s = e.get("scores") or {}
    v = s.get("learnability")
    if isinstance(v, (int, float)):
        return float(v)
    p = (s.get("nohint") or {}).get("success_rate")
    return float(p) * (1.0 - float(p)) if isinstance(p, (int, float)) else 0.25


def replay_priorities(
    entries: list[Entry], round_: int, beta: float = REPLAY_BETA, rho: float = REPLAY_RHO
) -> dict[str, float]:
    """PLR replay probability of each entry (module docstring); sums to 1."""
    if not entries:
        return {}
    ranked = sorted(entries, key=lambda e: (-_learnability(e), e["id"]))
    weights = [(1.0 / (r + 1)) ** (1.0 / beta) for r in range(len(ranked))]
    total = sum(weights)
    p_s = {e["id"]: w / total for e, w in zip(ranked, weights, strict=True)}
    stale = {
        e["id"]: max(0, round_ - int(e.get("last_round", e.get("round", 0)) or 0)) for e in entries
    }
    s_total = sum(stale.values())
    if s_total == 0:
        return p_s
    return {i: (1 - rho) * p_s[i] + rho * stale[i] / s_total for i in p_s}


def select_replay(
    entries: list[Entry],
    n: int,
    round_: int,
    seed: int = 0,
    beta: float = REPLAY_BETA,
    rho: float = REPLAY_RHO,
) -> list[Entry]:
    """Up to n distinct entries drawn by PLR priority; deterministic for (seed, round)."""
    probs = replay_priorities(entries, round_, beta, rho)
    by_id = {e["id"]: e for e in entries}
    rng = random.Random(int(stable_hash(seed, "replay", round_, n=16), 16))
    left = sorted(probs)
    picked: list[Entry] = []
    while left and len(picked) < n:
        total = sum(probs[i] for i in left)
        x = rng.random() * total
        acc = 0.0
        choice = left[-1]
        for i in left:
            acc += probs[i]
            if x < acc:
                choice = i
                break
        left.remove(choice)
        picked.append(by_id[choice])
    return picked


def replay_candidate(e: Entry, round_: int, priority: float | None = None) -> dict:
    """A candidate record for spade-rollout --replay: valid, carrying the env from memory."""
    env = {
        "code": e["code"],
        "name": e.get("name"),
        "summary": e.get("summary"),
        "max_turns": e.get("max_turns"),
    }
    if e.get("tools"):
        env["tools"] = e["tools"]
    cid = make_id("cand", "replay", e["id"], round_)
    return new_record(
        "candidate",
        cid,
        [e["id"]],
        origin="replay",
        round=round_,
        group=make_id("group", "replay", e["id"], round_),
        doc={"id": e.get("doc_id"), "text": None, "source": None} if e.get("doc_id") else None,
        env=env,
        validation={
            "valid": True,
            "reason": "ok",
            "detail": f"replayed from memory {e['id']} (added in round {e.get('round')})",
            "seconds": 0.0,
            "seeds": [],
        },
        replay={
            "env_id": e["id"],
            "priority": priority,
            "staleness": round_ - int(e.get("last_round", e.get("round", 0)) or 0),
            "replays": e.get("replays", 0),
        },
    )


def replay_candidates(
    entries: list[Entry],
    n: int,
    round_: int,
    seed: int = 0,
    beta: float = REPLAY_BETA,
    rho: float = REPLAY_RHO,
) -> list[dict]:
    probs = replay_priorities(entries, round_, beta, rho)
    return [
        replay_candidate(e, round_, round(probs[e["id"]], 6))
        for e in select_replay(entries, n, round_, seed, beta, rho)
    ]


def pool_candidate(e: Entry, round_: int) -> dict:
    """A memory entry as a fresh candidate (origin "library", no verdict yet) for the
    fixed-pool baseline: it goes through spade-validate like the example library."""
    env = {
        "code": e["code"],
        "name": e.get("name"),
        "summary": e.get("summary"),
        "max_turns": e.get("max_turns"),
    }
    if e.get("tools"):
        env["tools"] = e["tools"]
    rid = make_id("lib", e["id"], round_)
    return new_record(
        "candidate",
        rid,
        [e["id"]],
        origin="library",
        round=round_,
        group=rid,
        doc=None,
        design=None,
        env=env,
    )


def draw(items: list[dict], n: int, seed: int, stage: str, round_: int) -> list[dict]:
    """n items uniformly without replacement (all when n is 0 or exceeds the pool), in a
    deterministic order for (seed, stage, round) whatever the input order."""
    pool = sorted(items, key=lambda r: r["id"])
    rng = random.Random(int(stable_hash(seed, stage, round_, n=16), 16))
    k = len(pool) if n <= 0 else min(n, len(pool))
    return rng.sample(pool, k)


POOL_DRAWS = ("uniform", "reward")
"""How a fixed pool's environments are drawn: `draw` or `draw_best`."""


def designer_reward(rec: dict) -> float | None:
    """The designer's reward spade-regret gave a record, or None (unscored or invalid)."""
    score = rec.get("score")
    if not isinstance(score, dict) or score.get("valid") is False:
        return None
    r = score.get("reward")
    return float(r) if isinstance(r, int | float) and not isinstance(r, bool) else None


def draw_best(items: list[dict], n: int, seed: int, stage: str, round_: int) -> list[dict]:
    """The n scored items with the highest designer reward (all when n is 0), taken in turn
    from each skill (`family`), as the designer's prompts take the skills in turn: the best
    of each, then the second best of each, and so on. Equal rewards, and the order of the
    skills, follow `draw`'s order for (seed, stage, round): ties fall at random but
    reproducibly. Unscored and invalid items are never drawn."""
    by_skill: dict[object, list[dict]] = {}
    for r in draw(items, 0, seed, stage, round_):
        if designer_reward(r) is not None:
            by_skill.setdefault(r.get("family"), []).append(r)
    ranked = [sorted(rs, key=lambda r: -designer_reward(r)) for rs in by_skill.values()]
    turns = [r for rank in zip_longest(*ranked) for r in rank if r is not None]
    return turns if n <= 0 else turns[:n]
