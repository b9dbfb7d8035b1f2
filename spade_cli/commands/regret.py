"""spade-regret: score every candidate (regret, designer reward) and update the memory."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer

from .. import memory
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
from ..dedup import THRESHOLD
from ..errors import UsageError
from ..recordio import RecordReader, atomic_write_bytes
from ..regret import (
    DEFAULT_INVALID_PENALTY,
    ESTIMATORS,
    ScoreConfig,
    Scorer,
    merge_into_memory,
    summarize,
    summary_lines,
)

app = make_app(
    "Score candidates: regret of the agent on each valid environment (hinted minus unhinted "
    "return, or another --estimator) and the designer's reward (clipped regret; a penalty "
    "for invalid designs and duplicates). Every candidate leaves with a `score`. With "
    "--memory, accepted environments (valid, not duplicates of memory or of the batch) are "
    "added to the memory file atomically, and replayed environments get fresh scores.\n\n"
    "Example: spade-rollout valid.zst --model M | spade-regret --memory memory.jsonl.zst -o scored.zst"
)


def parse_clip(text: str) -> tuple[float, float] | None:
    if text.strip().lower() in ("none", "off", ""):
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--clip must be LO,HI (for example 0,1) or none, got {text!r}") from None
    if lo > hi:
        raise UsageError(f"--clip {text}: LO must not exceed HI")
    return lo, hi


@app.command()
def regret(
    inputs: Inputs = None,
    output: Output = "-",
    estimator: Annotated[
        str, typer.Option("--estimator", "-e", help=f"Regret estimator: {', '.join(ESTIMATORS)} (README).")
    ] = "mean-gap",
    invalid_penalty: Annotated[
        float, typer.Option("--invalid-penalty", help="Designer reward of an invalid design.")
    ] = DEFAULT_INVALID_PENALTY,
    duplicate_penalty: Annotated[
        float | None,
        typer.Option("--duplicate-penalty", help="Designer reward of a duplicate [default: the invalid penalty]."),
    ] = None,
    clip: Annotated[
        str, typer.Option("--clip", help="Clip the regret to LO,HI for the designer reward; `none` keeps it raw.")
    ] = "0,1",
    memory_path: Annotated[
        str | None,
        typer.Option("--memory", help="Memory file to de-duplicate against and add accepted environments to "
                     "(created if missing; updated atomically under a lock)."),
    ] = None,
    dedup: Annotated[
        bool, typer.Option("--dedup/--no-dedup", help="Reject duplicates of memory and of the batch.")
    ] = True,
    dedup_threshold: Annotated[
        float, typer.Option("--dedup-threshold", min=0.0, max=1.0,
                            help="Jaccard similarity of token shingles at which two environments are near-duplicates.")
    ] = THRESHOLD,
    min_regret: Annotated[
        float | None, typer.Option("--min-regret", help="Accept into memory only environments with at least this regret.")
    ] = None,
    round_: Annotated[
        int | None, typer.Option("--round", min=0, help="Round number for memory entries [default: each candidate's round].")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Score and report, but leave the memory file unchanged.")] = False,
    summary_json: Annotated[
        str | None, typer.Option("--summary-json", help="Also write the batch summary as JSON to this file.")
    ] = None,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    if estimator not in ESTIMATORS:
        raise UsageError(f"--estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    cfg = ScoreConfig(
        estimator=estimator, invalid_penalty=invalid_penalty, duplicate_penalty=duplicate_penalty,
        clip=parse_clip(clip), dedup=dedup, threshold=dedup_threshold, min_regret=min_regret, round=round_,
    )
    entries = memory.load_memory(memory_path)
    scorer = Scorer(cfg, entries)
    reader = RecordReader(inputs or ["-"], kind="candidate", required=("id",))
    with open_output(output, zstd) as out:
        for cand in select(reader, shard, limit):
            out.write(scorer.score(cand, where=reader))

    # Memory is written after the scored output is safely in place: if we die in between,
    # a rerun recomputes the same scores and adds the same entries (ids are code hashes).
    if memory_path and not dry_run:
        seen = {e["id"] for e in entries}
        new = memory.update_memory(memory_path, lambda old: merge_into_memory(
            old, scorer.accepted, scorer.replayed, seen, dedup_threshold if dedup else None))
        log.info("memory %s: %d environments (%+d)", memory_path, len(new), len(new) - len(entries))
    summary = summarize(scorer.scored)
    if summary_json:
        atomic_write_bytes(summary_json, orjson.dumps(summary, option=orjson.OPT_INDENT_2) + b"\n")
    for line in summary_lines(summary, estimator):
        log.info("%s", line)


main = entry(app, "spade-regret")
