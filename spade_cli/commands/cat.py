"""spade-cat: concatenate, filter, shard and (de)compress record files."""

from __future__ import annotations

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
from ..recordio import RecordReader

app = make_app(
    "Concatenate record files into one stream, optionally keeping one kind, one shard or "
    "the first N records. Converts between plain, gzip and zstd JSONL.\n\n"
    "Example: spade-cat round-001/*.zst --kind candidate --limit 5 | jq .id"
)


@app.command()
def cat(
    inputs: Inputs = None,
    output: Output = "-",
    kind: Annotated[str | None, typer.Option("--kind", help="Keep only records of this kind.")] = None,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    reader = RecordReader(inputs or ["-"])
    records = (r for r in reader if kind is None or r.get("kind") == kind)
    with open_output(output, zstd) as out:
        n = out.write_all(select(records, shard, limit))
    log.debug("wrote %d records", n)


main = entry(app, "spade-cat")
