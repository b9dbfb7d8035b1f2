"""What the designer prompt shows of the memory: exemplars and a compact listing.

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
design). A skill memory holds no entry of yet gets no exemplar and no avoid line, as
released; a design without a target skill draws on every entry. A play counts as won
when its return is above 0, as the release's memory counts it.
"""

from __future__ import annotations

import math
import random

from .. import dedup
from ..records import stable_hash
from .store import Entry


def _regret(e: Entry) -> float:
    r = (e.get("scores") or {}).get("regret")
    return float(r) if isinstance(r, (int, float)) else float("-inf")


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
    """The no-hint win rate of the entry's latest play, a play won when its return is
    above 0 as the release counts (entries scored before that field: the success rate);
    None if never played."""
    nohint = (e.get("scores") or {}).get("nohint") or {}
    p = nohint.get("won_rate", nohint.get("success_rate"))
    return float(p) if isinstance(p, (int, float)) else None


def _of_skill(entries: list[Entry], skill: str | None) -> list[Entry]:
    """The entries of `skill` (none if memory holds none of it, as released); all of them
    for a design without a target skill."""
    return [e for e in entries if e.get("skill") == skill] if skill else list(entries)


def select_published(
    entries: list[Entry], skill: str | None, n: int = 2, seed: int = 0
) -> list[Entry]:
    """n exemplars by the published policy (module docstring), best regret first."""
    if n <= 0:
        return []
    pool = [
        e
        for e in _of_skill(entries, skill)
        if (w := win_rate(e)) is not None and BAND[0] <= w <= BAND[1] and _regret(e) > float("-inf")
    ]
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
