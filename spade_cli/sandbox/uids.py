"""Host uids for root mode, one per live worker.

Each live worker gets its own, so RLIMIT_NPROC (which counts every process of a uid on
the host) is a per-worker limit, and workers of concurrent spade processes on one
machine do not share one either (the pid is part of the uid). Slots go round a random
permutation, so the uid a worker sees says nothing about how many workers came before.
"""

from __future__ import annotations

import os
import random
import threading

from .config import EnvError

UID_BASE = 1 << 30
UID_SLOTS = 1024


class UidPool:
    def __init__(self):
        self.lock = threading.Lock()
        self.used: set[int] = set()
        self.order = random.SystemRandom().sample(range(UID_SLOTS), UID_SLOTS)
        self.next = 0

    def acquire(self) -> int:
        with self.lock:
            for _ in range(UID_SLOTS):
                # Round-robin: a just-released uid may still own a dying process.
                slot, self.next = self.order[self.next], (self.next + 1) % UID_SLOTS
                if slot not in self.used:
                    self.used.add(slot)
                    return UID_BASE + ((os.getpid() & 0xFFFFF) << 10) + slot
        raise EnvError("crash", f"more than {UID_SLOTS} sandboxed workers at once in one process")

    def release(self, uid: int) -> None:
        with self.lock:
            self.used.discard((uid - UID_BASE) & (UID_SLOTS - 1))


uids = UidPool()
