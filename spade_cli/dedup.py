"""Duplicate detection for designer code: exact (normalised code) and near (shingled tokens).

A designer that is rewarded for regret will happily resubmit an environment that already
scored well, lightly disguised. Two checks catch that:

- **Exact**: the code is parsed, docstrings are removed, and every identifier the module
  itself *defines* (classes, functions, arguments, assigned names and attributes, import
  aliases) is replaced by a placeholder numbered in order of first appearance. The
  `ast.dump` of that tree (no line numbers) is hashed. Comments, blank lines, formatting,
  quoting style and consistent renaming all vanish; library names (`random.randint`,
  `len`) and literals stay, so two environments that differ in a constant, a word list or
  the library call they make are *not* exact duplicates. Code that does not parse falls
  back to its whitespace-collapsed text with comments removed.
- **Near**: the normalised code is tokenised with every defined identifier written as one
  token `_` (un-numbered, so inserting a new variable does not shift every later name) and
  string literals split into words; the token stream is cut into overlapping shingles of
  `SHINGLE` tokens. Two environments are near-duplicates when the Jaccard similarity of
  their shingle sets is at least the threshold (default 0.8). Candidate pairs come from
  MinHash locality-sensitive hashing (128 permutations in 32 bands of 4 rows: pairs above
  about 0.5 similarity collide with probability > 0.87); each candidate pair is then
  checked with the exact Jaccard of the stored sets, so the threshold is exact, only the
  recall below ~0.5 is probabilistic, and that is far below any useful threshold.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from collections.abc import Set
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from . import pyparse

if TYPE_CHECKING:
    import numpy as np

SHINGLE = 5
THRESHOLD = 0.8
NUM_PERM = 128
BANDS = 32
_PRIME = 4294967311  # smallest prime above 2**32: (a*x + b) stays below 2**64
_WORD = re.compile(r"\w+|[^\w\s]")


# --------------------------------------------------------------------------- normalise


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        # any bare string statement is a docstring or a comment in disguise
        kept = [
            s
            for s in body
            if not (
                isinstance(s, ast.Expr)
                and isinstance(s.value, ast.Constant)
                and isinstance(s.value.value, str)
            )
        ]
        node.body = kept or [ast.Pass()]


def _defined_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    # The contract's own names stay readable; renaming them would break the env anyway.
    return names - {"self", "cls", "reset", "step", "metadata", "__init__"}


def _rename(tree: ast.AST, defined: set[str], numbered: bool) -> None:
    mapping: dict[str, str] = {}

    def canon(name: str) -> str:
        if name not in defined:
            return name
        if not numbered:
            return "_"
        if name not in mapping:
            mapping[name] = f"_{len(mapping)}"
        return mapping[name]

    # ast.walk is breadth-first; numbering by a depth-first pre-order visit follows
    # source order, so the same program always numbers the same way.
    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = canon(node.name)
        elif isinstance(node, ast.arg):
            node.arg = canon(node.arg)
        elif isinstance(node, ast.Name):
            node.id = canon(node.id)
        elif isinstance(node, ast.Attribute):
            node.attr = canon(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            node.arg = canon(node.arg)
        elif isinstance(node, ast.alias) and node.asname:
            node.asname = canon(node.asname)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = [canon(n) for n in node.names]
        elif isinstance(node, ast.ExceptHandler) and node.name:
            node.name = canon(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)


def _fallback_text(code: str) -> str:
    lines = [re.sub(r"#.*$", "", ln).strip() for ln in code.splitlines()]
    return " ".join(ln for ln in lines if ln)


def _parse(code: str) -> ast.AST | None:
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    _strip_docstrings(tree)
    return tree


def normalize(code: str) -> str:
    """Canonical text of `code`: equal for reformatted or consistently renamed copies."""
    tree = _parse(code)
    if tree is None:
        return _fallback_text(code)
    _rename(tree, _defined_names(tree), numbered=True)
    return ast.dump(tree, annotate_fields=False)


_PLACEHOLDER = re.compile(r"_\d+")


def _tokens_of(tree: ast.AST) -> list[str]:
    """Token stream of a renamed tree: placeholders as `_`, strings split into words."""
    text = ast.unparse(tree)
    out: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                out.extend(_WORD.findall(tok.string))
            elif tok.type == tokenize.NAME:
                out.append("_" if _PLACEHOLDER.fullmatch(tok.string) else tok.string)
            elif tok.type in (tokenize.NUMBER, tokenize.OP):
                out.append(tok.string)
            elif tok.type == tokenize.INDENT:
                out.append("<in>")
            elif tok.type == tokenize.DEDENT:
                out.append("<de>")
    except (tokenize.TokenError, IndentationError):
        return _WORD.findall(text)
    return out


def _hash_text(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@lru_cache(maxsize=1024)
def fingerprint(code: str, size: int = SHINGLE) -> tuple[str, frozenset[int]]:
    """(exact key, shingle set) of `code`, from one parse. Cached: the same memory is
    fingerprinted by every stage and every prompt that reads it."""
    tree = _parse(code)
    toks: list[str] | None = None
    if tree is not None:
        try:
            _rename(tree, _defined_names(tree), numbered=True)
            key = _hash_text(ast.dump(tree, annotate_fields=False))
            toks = _tokens_of(tree)
        except (ValueError, RecursionError):
            tree = None
    if tree is None or toks is None:
        text = _fallback_text(code)
        key, toks = _hash_text(text), _WORD.findall(text)
    if len(toks) < size:
        toks = toks + ["<pad>"] * (size - len(toks))
    sh = set()
    for i in range(len(toks) - size + 1):
        h = hashlib.blake2b("\x1f".join(toks[i : i + size]).encode(), digest_size=4).digest()
        sh.add(int.from_bytes(h, "little"))
    return key, frozenset(sh)


def code_hash(code: str) -> str:
    """Hash of the normalised code (exact-duplicate key), 16 hex digits."""
    return fingerprint(code)[0]


def tokens(code: str) -> list[str]:
    """Token stream for shingling: defined names as `_`, strings split into words."""
    tree = _parse(code)
    if tree is None:
        return _WORD.findall(_fallback_text(code))
    _rename(tree, _defined_names(tree), numbered=True)
    return _tokens_of(tree)


def shingles(code: str, size: int = SHINGLE) -> frozenset[int]:
    """Set of 32-bit hashes of every run of `size` consecutive tokens."""
    return fingerprint(code, size)[1]


def jaccard(a: Set[int], b: Set[int]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# --------------------------------------------------------------------------- index


@lru_cache(maxsize=1)
def _permutations() -> tuple[np.ndarray, np.ndarray]:
    # numpy is imported on first use: commands that never compare code start faster.
    import numpy as np

    rng = np.random.default_rng(0x5ADE)  # fixed: signatures must agree across processes
    a = rng.integers(1, _PRIME, NUM_PERM, dtype=np.uint64)
    b = rng.integers(0, _PRIME, NUM_PERM, dtype=np.uint64)
    return a, b


def minhash(sh: Set[int]) -> np.ndarray:
    import numpy as np

    a, b = _permutations()
    x = np.fromiter(sh, dtype=np.uint64, count=len(sh))
    if x.size == 0:
        return np.zeros(NUM_PERM, dtype=np.uint64)
    return ((np.outer(x, a) + b) % np.uint64(_PRIME)).min(axis=0)


@dataclass
class Match:
    key: str  # id of the earlier entry (memory env id or candidate id)
    how: str  # "exact" | "near"
    similarity: float


@dataclass
class DedupIndex:
    """Exact and near-duplicate lookup over a growing set of environments.

    `find(code)` returns the best earlier match or None; `add(key, code)` makes code
    visible to later lookups. Use one index for memory plus the batch, adding each
    accepted candidate as it is accepted, so duplicates within a batch are caught too.
    """

    threshold: float = THRESHOLD
    shingle: int = SHINGLE
    exact: dict[str, str] = field(default_factory=dict)
    sets: dict[str, frozenset[int]] = field(default_factory=dict)
    buckets: list[dict[bytes, list[str]]] = field(
        default_factory=lambda: [{} for _ in range(BANDS)]
    )

    def __len__(self) -> int:
        return len(self.sets)

    def _bands(self, sig: np.ndarray) -> list[bytes]:
        rows = NUM_PERM // BANDS
        return [sig[i * rows : (i + 1) * rows].tobytes() for i in range(BANDS)]

    def find(self, code: str, exclude: set[str] | frozenset[str] = frozenset()) -> Match | None:
        h, sh = fingerprint(code, self.shingle)
        key = self.exact.get(h)
        if key is not None and key not in exclude:
            return Match(key, "exact", 1.0)
        if self.threshold > 1.0:
            return None
        seen: set[str] = set()
        for band, bucket in zip(self._bands(minhash(sh)), self.buckets, strict=True):
            seen.update(bucket.get(band, ()))
        best: Match | None = None
        for other in sorted(seen - set(exclude)):
            sim = jaccard(sh, self.sets[other])
            if sim >= self.threshold and (best is None or sim > best.similarity):
                best = Match(other, "near", sim)
        return best

    def add(self, key: str, code: str) -> None:
        h, sh = fingerprint(code, self.shingle)
        self.exact.setdefault(h, key)
        self.sets[key] = sh
        for band, bucket in zip(self._bands(minhash(sh)), self.buckets, strict=True):
            bucket.setdefault(band, []).append(key)
