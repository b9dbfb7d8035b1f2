"""Streaming JSONL record I/O shared by every command.

Reading: one or many files or `-` (stdin). Compression is detected from the first bytes
(zstd `28 b5 2f fd`, gzip `1f 8b`, anything else is plain), never from the file name.
zstd files are decoded by the `zstd` program in a child process when it is installed
(decoding and JSON parsing then overlap on two cores), else in-process by the zstandard
library; both report a stream cut off mid-frame as an error.

Writing: a path ending in `.zst` is written zstd-compressed, `.gz` gzip, anything else
plain. Standard output is plain JSONL unless `compress=True` (`--zstd`): `cmd | jq` works
directly, and `cmd | zstdcat | jq` works too because zstdcat passes plain text through.
Files are written to a hidden temporary name beside the target and renamed into place
only when the command succeeds, so a killed command never leaves a partial file under
the final name.
"""

from __future__ import annotations

import fcntl
import gzip
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import orjson
import zstandard

from . import SCHEMA_VERSION
from .errors import DataError, PipeClosed

CHUNK = 1 << 20
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
# Set SPADE_PY_ZSTD=1 to decode in-process even where the zstd program exists.
ZSTD_PROGRAM = shutil.which("zstd") if os.environ.get("SPADE_PY_ZSTD", "") in ("", "0") else None

Record = dict[str, Any]


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


# --------------------------------------------------------------------------- reading


def _open_raw(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb", buffering=CHUNK)
    except FileNotFoundError:
        raise DataError("no such file", path) from None
    except IsADirectoryError:
        raise DataError("is a directory, not a records file", path) from None
    except PermissionError:
        raise DataError("permission denied", path) from None


def _peek(fh: BinaryIO, n: int) -> bytes:
    peek = getattr(fh, "peek", None)
    if peek is not None:
        return peek(n)[:n]
    head = fh.read(n)
    fh.seek(0)
    return head


def _plain_chunks(fh: BinaryIO) -> Iterator[bytes]:
    while chunk := fh.read(CHUNK):
        yield chunk


def _gzip_chunks(fh: BinaryIO, path: str) -> Iterator[bytes]:
    try:
        with gzip.GzipFile(fileobj=fh) as gz:
            while chunk := gz.read(CHUNK):
                yield chunk
    except (EOFError, gzip.BadGzipFile, OSError) as e:
        raise DataError(f"corrupt or truncated gzip stream ({e})", path) from None


def _zstd_chunks(fh: BinaryIO, path: str) -> Iterator[bytes]:
    # decompressobj (unlike stream_reader) lets us notice a frame cut off mid-way:
    # a truncated .zst must be an error, not a silently shorter corpus.
    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    mid_frame = False
    try:
        while raw := fh.read(CHUNK):
            while raw:
                out = dobj.decompress(raw)
                mid_frame = True
                if out:
                    yield out
                if dobj.eof:
                    raw, mid_frame = dobj.unused_data, False
                    dobj = dctx.decompressobj()
                else:
                    raw = b""
    except zstandard.ZstdError as e:
        raise DataError(f"corrupt zstd stream ({e})", path) from None
    if mid_frame:
        raise DataError("truncated zstd stream (the file ends mid-frame)", path)


def _zstd_process_chunks(path: str) -> Iterator[bytes]:
    """Decompress with the `zstd` program: the Python codec holds the GIL while it
    works, so a separate process is what lets decoding and parsing use two cores."""
    proc = subprocess.Popen(
        ["zstd", "-dcq", "--", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:  # a 1 MiB pipe: a quarter of the reads and wake-ups of the default 64 KiB
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, CHUNK)
    except (AttributeError, OSError):  # not Linux, or above this user's pipe-max-size
        pass
    try:
        while chunk := proc.stdout.read(CHUNK):
            yield chunk
        err = proc.stderr.read().decode(errors="replace").strip()
        if proc.wait() != 0:
            detail = err.splitlines()[-1] if err else f"zstd exited with {proc.returncode}"
            if "premature end" in err or "truncated" in err:
                raise DataError(f"truncated zstd stream ({detail})", path)
            raise DataError(f"corrupt zstd stream ({detail})", path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _in_background(chunks: Iterator[bytes], depth: int = 8) -> Iterator[bytes]:
    """Run a chunk producer in a thread; exceptions are re-raised in the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for chunk in chunks:
                if stop.is_set():
                    return
                q.put(chunk)
            q.put(done)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        while (item := q.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def iter_chunks(path: str) -> Iterator[bytes]:
    """Decompressed bytes of one input, in chunks of about 1 MiB."""
    fh = _open_raw(path)
    try:
        head = _peek(fh, 4)
        if head.startswith(ZSTD_MAGIC) and path != "-" and ZSTD_PROGRAM:
            fh.close()
            yield from _zstd_process_chunks(path)
        elif head.startswith(ZSTD_MAGIC):
            yield from _in_background(_zstd_chunks(fh, path))
        elif head.startswith(GZIP_MAGIC):
            yield from _in_background(_gzip_chunks(fh, path))
        else:
            yield from _plain_chunks(fh)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def iter_lines(path: str) -> Iterator[tuple[int, int, bytes]]:
    """(line number from 1, byte offset in the decompressed stream, line without newline)."""
    lineno, offset, rest = 0, 0, b""
    for chunk in iter_chunks(path):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            lineno += 1
            yield lineno, offset, line
            offset += len(line) + 1
    if rest:
        yield lineno + 1, offset, rest


class RecordReader:
    """Iterate JSON records of one or many inputs, checking kind and required fields.

    `path` and `line` always name the record last yielded, so a stage that finds a
    problem later can still report `FILE:LINE`. With `skip_bad`, unparsable lines are
    counted in `bad` instead of raising.
    """

    def __init__(
        self,
        paths: Iterable[str],
        kind: str | tuple[str, ...] | None = None,
        required: Iterable[str] = (),
        skip_bad: bool = False,
    ):
        self.paths = list(paths) or ["-"]
        self.kinds = (kind,) if isinstance(kind, str) else kind
        self.required = tuple(required)
        self.skip_bad = skip_bad
        self.path = ""
        self.line = 0
        self.bad = 0

    def error(self, problem: str) -> DataError:
        return DataError(problem, display_name(self.path), self.line)

    def __iter__(self) -> Iterator[Record]:
        for path in self.paths:
            self.path = path
            lineno = 0
            rest = b""
            for chunk in iter_chunks(path):
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                yield from self._parse(lines, lineno)
                lineno += len(lines)
            if rest:
                yield from self._parse([rest], lineno)

    def _parse(self, lines: list[bytes], lineno: int) -> Iterator[Record]:
        # The hot loop of every command: keep it lean (no copies, no calls when possible).
        loads = orjson.loads
        check = self._check if (self.kinds is not None or self.required) else None
        for raw in lines:
            lineno += 1
            try:
                rec = loads(raw)
            except orjson.JSONDecodeError as e:
                if not raw.strip():
                    continue
                self.line = lineno
                if self.skip_bad:
                    self.bad += 1
                    continue
                raise self.error(f"bad JSON at column {e.colno}: {e.msg}") from None
            self.line = lineno
            if type(rec) is not dict:
                if self.skip_bad:
                    self.bad += 1
                    continue
                raise self.error("a record must be a JSON object")
            if "v" in rec and rec["v"] != SCHEMA_VERSION:
                # A record of another schema (a newer spade's) is refused, not misread.
                if self.skip_bad:
                    self.bad += 1
                    continue
                raise self.error(
                    f"schema version {rec['v']!r}, but this spade reads version "
                    f"{SCHEMA_VERSION} records"
                )
            if check is not None:
                check(rec)
            yield rec

    def _check(self, rec: Record) -> None:
        if self.kinds is not None and rec.get("kind") not in self.kinds:
            want = " or ".join(repr(k) for k in self.kinds)
            raise self.error(f"expected a {want} record, got kind {rec.get('kind')!r}")
        for field in self.required:
            if field not in rec:
                raise self.error(f"missing field {field!r}")


def read_records(paths: Iterable[str], **kwargs: Any) -> RecordReader:
    return RecordReader(paths, **kwargs)


# --------------------------------------------------------------------------- writing


class RecordWriter:
    """Write records as JSONL to a file (atomically) or to stdout.

    Use as a context manager: the file appears under its final name only if the block
    ends without an exception; otherwise the temporary file is removed.
    """

    FLUSH_BYTES = 1 << 20
    FLUSH_SECONDS = 0.5  # stdout: downstream stages of a pipe see records promptly

    def __init__(self, path: str = "-", compress: bool | None = None, level: int = 3):
        self.path = path
        self.count = 0
        self._buf: list[bytes] = []
        self._size = 0
        self._last_flush = time.monotonic()
        self._tmp: str | None = None
        self._raw: BinaryIO
        if path == "-":
            self._raw = sys.stdout.buffer
            use_zstd, use_gzip = bool(compress), False
        else:
            directory = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(directory):
                raise DataError("output directory does not exist", path)
            base = os.path.basename(path)
            self._tmp = os.path.join(directory, f".{base}.partial-{os.getpid()}")
            self._raw = open(self._tmp, "wb")
            use_zstd = path.endswith(".zst") or (compress is True and not path.endswith(".gz"))
            use_gzip = path.endswith(".gz")
        self._sink: Any = self._raw
        if use_zstd:
            cctx = zstandard.ZstdCompressor(level=level, threads=-1)
            self._sink = cctx.stream_writer(self._raw, closefd=False)
        elif use_gzip:
            self._sink = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)

    def write(self, rec: Record) -> None:
        self.write_line(orjson.dumps(rec))

    def write_line(self, line: bytes) -> None:
        self._buf.append(line)
        self._buf.append(b"\n")
        self._size += len(line) + 1
        self.count += 1
        if self._size >= self.FLUSH_BYTES or (
            self._tmp is None and time.monotonic() - self._last_flush > self.FLUSH_SECONDS
        ):
            self.flush()

    def write_all(self, records: Iterable[Record]) -> int:
        for rec in records:
            self.write(rec)
        return self.count

    def flush(self) -> None:
        data = b"".join(self._buf)
        self._buf, self._size = [], 0
        self._last_flush = time.monotonic()
        try:
            self._sink.write(data)
            if self._tmp is None:
                if self._sink is not self._raw:
                    self._sink.flush(zstandard.FLUSH_BLOCK)
                self._raw.flush()
        except BrokenPipeError:
            raise PipeClosed() from None

    def close(self) -> None:
        """Finish the stream and, for a file, move it under its final name."""
        self.flush()
        try:
            if self._sink is not self._raw:
                if isinstance(self._sink, gzip.GzipFile):
                    self._sink.close()
                else:
                    self._sink.flush(zstandard.FLUSH_FRAME)
            self._raw.flush()
        except BrokenPipeError:
            raise PipeClosed() from None
        if self._tmp is not None:
            os.fsync(self._raw.fileno())
            self._raw.close()
            os.replace(self._tmp, self.path)
            self._tmp = None

    def abort(self) -> None:
        if self._tmp is not None:
            try:
                self._raw.close()
            finally:
                if os.path.exists(self._tmp):
                    os.unlink(self._tmp)
                self._tmp = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_records(path: str, records: Iterable[Record], compress: bool | None = None) -> int:
    """Write all records atomically; returns how many were written."""
    with RecordWriter(path, compress=compress) as w:
        return w.write_all(records)


def dumps(rec: Record) -> str:
    return orjson.dumps(rec).decode()


def load_all(path: str, **kwargs: Any) -> list[Record]:
    return list(RecordReader([path], **kwargs))


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write a small file (JSON, TOML, PNG) atomically."""
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.partial-{os.getpid()}"
    )
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _writer_alive(pid: int, partial: str) -> bool:
    """Whether process `pid` may still be writing `partial`: it runs (a zombie, killed
    but not yet reaped, answers signals but writes nothing), and it started before the
    file was last written (a later process has only been given a dead writer's PID
    again)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's, and alive
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):  # field 3: state
            return False
        ticks = int(fields[19])  # field 22: starttime
        with open("/proc/stat") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
        return started <= os.stat(partial).st_mtime + 1.0  # btime has whole seconds
    except (OSError, ValueError, IndexError, StopIteration):
        return True  # no /proc to ask: keep the file


def remove_dead_partials(path: str | os.PathLike) -> list[str]:
    """Delete what killed writers of `path` left behind: `.NAME.partial-PID` files of a
    PID no longer running on this machine (a SIGKILL gives a writer no chance to clean
    up; a writer still alive keeps its file)."""
    path = os.fspath(path)
    directory, base = os.path.split(os.path.abspath(path))
    prefix = f".{base}.partial-"
    gone = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return gone
    for name in names:
        pid = name[len(prefix) :]
        if not (name.startswith(prefix) and pid.isdigit()):
            continue
        if _writer_alive(int(pid), os.path.join(directory, name)):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            gone.append(name)
        except FileNotFoundError:
            pass
    return gone


__all__ = [
    "Record",
    "RecordReader",
    "RecordWriter",
    "atomic_write_bytes",
    "remove_dead_partials",
    "display_name",
    "dumps",
    "iter_chunks",
    "iter_lines",
    "load_all",
    "read_records",
    "write_records",
]
