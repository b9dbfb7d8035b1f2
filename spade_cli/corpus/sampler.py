"""Uniform sampling without replacement from corpora far larger than memory.

Every document gets a key from its place in the corpus (keys.py); the sample is the N
eligible documents with the smallest keys, after exact de-duplication by content. A
reservoir holds the N best so far; its largest key is the threshold. Lines are counted
in bulk and their keys computed in bulk (numpy), and only a line whose key is below the
threshold is parsed, filtered and hashed. After the reservoir fills, that is about
N * ln(docs / N) lines of the whole corpus, so the scan runs at decompression speed and
memory is bounded by N documents (each at most one excerpt window), never corpus size.

Why this is exact under any split of the work: the final sample is bottom-N of
D = {eligible documents, each distinct text counted once with its smallest key}. Any
reservoir's threshold is the N-th smallest key of N distinct eligible texts, hence never
below the N-th smallest key of D, so a document of the final sample is never skipped,
whichever job meets it and whatever that job met before. Hence one run, files in
parallel processes, and `--shard i/n` jobs merged by key all give the same sample.

With `--mix`, each named pool has its own reservoir and quota. Eligibility (not empty,
`--min-chars`, `--max-chars`, parseable) never depends on the key, so skipping an
ineligible candidate keeps the sample uniform over eligible documents. A text that
occurs k times in the corpus has k keys and keeps the smallest, so duplicated texts are
proportionally more likely to be drawn, as in any sample of occurrences; each appears
at most once in the output.
"""

from __future__ import annotations

import hashlib
import heapq
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from ..errors import DataError
from ..recordio import display_name, iter_chunks
from ..records import new_record, rng_for
from .excerpt import excerpt_window
from .keys import KEY_LIMIT, file_seed, key_for, key_to_float, keys_for
from .sources import Source

TEXT_BATCH = 512  # plain-text documents handed to a worker at a time
CHUNK = 1 << 20  # bytes of decompressed text scanned at a time


def _coalesce(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Join small reads (a pipe gives 64 KiB at a time) into chunks of about CHUNK bytes,
    so the fixed cost per chunk is paid a few hundred times per GB, not thousands."""
    size = CHUNK
    parts: list[bytes] = []
    have = 0
    for chunk in chunks:
        parts.append(chunk)
        have += len(chunk)
        if have >= size:
            yield parts[0] if len(parts) == 1 else b"".join(parts)
            parts, have = [], 0
    if parts:
        yield b"".join(parts)


@dataclass(frozen=True)
class Options:
    n: int
    seed: int = 0
    text_field: str = "text"
    id_field: str | None = None
    min_chars: int = 0
    max_chars: int | None = None
    excerpt_chars: int = 4000
    excerpt_at: str = "random"
    skip_bad: bool = False


@dataclass
class Stats:
    files: int = 0
    docs: int = 0  # lines, rows or text files seen
    parsed: int = 0  # candidates actually parsed (key below the threshold)
    bad: int = 0
    empty: int = 0
    short: int = 0
    long: int = 0
    duplicate: int = 0
    first_bad: str = ""

    def add(self, other: Stats) -> None:
        for f in fields(self):
            if f.name == "first_bad":
                self.first_bad = self.first_bad or other.first_bad
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Reservoir:
    """The n entries with the smallest keys, at most one per document id."""

    def __init__(self, n: int):
        self.n = n
        self._heap: list[tuple[int, str, Any]] = []  # (-key, id, item): a max-heap on key
        self._by_id: dict[str, tuple[int, str, Any]] = {}

    @property
    def threshold(self) -> int:
        """A key must be below this to enter."""
        if self.n <= 0:
            return 0
        return -self._heap[0][0] if len(self._heap) >= self.n else KEY_LIMIT

    def offer(self, key: int, rid: str, make: Callable[[], Any]) -> str:
        """Returns "in", "out" (key too large) or "duplicate"."""
        if key >= self.threshold:
            return "out"
        old = self._by_id.get(rid)
        if old is not None:
            if -old[0] <= key:
                return "duplicate"
            self._heap.remove(old)  # a copy with a smaller key: rare, O(n) is fine
            heapq.heapify(self._heap)
        entry = (-key, rid, make())
        self._by_id[rid] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > self.n:
            gone = heapq.heappop(self._heap)
            del self._by_id[gone[1]]
        return "in" if old is None else "duplicate"

    def entries(self) -> list[tuple[int, str, Any]]:
        """(key, id, item), smallest key first."""
        return sorted((-k, rid, item) for k, rid, item in self._heap)


# --------------------------------------------------------------------------- scanning


def _field(rec: dict, path: str) -> Any:
    """rec["a"]["b"] for "a.b" (a literal key with dots wins); KeyError if absent."""
    if path in rec:
        return rec[path]
    cur: Any = rec
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise KeyError(path)
        cur = cur[part]
    return cur


class Scanner:
    """Reads sources of one pool into a reservoir, parsing only what could be sampled."""

    def __init__(
        self, opts: Options, reservoir: Reservoir, outside: Callable[[], int] | None = None
    ):
        self.opts, self.res = opts, reservoir
        self.outside = outside  # the best threshold known elsewhere (other processes)
        self.stats = Stats()

    def threshold(self) -> int:
        t = self.res.threshold
        return min(t, self.outside()) if self.outside is not None else t

    def scan(self, src: Source) -> None:
        self.stats.files += 1
        {"jsonl": self._scan_jsonl, "parquet": self._scan_parquet, "text": self._scan_text}[
            src.fmt
        ](src)

    # -- problems

    def _bad(self, problem: str, path: str, line: int | None) -> None:
        err = DataError(problem, display_name(path), line)
        if not self.opts.skip_bad:
            raise err
        self.stats.bad += 1
        self.stats.first_bad = self.stats.first_bad or str(err)

    # -- one candidate document

    def _consider(
        self,
        key: int,
        text: Any,
        src: Source,
        where: dict,
        loc: tuple[str, int | None],
        doc_id: Any = None,
    ) -> None:
        st, o = self.stats, self.opts
        if text is None:
            st.empty += 1
            return
        if not isinstance(text, str):
            self._bad(f"field {o.text_field!r} is a {type(text).__name__}, not a string", *loc)
            return
        total = len(text)
        if total == 0 or text.isspace():
            st.empty += 1
            return
        if total < o.min_chars:
            st.short += 1
            return
        if o.max_chars is not None and total > o.max_chars:
            st.long += 1
            return
        rid = (
            "doc-"
            + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()[
                :16
            ]
        )

        def make() -> tuple:
            # Only the window is kept, so memory stays bounded by n windows; the record
            # itself is built once, for the documents that end up in the sample.
            start, end = 0, total
            if total > o.excerpt_chars > 0:
                start, end = excerpt_window(
                    text, o.excerpt_chars, rng_for(o.seed, "excerpt", rid), o.excerpt_at
                )
            return (text[start:end], start, end, total, src, where, doc_id)

        if self.res.offer(key, rid, make) == "duplicate":
            st.duplicate += 1

    def _consider_json(self, key: int, line: bytes, src: Source, lineno: int, offset: int) -> None:
        self.stats.parsed += 1
        if not line.strip():
            self.stats.empty += 1
            return
        loc = (src.path, lineno)
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            self._bad(f"bad JSON at column {e.colno}: {e.msg}", *loc)
            return
        if type(rec) is not dict:
            self._bad("a corpus line must be a JSON object", *loc)
            return
        try:
            text = _field(rec, self.opts.text_field)
            doc_id = _field(rec, self.opts.id_field) if self.opts.id_field else None
        except KeyError as e:
            self._bad(
                f"missing field {e.args[0]!r} (choose it with --text-field / --id-field)", *loc
            )
            return
        self._consider(key, text, src, {"line": lineno, "offset": offset}, loc, doc_id)

    # -- formats

    def _scan_jsonl(self, src: Source) -> None:
        # The hot loop of a big corpus: per chunk one vectorised pass finds the newlines,
        # keys are computed in bulk, and only lines whose key is below the threshold are
        # ever sliced out and parsed.
        fseed = file_seed(self.opts.seed, src.key)
        base_line = 0  # lines finished before this chunk
        chunk_off = 0  # stream offset of this chunk's first byte
        head: list[bytes] = []  # the unfinished line carried over from earlier chunks
        for chunk in _coalesce(iter_chunks(src.path)):
            # Imported with the first chunk (then a dict lookup per multi-megabyte chunk):
            # an empty input never pays for numpy.
            import numpy as np

            size = len(chunk)
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            nl = len(ends)
            if nl == 0:
                head.append(chunk)
                chunk_off += size
                continue
            keys = keys_for(fseed, base_line + 1, nl)
            cand = np.flatnonzero(keys < self.threshold())
            # Smallest keys first: the threshold only falls, so the rest can be cut short.
            for c in cand[np.argsort(keys[cand], kind="stable")].tolist():
                key = int(keys[c])
                if key >= self.threshold():
                    break
                end = int(ends[c])
                if c:
                    start = int(ends[c - 1]) + 1
                    line, offset = chunk[start:end], chunk_off + start
                else:
                    line = b"".join(head) + chunk[:end]
                    offset = chunk_off - sum(map(len, head))
                self._consider_json(key, line, src, base_line + c + 1, offset)
            self.stats.docs += nl
            base_line += nl
            tail = int(ends[-1]) + 1
            head = [chunk[tail:]] if tail < size else []
            chunk_off += size
        if any(head):
            self.stats.docs += 1
            key = key_for(fseed, base_line + 1)
            if key < self.threshold():
                self._consider_json(
                    key, b"".join(head), src, base_line + 1, chunk_off - sum(map(len, head))
                )

    def _scan_parquet(self, src: Source) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(src.path)
        except (pa.ArrowInvalid, OSError) as e:
            raise DataError(f"not a readable Parquet file ({e})", src.path) from None
        names = pf.schema_arrow.names
        cols = [self.opts.text_field] + ([self.opts.id_field] if self.opts.id_field else [])
        for col in cols:
            if col not in names:
                raise DataError(f"missing field {col!r} (columns: {', '.join(names)})", src.path)
        fseed = file_seed(self.opts.seed, src.key)
        row0 = 0
        for g in range(pf.num_row_groups):
            nrows = pf.metadata.row_group(g).num_rows
            keys = keys_for(fseed, row0, nrows)
            cand = np.flatnonzero(keys < self.threshold())
            if cand.size:
                order = cand[np.argsort(keys[cand], kind="stable")]
                table = pf.read_row_group(g, columns=cols).take(pa.array(order))
                texts = table.column(0).to_pylist()
                ids = table.column(1).to_pylist() if self.opts.id_field else [None] * len(texts)
                for c, text, doc_id in zip(order.tolist(), texts, ids, strict=True):
                    key = int(keys[c])
                    if key >= self.threshold():
                        break
                    self.stats.parsed += 1
                    row = row0 + c
                    self._consider(
                        key, text, src, {"row": row}, (f"{src.path}: row {row}", None), doc_id
                    )
            self.stats.docs += nrows
            row0 += nrows

    def _scan_text(self, src: Source) -> None:
        self.stats.docs += 1
        key = key_for(file_seed(self.opts.seed, src.key), 0)
        if key >= self.threshold():
            return
        self.stats.parsed += 1
        data = b"".join(iter_chunks(src.path))
        if b"\0" in data:
            self._bad("binary file, not text (it has NUL bytes)", src.path, None)
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            self._bad(f"not UTF-8 text (bad byte at offset {e.start})", src.path, None)
            return
        self._consider(key, text, src, {}, (src.path, None))


# --------------------------------------------------------------------------- driving


def _record(key: int, rid: str, item: tuple, opts: Options, pool: str | None, quota: int) -> dict:
    text, start, end, total, src, where, doc_id = item
    source = {"path": display_name(src.path), "name": src.name, **where}
    if doc_id is not None:
        source["id"] = doc_id
    rec = new_record("doc", rid, text=text, chars=end - start, source=source)
    if (start, end) != (0, total):
        rec["excerpt"] = {"start": start, "end": end, "total_chars": total}
    rec["sample"] = {"seed": opts.seed, "key": key_to_float(key), "pool": pool, "n": quota}
    return rec


@dataclass
class Plan:
    sources: list[Source]
    quotas: dict[str | None, int]  # pool -> n; pool None = every source together
    mixed: bool = False
    pools: list[str | None] = field(init=False)

    def __post_init__(self) -> None:
        self.pools = list(self.quotas)

    def pool_of(self, src: Source) -> str | None:
        return src.name if self.mixed else None


def tasks_of(plan: Plan) -> list[list[Source]]:
    """One task per records file; plain-text documents in batches."""
    tasks, texts = [], []
    for src in sorted(plan.sources, key=lambda s: -s.size):
        if src.fmt == "text":
            texts.append(src)
        else:
            tasks.append([src])
    tasks += [texts[i : i + TEXT_BATCH] for i in range(0, len(texts), TEXT_BATCH)]
    return tasks


_worker: dict[str, Any] = {}


def _init_worker(opts: Options, plan: Plan, shared: Any) -> None:
    _worker.update(opts=opts, plan=plan, shared=shared)


def _run_task(task: list[Source]) -> tuple[str | None, list, Stats]:
    opts, plan, shared = _worker["opts"], _worker["plan"], _worker["shared"]
    pool = plan.pool_of(task[0])
    slot = plan.pools.index(pool)
    scanner = Scanner(opts, Reservoir(plan.quotas[pool]), lambda: shared[slot])
    for src in task:
        scanner.scan(src)
    return pool, scanner.res.entries(), scanner.stats


def sample(
    plan: Plan, opts: Options, jobs: int = 1, on_task: Callable[[int], None] | None = None
) -> tuple[list[dict], Stats]:
    """The sample as doc records sorted by key, and what the scan saw. `on_task(k)` is
    called as tasks (files, or batches of text files) finish, with how many finished."""
    reservoirs = {p: Reservoir(q) for p, q in plan.quotas.items()}
    stats = Stats()
    tasks = tasks_of(plan)
    jobs = max(1, min(jobs, len(tasks)))
    if jobs == 1 or any(s.path == "-" for s in plan.sources):
        scanners = {p: Scanner(opts, reservoirs[p]) for p in plan.quotas}
        for task in tasks:
            for src in task:
                scanners[plan.pool_of(src)].scan(src)
            if on_task:
                on_task(1)
        for sc in scanners.values():
            stats.add(sc.stats)
    else:
        # Workers share each pool's best threshold so far: a file read late skips as
        # much as it would in one process. Any stale value is still a valid bound.
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        ctx = multiprocessing.get_context("fork")
        shared = ctx.RawArray("q", [KEY_LIMIT] * len(plan.pools))
        with ProcessPoolExecutor(
            jobs, mp_context=ctx, initializer=_init_worker, initargs=(opts, plan, shared)
        ) as ex:
            pending = {ex.submit(_run_task, t) for t in tasks}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        pool, entries, st = fut.result()
                        res = reservoirs[pool]
                        for key, rid, item in entries:
                            if res.offer(key, rid, lambda item=item: item) == "duplicate":
                                stats.duplicate += 1
                        shared[plan.pools.index(pool)] = res.threshold
                        stats.add(st)
                        if on_task:
                            on_task(1)
            except BaseException:
                for fut in pending:  # a bad file ends the run without reading the rest
                    fut.cancel()
                raise
    out = [
        (k, rid, _record(k, rid, item, opts, p, res.n))
        for p, res in reservoirs.items()
        for k, rid, item in res.entries()
    ]
    out.sort(key=lambda e: (e[0], e[1]))
    return [rec for _, _, rec in out], stats


def merge(records: Iterable[dict], where: Callable[[], str]) -> list[dict]:
    """The exact sample of a whole corpus from the outputs of its `--shard` jobs."""
    reservoirs: dict[Any, Reservoir] = {}
    seeds: set[int] = set()
    for rec in records:
        s = rec.get("sample")
        if not isinstance(s, dict) or not {"key", "n", "seed"} <= s.keys():
            raise DataError(f"{where()}: not a sample record (no 'sample' field with key, n, seed)")
        seeds.add(s["seed"])
        if len(seeds) > 1:
            raise DataError(f"{where()}: samples drawn with different seeds cannot be merged")
        pool = s.get("pool")
        res = reservoirs.setdefault(pool, Reservoir(int(s["n"])))
        if res.n != int(s["n"]):
            raise DataError(f"{where()}: samples of pool {pool!r} ask for different sizes")
        res.offer(int(s["key"] * KEY_LIMIT), rec["id"], lambda rec=rec: rec)
    out = [e for r in reservoirs.values() for e in r.entries()]
    out.sort(key=lambda e: (e[0], e[1]))
    return [rec for _, _, rec in out]


def default_jobs() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
