"""The environment memory: accepted environments accumulated across rounds.

A memory is a records file of kind "env" (schema in records.py), one line per accepted
environment, any compression. It serves three readers:

- the designer prompt (spade-design): `select_exemplars` and `listing`;
- the agent's training set (spade-rollout --replay): `select_replay`;
- de-duplication (spade-regret, spade-validate): `index_of` builds a `DedupIndex`.

Updates go through `update_memory`, which holds an advisory lock on `FILE.lock` (so two
shards of spade-regret that finish together do not lose each other's entries), re-reads
the file, applies the change and writes the whole file to a temporary name that is
renamed over the old one. A process killed at any moment leaves either the old memory or
the new one under the final name, never a mix.

Exemplar policy (`select_exemplars(entries, k, seed)`), deterministic for a seed and
independent of the file's order:
  1. ceil(k/3) slots: the highest regret (ties by id) — what the designer should aim for;
  2. floor(k/3) slots: uniformly random among the rest — keeps the prompt from freezing
     on the same few winners round after round;
  3. the remaining slots: the most *different* from what is already chosen (greedy
     farthest point, distance 1 - Jaccard of shingle sets) — shows the range of what
     exists so the designer does not converge on one family.

Published exemplar policy (`select_published(entries, skill, n, seed)`): among entries of
the design's skill whose no-hint win rate lies in [0.15, 0.85], the top max(3n, 10) by
regret, n of them drawn uniformly; the prompt cuts each one's code to a character budget.
`avoid_entry` names one entry of the skill that was too easy (win rate > 0.9) or too hard
(< 0.1). Both are deterministic for a seed (the designer passes one per seed, round and
design). With no entry of the skill, entries of every skill are used.

Capacity (`evict`): memory keeps the newest `capacity` entries (by round, then file
order); the oldest go first.

Replay policy (`select_replay`), after prioritised level replay (Jiang et al., 2021):
  P(i) = (1 - rho) * P_S(i) + rho * P_C(i)
  P_S(i) = h(rank_i)^(1/beta) / sum_j h(rank_j)^(1/beta),  h(r) = 1/r, rank by score
           (learnability p(1-p) of the latest no-hint success rate, ties by id; an entry
           never played counts as 0.25, the maximum, so each is measured once);
  P_C(i) = (round - last_round_i) / sum_j (round - last_round_j)   (staleness);
  n distinct entries are drawn without replacement (renormalising after each draw).
  Defaults beta = 0.3, rho = 0.3: PLR's beta = 0.1 suits thousands of levels; a memory
  of tens of environments needs a flatter rank distribution to replay more than the top one.
"""

from __future__ import annotations

import fcntl
import math
import os
import random
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any

from . import dedup
from .errors import DataError
from .recordio import RecordReader, RecordWriter
from .records import make_id, new_record, stable_hash

Entry = dict[str, Any]


# --------------------------------------------------------------------------- file


def load_memory(path: str | None) -> list[Entry]:
    """All env records of a memory file; a missing file (or None) is an empty memory."""
    if not path or (path != "-" and not os.path.exists(path)):
        return []
    return list(RecordReader([path], kind="env", required=("id", "code")))


def save_memory(path: str, entries: Iterable[Entry]) -> int:
    """Write the whole memory atomically (temporary file, fsync, rename)."""
    with RecordWriter(path) as w:
        return w.write_all(entries)


@contextmanager
def locked(path: str):
    """An exclusive advisory lock on `path.lock` for a read-modify-write of the memory."""
    lock_path = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise DataError("directory of the memory file does not exist", path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update_memory(path: str, change: Callable[[list[Entry]], list[Entry]]) -> list[Entry]:
    """Apply `change` to the current memory under the lock and save; returns the new list."""
    with locked(path):
        new = change(load_memory(path))
        save_memory(path, new)
    return new


# --------------------------------------------------------------------------- entries


def first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summary_of(env: dict) -> str:
    """The env's one-line summary, or the first line of its class docstring."""
    if env.get("summary"):
        return first_line(env["summary"])
    import ast

    try:
        tree = ast.parse(env.get("code", ""))
    except (SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and (doc := ast.get_docstring(node)):
            return first_line(doc)
    if doc := ast.get_docstring(tree):
        return first_line(doc)
    return ""


def entry_from_candidate(cand: dict, score: dict, round_: int) -> Entry:
    """A memory record for an accepted candidate. The id depends only on the normalised
    code, so the same environment always has the same id."""
    env = cand["env"]
    h = dedup.code_hash(env["code"])
    doc = cand.get("doc") or {}
    rec = new_record(
        "env",
        make_id("env", h),
        [cand["id"]],
        name=env.get("name") or "",
        summary=summary_of(env),
        code=env["code"],
        max_turns=env.get("max_turns"),
        doc_id=doc.get("id"),
        round=round_,
        scores=scores_of(score),
        replays=0,
        last_round=round_,
        code_hash=h,
        origin=cand.get("origin", "design"),
    )
    for key in ("skill", "difficulty"):
        if cand.get(key):
            rec[key] = cand[key]
    if env.get("tools"):
        rec["tools"] = env["tools"]
    return rec


def entries_from_library(library: Iterable[dict], round_: int = 0) -> list[Entry]:
    """Memory entries for the example library (`envs.library.load_library()` dicts:
    name, summary, code, max_turns, tools, family): the first memory of a run. They carry
    no scores until played; replay ranks unplayed entries first (see `_learnability`)."""
    out, seen = [], set()
    for lib in library:
        h = dedup.code_hash(lib["code"])
        eid = make_id("env", h)
        if eid in seen:
            continue
        seen.add(eid)
        rec = new_record(
            "env", eid, [], name=lib.get("name") or "", summary=summary_of(lib), code=lib["code"],
            max_turns=lib.get("max_turns"), doc_id=None, round=round_, scores=scores_of({}),
            replays=0, last_round=round_, code_hash=h, origin="library",
        )
        if lib.get("tools"):
            rec["tools"] = lib["tools"]
        if lib.get("family"):
            rec["family"] = lib["family"]
        out.append(rec)
    return out


def scores_of(score: dict) -> dict:
    """The part of a candidate's `score` worth keeping in memory."""
    return {
        "estimator": score.get("estimator"),
        "regret": score.get("regret"),
        "reward": score.get("reward"),
        "learnability": (score.get("estimates") or {}).get("learnability"),
        "estimates": score.get("estimates") or {},
        "nohint": score.get("nohint"),
        "hint": score.get("hint"),
    }


def index_of(entries: Iterable[Entry], threshold: float = dedup.THRESHOLD) -> dedup.DedupIndex:
    idx = dedup.DedupIndex(threshold=threshold)
    for e in entries:
        idx.add(e["id"], e["code"])
    return idx


def _regret(e: Entry) -> float:
    r = (e.get("scores") or {}).get("regret")
    return float(r) if isinstance(r, (int, float)) else float("-inf")


def _learnability(e: Entry) -> float:
    """Latest learnability; an entry never played (a library seed) counts as the maximum
    0.25 so that it is measured once: PLR likewise visits unseen levels before replaying."""
    s = e.get("scores") or {}
    v = s.get("learnability")
    if isinstance(v, (int, float)):
        return float(v)
    p = (s.get("nohint") or {}).get("success_rate")
    return float(p) * (1.0 - float(p)) if isinstance(p, (int, float)) else 0.25


# --------------------------------------------------------------------------- designer prompt


def select_exemplars(entries: list[Entry], k: int, seed: int = 0) -> list[Entry]:
    """k entries for the designer prompt: high regret, random, diverse (module docstring)."""
    if k <= 0 or not entries:
        return []
    pool = sorted(entries, key=lambda e: e["id"])
    if len(pool) <= k:
        return sorted(pool, key=lambda e: (-_regret(e), e["id"]))
    n_top = math.ceil(k / 3)
    n_rand = k // 3
    by_regret = sorted(pool, key=lambda e: (-_regret(e), e["id"]))
    chosen = by_regret[:n_top]
    rest = [e for e in pool if e not in chosen]
    rng = random.Random(int(stable_hash(seed, "exemplars", len(pool), n=16), 16))
    chosen += rng.sample(rest, n_rand)
    rest = [e for e in rest if e not in chosen]
    sets = {e["id"]: dedup.shingles(e["code"]) for e in chosen + rest}
    while len(chosen) < k and rest:
        # farthest point: maximise the distance to the nearest already-chosen entry
        def spread(e: Entry) -> tuple[float, str]:
            near = max(dedup.jaccard(sets[e["id"]], sets[c["id"]]) for c in chosen)
            return (near, e["id"])

        pick = min(rest, key=spread)
        chosen.append(pick)
        rest.remove(pick)
    return chosen


BAND = (0.15, 0.85)
TOO_EASY, TOO_HARD = 0.9, 0.1


def win_rate(e: Entry) -> float | None:
    """The no-hint success rate of the entry's latest play (None if never played)."""
    p = ((e.get("scores") or {}).get("nohint") or {}).get("success_rate")
    return float(p) if isinstance(p, (int, float)) else None


def _of_skill(entries: list[Entry], skill: str | None) -> list[Entry]:
    same = [e for e in entries if skill and e.get("skill") == skill]
    return same or list(entries)


def select_published(entries: list[Entry], skill: str | None, n: int = 2, seed: int = 0) -> list[Entry]:
    """n exemplars by the published policy (module docstring), best regret first."""
    if n <= 0:
        return []
    pool = [e for e in _of_skill(entries, skill)
            if (w := win_rate(e)) is not None and BAND[0] <= w <= BAND[1] and _regret(e) > float("-inf")]
    top = sorted(pool, key=lambda e: (-_regret(e), e["id"]))[: max(3 * n, 10)]
    rng = random.Random(int(stable_hash(seed, "published", n=16), 16))
    picked = rng.sample(top, min(n, len(top)))
    return sorted(picked, key=lambda e: (-_regret(e), e["id"]))


def avoid_entry(entries: list[Entry], skill: str | None, seed: int = 0) -> tuple[Entry, str] | None:
    """One entry of the skill that was too easy or too hard, with which, or None."""
    bad = []
    for e in sorted(_of_skill(entries, skill), key=lambda e: e["id"]):
        w = win_rate(e)
        if w is not None and w > TOO_EASY:
            bad.append((e, "too easy"))
        elif w is not None and w < TOO_HARD:
            bad.append((e, "too hard"))
    if not bad:
        return None
    return random.Random(int(stable_hash(seed, "avoid", n=16), 16)).choice(bad)


def avoid_line(found: tuple[Entry, str] | None) -> str:
    if found is None:
        return ""
    e, why = found
    title = e.get("name") or e["id"]
    summary = f" ({e['summary']})" if e.get("summary") else ""
    return f"Avoid tasks like {title}{summary}: it was {why}, the agent won {win_rate(e):.0%} of its plays without a hint."


def cut_code(code: str, chars: int) -> str:
    """The first `chars` characters of the code, ending at a line end, marked as cut."""
    if chars <= 0 or len(code) <= chars:
        return code
    head = code[:chars]
    if "\n" in head:
        head = head[: head.rfind("\n")]
    return head.rstrip() + "\n# ... (cut)"


def evict(entries: list[Entry], capacity: int) -> list[Entry]:
    """The newest `capacity` entries (module docstring), in their file order; all when 0."""
    if capacity <= 0 or len(entries) <= capacity:
        return list(entries)
    order = sorted(range(len(entries)), key=lambda i: (int(entries[i].get("round") or 0), i))
    keep = set(order[-capacity:])
    return [e for i, e in enumerate(entries) if i in keep]


def listing(entries: list[Entry], limit: int = 50, width: int = 100) -> str:
    """A compact list of existing environments, newest rounds first, one per line:
    `- name: summary`. Beyond `limit`, one line says how many more exist."""
    ordered = sorted(entries, key=lambda e: (-(e.get("round") or 0), e.get("name") or "", e["id"]))
    lines = []
    for e in ordered[:limit]:
        text = f"- {e.get('name') or e['id']}: {e.get('summary') or ''}".rstrip(": ")
        lines.append(text if len(text) <= width else text[: width - 1] + "…")
    if len(ordered) > limit:
        lines.append(f"- … and {len(ordered) - limit} more")
    return "\n".join(lines)


# --------------------------------------------------------------------------- replay


def replay_priorities(entries: list[Entry], round_: int, beta: float = 0.3, rho: float = 0.3) -> dict[str, float]:
    """PLR replay probability of each entry (module docstring); sums to 1."""
    if not entries:
        return {}
    ranked = sorted(entries, key=lambda e: (-_learnability(e), e["id"]))
    weights = [(1.0 / (r + 1)) ** (1.0 / beta) for r in range(len(ranked))]
    total = sum(weights)
    p_s = {e["id"]: w / total for e, w in zip(ranked, weights, strict=True)}
    stale = {e["id"]: max(0, round_ - int(e.get("last_round", e.get("round", 0)) or 0)) for e in entries}
    s_total = sum(stale.values())
    if s_total == 0:
        return p_s
    return {i: (1 - rho) * p_s[i] + rho * stale[i] / s_total for i in p_s}


def select_replay(
    entries: list[Entry], n: int, round_: int, seed: int = 0, beta: float = 0.3, rho: float = 0.3
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
    env = {"code": e["code"], "name": e.get("name"), "summary": e.get("summary"), "max_turns": e.get("max_turns")}
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


def replay_candidates(entries: list[Entry], n: int, round_: int, seed: int = 0,
                      beta: float = 0.3, rho: float = 0.3) -> list[dict]:
    probs = replay_priorities(entries, round_, beta, rho)
    return [replay_candidate(e, round_, round(probs[e["id"]], 6))
            for e in select_replay(entries, n, round_, seed, beta, rho)]


def find_entry(entries: list[Entry], key: str) -> Entry | None:
    """By id, then by exact name (newest round wins), then by unique id prefix."""
    for e in entries:
        if e["id"] == key:
            return e
    named = [e for e in entries if e.get("name") == key]
    if named:
        return max(named, key=lambda e: (e.get("round") or 0, e["id"]))
    pref = [e for e in entries if e["id"].startswith(key)]
    return pref[0] if len(pref) == 1 else None


def pool_candidate(e: Entry, round_: int) -> dict:
    """A memory entry as a fresh candidate (origin "library", no verdict yet) for the
    fixed-pool baseline: it goes through spade-validate like the example library."""
    env = {"code": e["code"], "name": e.get("name"), "summary": e.get("summary"), "max_turns": e.get("max_turns")}
    if e.get("tools"):
        env["tools"] = e["tools"]
    rid = make_id("lib", e["id"], round_)
    return new_record("candidate", rid, [e["id"]], origin="library", round=round_, group=rid,
                      doc=None, design=None, env=env)


def draw(items: list[dict], n: int, seed: int, stage: str, round_: int) -> list[dict]:
    """n items uniformly without replacement (all when n is 0 or exceeds the pool), in a
    deterministic order for (seed, stage, round) whatever the input order."""
    pool = sorted(items, key=lambda r: r["id"])
    rng = random.Random(int(stable_hash(seed, stage, round_, n=16), 16))
    k = len(pool) if n <= 0 else min(n, len(pool))
    return rng.sample(pool, k)
