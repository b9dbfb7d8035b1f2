"""Sampling priorities: a pseudo-random key per document, fixed by where it lives.

The sample is "the N documents with the smallest keys". A key is a pure function of
(seed, file, line or row), computed with splitmix64 from a per-file seed, so it does not
depend on which job reads the file, in which order, or what else it reads. A file is
named by its input's number and its path within that input (`sources.sampling_key`),
never by where the corpus lies, so a corpus moved or copied elsewhere gives the same
sample. That makes
every way of splitting the work give the same answer: a single run, `--shard i/n` jobs
merged by key, or files processed in parallel processes. Keys are also what lets the
sampler skip almost everything: a line whose key is above the current N-th smallest
can never be sampled, so it is counted but never parsed.

Keys are 53-bit integers (floats in [0, 1) in the output, exactly representable, so a
merge of written samples compares the same numbers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import stable_hash

if TYPE_CHECKING:
    import numpy as np

KEY_BITS = 53
KEY_LIMIT = 1 << KEY_BITS  # larger than every key: "the reservoir is not full yet"
_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB


def file_seed(seed: int, name: str) -> int:
    """The 64-bit stream seed of one input file (or text document) under one seed."""
    return int(stable_hash(seed, "sample-docs", name, n=16), 16)


def keys_for(fseed: int, start: int, count: int) -> np.ndarray:
    """Keys of the documents numbered start .. start+count-1 of a file (uint64 < 2**53)."""
    import numpy as np

    with np.errstate(over="ignore"):
        z = np.arange(start, start + count, dtype=np.uint64)
        z *= np.uint64(_GOLDEN)
        z += np.uint64(fseed)
        z ^= z >> np.uint64(30)
        z *= np.uint64(_C1)
        z ^= z >> np.uint64(27)
        z *= np.uint64(_C2)
        z ^= z >> np.uint64(31)
    return z >> np.uint64(64 - KEY_BITS)


def key_for(fseed: int, index: int) -> int:
    """The same function as keys_for, for one document."""
    z = (fseed + index * _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    z ^= z >> 31
    return z >> (64 - KEY_BITS)


def key_to_float(key: int) -> float:
    return key / KEY_LIMIT


def float_to_key(value: float) -> int:
    return int(value * KEY_LIMIT)
