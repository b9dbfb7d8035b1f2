"""Turning command-line inputs into a list of corpus sources.

An input is a file, a glob or a directory, optionally labelled `NAME=PATH` (the label
names the source in `--mix` and in each record's `source.name`). Directories are walked
recursively in sorted order, hidden entries skipped. Each file's format comes from its
name unless `--format` says otherwise:

- `.parquet` -> Parquet, one document per row;
- `.jsonl`, `.ndjson`, `.json`, optionally followed by `.zst`, `.zstd` or `.gz`, and a bare
  `.zst` / `.zstd` / `.gz` -> JSON lines, one document per line (compression is detected
  from the bytes, not the name);
- anything else -> a plain-text document, one per file.

A directory that holds records files (JSONL or Parquet) is read as a corpus of those
alone; only a directory without any is a directory of plain-text documents.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from dataclasses import dataclass

from ..errors import DataError, UsageError

log = logging.getLogger("spade")

FORMATS = ("auto", "jsonl", "parquet", "text")
_LABEL = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.+)$")
_COMPRESSED = (".zst", ".zstd", ".gz")


@dataclass(frozen=True)
class Source:
    path: str  # as read
    fmt: str  # "jsonl" | "parquet" | "text"
    name: str  # the label of the input it came from
    size: int = 0  # bytes on disk, to schedule big files first
    key: str = ""  # what its sampling keys derive from (`sampling_key`)


def sampling_key(index: int, path: str, root: str | None) -> str:
    """The name a file's sampling keys derive from: the number of the input it came from
    and its path relative to that input (`root`: the directory, or a glob's directory; a
    file input is its own name). Not the path itself, so the same corpus gives the same
    sample wherever it lies, and two inputs never share keys."""
    rel = os.path.basename(path) if root is None else os.path.relpath(path, root)
    return f"{index}:{rel}"


def _glob_root(pattern: str) -> str:
    """The directory above a glob's first wildcard."""
    fixed = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    return os.path.dirname(fixed) or "."


def detect_format(path: str) -> str:
    low = path.lower()
    for ext in _COMPRESSED:
        if low.endswith(ext):
            stem = low[: -len(ext)]
            return "parquet" if stem.endswith(".parquet") else "jsonl"
    if low.endswith(".parquet"):
        return "parquet"
    if low.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "text"


def split_label(arg: str) -> tuple[str | None, str]:
    """`web=data/cc/*.zst` -> ("web", "data/cc/*.zst"); a path that exists wins."""
    m = _LABEL.match(arg)
    if m and not os.path.exists(arg):
        return m.group(1), m.group(2)
    return None, arg


def _walk(root: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if not f.startswith("."))
    return out


def _walk_corpus(root: str, fmt: str) -> list[str]:
    """The files of a directory input. One that holds records files (JSONL, Parquet) is
    a corpus of those: its README, LICENSE or checksum files are not documents."""
    paths = _walk(root)
    records = [p for p in paths if detect_format(p) != "text"]
    if fmt != "auto" or not records:
        return paths
    if len(records) < len(paths):
        log.info(
            "%s: reading its %d records files, ignoring %d other files",
            root,
            len(records),
            len(paths) - len(records),
        )
    return records


def _label_of(path: str) -> str:
    base = os.path.basename(os.path.normpath(path)) or path
    return base.split(".")[0] or base


def expand_inputs(args: list[str], fmt: str = "auto") -> list[Source]:
    """All sources of the given inputs, in argument order, each file once."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    sources: list[Source] = []
    seen: set[str] = set()
    for index, arg in enumerate(args or ["-"]):
        label, pattern = split_label(arg)
        root: str | None = None
        if pattern == "-":
            paths = ["-"]
        elif os.path.isdir(pattern):
            paths, root = _walk_corpus(pattern, fmt), pattern
        elif os.path.exists(pattern):
            paths = [pattern]
        elif glob.has_magic(pattern):
            root = _glob_root(pattern)
            paths = []
            for p in sorted(glob.glob(pattern, recursive=True)):
                paths.extend(_walk_corpus(p, fmt) if os.path.isdir(p) else [p])
            if not paths:
                raise DataError("no files match this pattern", pattern)
        else:
            raise DataError("no such file or directory", pattern)
        name = label or (
            "<stdin>" if pattern == "-" else _label_of(pattern.split("*")[0] or pattern)
        )
        for p in paths:
            p = p if p == "-" else os.path.normpath(p)
            if p in seen:
                continue
            seen.add(p)
            kind = (
                "jsonl"
                if p == "-" and fmt == "auto"
                else (detect_format(p) if fmt == "auto" else fmt)
            )
            size = 0 if p == "-" else os.path.getsize(p)
            sources.append(Source(p, kind, name, size, sampling_key(index, p, root)))
    return sources


def parse_mix(spec: str) -> dict[str, float]:
    """`web=0.7,code=0.3` -> {"web": 0.7, "code": 0.3}."""
    weights: dict[str, float] = {}
    for part in spec.split(","):
        name, eq, value = part.strip().partition("=")
        try:
            w = float(value)
        except ValueError:
            w = -1.0
        if not eq or not name or w <= 0 or name in weights:
            raise UsageError(
                f"--mix must look like name=weight,name=weight with weights > 0, got {spec!r}"
            )
        weights[name] = w
    return weights


def quotas(n: int, weights: dict[str, float]) -> dict[str, int]:
    """Split n documents by weight, rounding by largest remainder so they sum to n."""
    total = sum(weights.values())
    exact = {k: n * w / total for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    by_remainder = sorted(weights, key=lambda k: (-(exact[k] - out[k]), list(weights).index(k)))
    for k in by_remainder[: n - sum(out.values())]:
        out[k] += 1
    return out
