"""spade-cat: concatenate, filter, shard and (de)compress record files."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from ..cli import (
    Config,
    Inputs,
    Limit,
    Output,
    Quiet,
    Shard,
    Verbose,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    select,
)
from ..errors import UsageError
from ..recordio import RecordReader

app = make_app(
    "Concatenate record files into one stream, optionally keeping one kind, one shard or "
    "the first N records. Converts between plain, gzip and zstd JSONL.\n\n"
    "Example: spade-cat round-001/*.zst --kind candidate --limit 5 | jq .id\n\n"
    "Merging the outputs of --shard jobs: spade-cat validated.shard-*.zst --order-like "
    "candidates.zst -o validated.zst writes them in the order of the stage's input, as one "
    "unsharded run would have.\n\n"
    "Importing a released pool: spade-cat --from-dir pool/ -o pool.jsonl.zst reads every "
    "environment file under pool/ (checked against its SHA256SUMS) as a candidate record.\n\n"
    "Reading an export back: spade-cat --from pool-openenv/ -o pool.zst gives the records "
    "spade-export wrote there."
)


@app.command()
def cat(
    inputs: Inputs = None,
    output: Output = "-",
    kind: Annotated[
        str | None, typer.Option("--kind", help="Keep only records of this kind.")
    ] = None,
    order_like: Annotated[
        list[str] | None,
        typer.Option(
            "--order-like",
            help="Reference record files (repeatable, read in order): write the "
            "records in the order of the reference record each has as its id or first parent "
            "(merges --shard outputs back into input order).",
        ),
    ] = None,
    from_dir: Annotated[
        str | None,
        typer.Option(
            "--from-dir",
            help="Import a directory of environment files (recursively) as candidate "
            "records of origin `fixed`, with path and skill; a SHA256SUMS, manifest.csv or "
            "manifest.tsv in it (or --manifest) is checked first (exit 3 on a differing file).",
        ),
    ] = None,
    from_export: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Read a spade-export directory (any format: openenv, verifiers, harbor) "
            "back as the candidate records it was exported from, code from each env.py.",
        ),
    ] = None,
    manifest: Annotated[
        str | None,
        typer.Option(
            "--manifest",
            help="Manifest of --from-dir (sha256sum output, or CSV/TSV with path, "
            "sha256 and optionally skill columns).",
        ),
    ] = None,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    if manifest is not None and from_dir is None:
        raise UsageError("--manifest needs --from-dir")
    reader = RecordReader(inputs or ([] if from_dir or from_export else ["-"]))
    records = (r for r in reader if kind is None or r.get("kind") == kind)
    if from_dir is not None:
        from ..envs.pool_import import pool_from_dir

        pool = pool_from_dir(from_dir, manifest)
        log.info("%s: %d environment files", from_dir, len(pool))
        records = itertools.chain(records, (r for r in pool if kind in (None, "candidate")))
    if from_export is not None:
        from ..export import read_pool

        pool = read_pool(Path(from_export))
        log.info("%s: %d exported environments", from_export, len(pool))
        records = itertools.chain(records, (r for r in pool if kind in (None, r.get("kind"))))
    if order_like:
        records = iter(_in_order_of(order_like, records, reader))
    with open_output(output, zstd) as out:
        n = out.write_all(select(records, shard, limit))
    log.debug("wrote %d records", n)


def _in_order_of(paths: list[str], records: Iterable[dict], reader: RecordReader) -> list[dict]:
    """`records` sorted by the position of their own id, or else their first parent's,
    in the reference files; stable, so a flat-map's outputs keep their order."""
    position: dict[str, int] = {}
    for rec in RecordReader(paths, required=("id",)):
        position.setdefault(str(rec["id"]), len(position))
    keyed = []
    for rec in records:
        key = position.get(str(rec.get("id")))
        if key is None:
            parents = rec.get("parents") or []
            key = position.get(str(parents[0])) if parents else None
        if key is None:
            raise reader.error(
                f"record {rec.get('id')!r} is in no --order-like file (by id or parent)"
            )
        keyed.append((key, len(keyed), rec))
    return [rec for *_, rec in sorted(keyed, key=lambda t: t[:2])]


main = entry(app, "spade-cat")
