"""The environment memory's store: a records file of kind "env" (schema in records.py),
one line per accepted environment, any compression; the entries made from candidates and
from the example library; and the memory after a round (`merge_into_memory`).

Updates go through `update_memory`, which holds an advisory lock on `FILE.lock` (so two
shards of spade-regret that finish together do not lose each other's entries), re-reads
the file, applies the change and writes the whole file to a temporary name that is
renamed over the old one. A process killed at any moment leaves either the old memory or
the new one under the final name, never a mix.

Capacity (`evict`): memory keeps the newest `capacity` entries (by round, then file
order); the oldest go first.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any

from .. import dedup, pyparse
from ..errors import DataError
from ..recordio import RecordReader, RecordWriter
from ..records import make_id, new_record

log = logging.getLogger("spade")

Entry = dict[str, Any]


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
    lock_path = os.path.join(
        os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.lock"
    )
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


def first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summary_of(env: dict) -> str:
    """The env's one-line summary, or the first line of its class docstring."""
    if env.get("summary"):
        return first_line(env["summary"])
    import ast

    try:
        tree = pyparse.parse(env.get("code", ""))
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
            "env",
            eid,
            [],
            name=lib.get("name") or "",
            summary=summary_of(lib),
            code=lib["code"],
            max_turns=lib.get("max_turns"),
            doc_id=None,
            round=round_,
            scores=scores_of({}),
            replays=0,
            last_round=round_,
            code_hash=h,
            origin="library",
        )
        if lib.get("tools"):
            rec["tools"] = lib["tools"]
        if lib.get("family"):
            rec["family"] = lib["family"]
        out.append(rec)
    return out


def shuffle_scores(entries: list[Entry], seed: str) -> list[Entry]:
    """The entries with their `scores` permuted among those of the same skill: what a
    negative control's memory holds, so exemplars picked by score are picked by chance.
    Seeded by `seed` and the entries' ids, so a rerun permutes them the same way."""
    out = [dict(e) for e in entries]
    by_skill: dict[str | None, list[Entry]] = {}
    for e in out:
        by_skill.setdefault(e.get("skill"), []).append(e)
    for skill, members in by_skill.items():
        scores = [e["scores"] for e in members]
        ids = ",".join(sorted(e["id"] for e in members))
        random.Random(f"{seed}:{skill}:{ids}").shuffle(scores)
        for e, sc in zip(members, scores, strict=True):
            e["scores"] = sc
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


def evict(entries: list[Entry], capacity: int) -> list[Entry]:
    """The newest `capacity` entries (module docstring), in their file order; all when 0."""
    if capacity <= 0 or len(entries) <= capacity:
        return list(entries)
    order = sorted(range(len(entries)), key=lambda i: (int(entries[i].get("round") or 0), i))
    keep = set(order[-capacity:])
    return [e for i, e in enumerate(entries) if i in keep]


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


def merge_into_memory(
    old: list[dict],
    accepted: Iterable[dict],
    replayed: Iterable[tuple[str, dict, int]],
    seen_ids: set[str] | None = None,
    threshold: float | None = None,
) -> list[dict]:
    """The memory after a round: refreshed scores for replayed entries (PLR updates a
    level's score each time it is played), then new entries not already present. An
    accepted design whose environment memory already holds (the same normalised code,
    designed again where de-duplication is off) refreshes that entry the same way, adds
    the design to its parents (so merging the same batch twice changes nothing), and
    gives it the design's skill and difficulty where it had none (a library entry).

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
        _refresh(out[i], scores_of(sc), round_)
    late = None
    if seen_ids is not None and threshold is not None:
        newer = [e for e in old if e["id"] not in seen_ids]
        late = index_of(newer, threshold) if newer else None
    for e in accepted:
        if (i := pos.get(e["id"])) is not None:
            known = out[i].get("parents") or []
            if set(e["parents"]) <= set(known):
                continue  # this very design, merged before (a rerun): nothing new
            _refresh(out[i], e["scores"], e["round"])
            out[i]["parents"] = [*known, *e["parents"]]
            for key in ("skill", "difficulty"):
                if e.get(key) and not out[i].get(key):
                    out[i][key] = e[key]
            continue
        if late is not None and (m := late.find(e["code"])) is not None:
            log.warning(
                "%s (%s) not added: %s duplicate of %s, added meanwhile by another run",
                e["id"],
                e.get("name"),
                m.how,
                m.key,
            )
            continue
        pos[e["id"]] = len(out)
        out.append(e)
    return out


def _refresh(e: dict, scores: dict, round_: int) -> None:
    """An entry played again: its latest scores, one more play, its last round."""
    e["scores"] = scores
    e["replays"] = int(e.get("replays") or 0) + 1
    e["last_round"] = max(int(e.get("last_round") or 0), round_)
