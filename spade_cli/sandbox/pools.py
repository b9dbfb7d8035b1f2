"""Run a function over many items on threads, results in input order (sessions are
independent, so a run of many of them goes on when some fail)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor


def imap_pool(fn: Callable, items: Iterable, max_workers: int) -> Iterator:
    """fn(item) for every item on up to max_workers threads, yielded in input order while
    at most 2*max_workers items are in flight (items may be an endless stream)."""
    max_workers = max(1, int(max_workers))
    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="sandbox") as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * max_workers:
                yield pending.popleft().result()
        for fut in pending:
            yield fut.result()


def run_pool(fn: Callable, items: Iterable, max_workers: int) -> list:
    """fn(item) for every item on up to max_workers threads; results in input order.
    An exception from fn propagates (catch EnvError inside fn to keep going)."""
    return list(imap_pool(fn, items, max_workers))
