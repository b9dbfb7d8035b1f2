"""The environment memory: accepted environments accumulated across rounds.

A memory is a records file of kind "env" (schema in records.py), one line per accepted
environment, any compression. It serves three readers:

- the designer prompt (spade-design): `select_exemplars` and `listing` (exemplars.py);
- the agent's training set (spade-rollout --replay): `select_replay` (replay.py);
- de-duplication (spade-regret, spade-validate): `index_of` builds a `DedupIndex`.

The file itself, its locked updates and its entries are in store.py. This package
re-exports the three modules' names, so `memory.load_memory` and the like work as before.
"""

from .exemplars import (
    BAND,
    TOO_EASY,
    TOO_HARD,
    avoid_entry,
    avoid_line,
    cut_code,
    listing,
    select_exemplars,
    select_published,
    win_rate,
)
from .replay import (
    POOL_DRAWS,
    REPLAY_BETA,
    REPLAY_RHO,
    designer_reward,
    draw,
    draw_best,
    pool_candidate,
    replay_candidate,
    replay_candidates,
    replay_priorities,
    select_replay,
)
from .store import (
    Entry,
    entries_from_library,
    entry_from_candidate,
    evict,
    find_entry,
    first_line,
    index_of,
    load_memory,
    locked,
    merge_into_memory,
    save_memory,
    scores_of,
    shuffle_scores,
    summary_of,
    update_memory,
)

__all__ = [
    "Entry",
    "load_memory",
    "save_memory",
    "locked",
    "update_memory",
    "first_line",
    "summary_of",
    "entry_from_candidate",
    "entries_from_library",
    "scores_of",
    "shuffle_scores",
    "index_of",
    "evict",
    "find_entry",
    "merge_into_memory",
    "select_exemplars",
    "BAND",
    "TOO_EASY",
    "TOO_HARD",
    "win_rate",
    "select_published",
    "avoid_entry",
    "avoid_line",
    "cut_code",
    "listing",
    "REPLAY_BETA",
    "REPLAY_RHO",
    "replay_priorities",
    "select_replay",
    "replay_candidate",
    "replay_candidates",
    "pool_candidate",
    "draw",
    "draw_best",
    "POOL_DRAWS",
    "designer_reward",
]
