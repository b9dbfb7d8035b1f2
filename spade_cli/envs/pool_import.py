"""A directory of environment files as a fixed pool: `spade-cat --from-dir DIR`.

Released pools (the authors' static pool, the environments a SPADE run generated) are
directories of `.py` files, one environment each, with per-file SHA-256 digests. Every
`.py` file under DIR (recursively; names starting with `_` or `.` skipped) becomes a
`candidate` record of origin `fixed`, ready for spade-validate and then spade-rollout,
spade-eval --suite FILE or the loop's fixed-pool baseline:

    {"kind": "candidate", "id": "fixed-<hash>", "origin": "fixed", "skill", "path",
     "sha256", "env": {"code", "name", "summary", "max_turns", "contract"}, ...}

The skill is a manifest's where one gives it, else the first directory under DIR
(`games/maze.py` -> `games`; a file directly in DIR has skill ""). Nothing is executed:
name and max_turns are read statically (validation reads them for real).

Manifest: DIR/SHA256SUMS or DIR/checksums.sha256 (`sha256sum` output: `HEX  PATH` or
`HEX *PATH`; the authors' released pool ships the latter), a CSV/TSV file (DIR/manifest.csv,
DIR/manifest.tsv) whose header names the columns `path` and `sha256` (and optionally
`skill`), or DIR/manifest.jsonl (one JSON object per environment: its path under `path`,
`file`, `filename` or `game_file`, optionally `sha256` and its skill under `skill`,
`skill_name`, `target_skill` or `category`), or --manifest FILE of any of these forms.
With a manifest, exactly the `.py` files it lists are imported, each checked: a missing
file or one whose digest differs is a DataError naming it (exit 3). Where checksums and
manifest.jsonl both exist, the checksums list the files and manifest.jsonl gives each one's
skill (matched by path, else by file name).
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
from pathlib import Path

from .. import pyparse
from ..errors import DataError
from ..records import make_id, new_record
from ..sandbox.published import PUBLISHED_MAX_TURNS
from . import module_summary
from .contracts import detect_contract
from .library import _literal_metadata

MANIFEST_NAMES = (
    "SHA256SUMS",
    "checksums.sha256",
    "manifest.csv",
    "manifest.tsv",
    "manifest.jsonl",
)
SKILLS_FILE = "manifest.jsonl"
PATH_KEYS = ("path", "file", "filename", "game_file")
SKILL_KEYS = ("skill", "skill_name", "target_skill", "category")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_jsonl_manifest(path: Path) -> dict[str, dict]:
    """relative path -> {"sha256"?, "skill"?} of a manifest.jsonl."""
    out: dict[str, dict] = {}
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise DataError(f"{path}:{n}: not JSON ({e})") from None
        rel = next(
            (row[k] for k in PATH_KEYS if isinstance(row, dict) and isinstance(row.get(k), str)),
            None,
        )
        if rel is None:
            raise DataError(
                f"{path}:{n}: a row needs the environment's path (one of {', '.join(PATH_KEYS)})"
            )
        entry = {}
        skill = next((row[k] for k in SKILL_KEYS if isinstance(row.get(k), str) and row[k]), None)
        if skill:
            entry["skill"] = skill
        digest = row.get("sha256")
        if isinstance(digest, str) and len(digest) == 64:
            entry["sha256"] = digest.lower()
        out[rel] = entry
    return out


def read_manifest(path: Path) -> dict[str, dict]:
    """relative path -> {"sha256"?, "skill"?} of a manifest file."""
    if path.suffix == ".jsonl":
        return read_jsonl_manifest(path)
    text = path.read_text()
    first = text.splitlines()[0] if text.strip() else ""
    header = [h.strip().lower() for h in first.replace("\t", ",").split(",")]
    out: dict[str, dict] = {}
    if "path" in header and "sha256" in header:
        delim = "\t" if "\t" in first else ","
        for n, row in enumerate(csv.DictReader(io.StringIO(text), delimiter=delim), start=2):
            row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
            if not row.get("path") or len(row.get("sha256", "")) != 64:
                raise DataError(f"{path}:{n}: a row needs a path and a 64-digit sha256")
            out[row["path"]] = {
                "sha256": row["sha256"].lower(),
                **({"skill": row["skill"]} if row.get("skill") else {}),
            }
        return out
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, rest = line.partition(" ")
        name = rest[1:] if rest.startswith((" ", "*")) else rest
        if len(digest) != 64 or not name:
            raise DataError(f"{path}:{n}: expected 'SHA256  PATH' (sha256sum output)")
        out[name] = {"sha256": digest.lower()}
    return out


def _static_name(code: str, fallback: str) -> tuple[str, int | None]:
    """(class name or metadata name, max_turns) without running anything."""
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return fallback, None
    meta = _literal_metadata(tree)
    if meta.get("name"):
        turns = meta.get("max_turns")
        return str(meta["name"]), turns if isinstance(turns, int) else None
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args.args[len(item.args.args) - len(item.args.defaults) :]
                    for a, d in zip(args, item.args.defaults, strict=True):
                        if (
                            a.arg == "max_turns"
                            and isinstance(d, ast.Constant)
                            and isinstance(d.value, int)
                        ):
                            return node.name, d.value
            if {"reset", "step"} <= {i.name for i in node.body if isinstance(i, ast.FunctionDef)}:
                return node.name, None
    return fallback, None


def _files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*.py")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    )


def pool_from_dir(
    root: str | Path, manifest: str | Path | None = None, round: int = 0
) -> list[dict]:
    """The candidate records of every environment file under `root` (see the module)."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: not a directory")
    if manifest is None:
        manifest = next((root / n for n in MANIFEST_NAMES if (root / n).is_file()), None)
    listed = read_manifest(Path(manifest)) if manifest is not None else None
    skills = _skills(root)
    if listed is not None:
        paths = []
        for rel, entry in listed.items():
            if not rel.endswith(".py"):
                continue  # a checksum of the manifest, a README, ...
            path = root / rel
            if not path.is_file():
                raise DataError(f"{path}: listed in {manifest} but missing")
            got = _sha256(path)
            if entry.get("sha256", got) != got:
                raise DataError(
                    f"{path}: SHA-256 {got[:16]}... differs from {manifest} "
                    f"({entry['sha256'][:16]}...): the file was changed or damaged"
                )
            paths.append(path)
    else:
        paths = _files(root)
    recs = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        code = path.read_text()
        digest = _sha256(path)
        parts = rel.split("/")
        skill = (
            (listed or {}).get(rel, {}).get("skill")
            or skills.get(rel)
            or skills.get(path.name)
            or (parts[0] if len(parts) > 1 else "")
        )
        name, turns = _static_name(code, path.stem)
        contract = detect_contract(code)
        if contract == "published":  # the release's loader forces its budget on every class
            turns = PUBLISHED_MAX_TURNS
        rid = make_id("fixed", rel, digest)
        env = {
            "code": code,
            "name": name,
            "summary": module_summary(code) or name,
            "max_turns": turns,
            "contract": contract,
        }
        recs.append(
            new_record(
                "candidate",
                rid,
                [],
                origin="fixed",
                round=round,
                group=rid,
                doc=None,
                design=None,
                env=env,
                skill=skill,
                family=skill,
                path=str(path),
                sha256=digest,
            )
        )
    return recs


def _skills(root: Path) -> dict[str, str]:
    """path and file name -> skill, from DIR/manifest.jsonl beside the checksums."""
    file = root / SKILLS_FILE
    rows = read_jsonl_manifest(file) if file.is_file() else {}
    out = {}
    for rel, entry in rows.items():
        if entry.get("skill"):
            out[rel] = entry["skill"]
            out.setdefault(Path(rel).name, entry["skill"])
    return out


def is_released_pool(root: str | Path) -> bool:
    """Whether a directory is read as an imported pool rather than as an example library
    (`*.py` files of our contract directly in it): it has a manifest, environment files
    in subdirectories, or environments of the published contract."""
    root = Path(root)
    if any((root / n).is_file() for n in MANIFEST_NAMES):
        return True
    files = _files(root)
    if any(p.parent != root for p in files):
        return True
    return any(detect_contract(p.read_text()) == "published" for p in files)
