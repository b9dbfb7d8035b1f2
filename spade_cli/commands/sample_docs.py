"""spade-sample-docs: a uniform, reproducible sample of documents from large corpora."""

from __future__ import annotations

from typing import Annotated

import typer

from ..cli import (
    Config,
    Output,
    Quiet,
    Seed,
    Verbose,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    progress_bar,
)
from ..errors import UsageError
from ..recordio import RecordReader, display_name
from ..records import parse_shard

app = make_app(
    "Sample N documents uniformly without replacement from corpus files in one streaming "
    "pass, and write them as `doc` records with their provenance.\n\n"
    "Inputs are files, globs or directories: JSON lines (plain, .zst, .gz), Parquet, or "
    "plain-text files (one document per file). Label an input NAME=PATH to use it in "
    "--mix. Same seed and inputs, same sample; --shard i/n jobs merged with --merge give "
    "exactly the sample of one run.\n\n"
    "Example: spade-sample-docs -n 1000 web=cc/*.jsonl.zst code=stack/ --mix web=3,code=1 "
    "-o docs.jsonl.zst"
)


def _summary(stats, written: int, skip_bad: bool) -> None:
    skipped = [f"{v} {k}" for k, v in (("empty", stats.empty), ("shorter than --min-chars", stats.short),
               ("longer than --max-chars", stats.long), ("duplicate", stats.duplicate)) if v]
    log.info(
        "sampled %d documents from %d scanned in %d files (%d parsed%s)",
        written, stats.docs, stats.files, stats.parsed, "; skipped " + ", ".join(skipped) if skipped else "",
    )
    if skip_bad and stats.bad:
        log.warning("skipped %d bad lines; the first: %s", stats.bad, stats.first_bad)


@app.command()
def sample_docs(
    inputs: Annotated[list[str] | None, typer.Argument(help="Corpus files, globs or directories; NAME=PATH labels a source for --mix; `-` (or none) reads JSON lines from stdin. With --merge: sample files written by --shard jobs.", show_default=False)] = None,
    num: Annotated[int, typer.Option("-n", "--num", min=0, help="How many documents to sample (split across --mix pools).")] = 100,
    text_field: Annotated[str, typer.Option("--text-field", help="JSON key or Parquet column of the text; `a.b` for nested JSON.")] = "text",
    id_field: Annotated[str | None, typer.Option("--id-field", help="JSON key or Parquet column of the corpus's own document id, kept as source.id.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="Input format: auto (by file name), jsonl, parquet or text.")] = "auto",
    mix: Annotated[str | None, typer.Option("--mix", help="Weights of labelled inputs, e.g. web=0.7,code=0.3: the share of -n each pool gets.")] = None,
    min_chars: Annotated[int, typer.Option("--min-chars", min=0, help="Skip documents shorter than this.")] = 0,
    max_chars: Annotated[int | None, typer.Option("--max-chars", min=1, help="Skip documents longer than this.")] = None,
    excerpt_chars: Annotated[int, typer.Option("--excerpt-chars", min=0, help="Cut longer documents to a window of at most this many characters (0: keep whole).")] = 4000,
    excerpt_at: Annotated[str, typer.Option("--excerpt-at", help="Where a window starts: random (seeded per document) or start.")] = "random",
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Count and skip bad lines instead of failing; a summary goes to stderr.")] = False,
    jobs: Annotated[int | None, typer.Option("-j", "--jobs", min=1, help="Processes reading files in parallel (default: one per core).")] = None,
    merge: Annotated[bool, typer.Option("--merge", help="Inputs are samples written by --shard jobs: merge them into the sample of one run.")] = False,
    build_demo_corpus: Annotated[str | None, typer.Option("--build-demo-corpus", metavar="OUT", help="Write the demo corpus (standard-library documentation) to OUT and exit.")] = None,
    seed: Seed = 0,
    shard: Annotated[str | None, typer.Option("--shard", help="Read only input files i, i+n, i+2n, ... of the input list (`i/n`); combine the shard outputs with --merge.")] = None,
    output: Output = "-",
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    from .. import corpus

    if build_demo_corpus is not None:
        n = corpus.build_demo_corpus(build_demo_corpus)
        log.info("wrote %d documents to %s", n, build_demo_corpus)
        return
    if excerpt_at not in ("random", "start"):
        raise UsageError(f"--excerpt-at must be random or start, got {excerpt_at!r}")
    if max_chars is not None and max_chars < min_chars:
        raise UsageError("--max-chars is below --min-chars")

    if merge:
        if shard is not None or mix is not None:
            raise UsageError("--merge takes the shard outputs only (no --shard or --mix)")
        reader = RecordReader(inputs or ["-"], kind="doc", required=("id",))
        docs = corpus.merge(reader, lambda: f"{display_name(reader.path)}:{reader.line}")
        with open_output(output, zstd) as out:
            out.write_all(docs)
        log.info("merged %d documents", len(docs))
        return

    sources = corpus.expand_inputs(inputs or ["-"], fmt)
    if mix is not None:
        weights = corpus.parse_mix(mix)
        names = {s.name for s in sources}
        if unknown := names - weights.keys():
            raise UsageError(f"--mix gives no weight to input(s) {', '.join(sorted(unknown))}; label inputs NAME=PATH")
        if missing := weights.keys() - names:
            raise UsageError(f"--mix names {', '.join(sorted(missing))}, which no input is labelled")
        quotas: dict = corpus.quotas(num, weights)
    else:
        quotas = {None: num}
    part = parse_shard(shard)
    if part is not None:
        i, n = part
        sources = sources[i::n]
        if not sources:
            log.warning("shard %s has no input files (shards split the list of files)", shard)
    plan = corpus.Plan(sources, quotas, mixed=mix is not None)
    opts = corpus.Options(num, seed, text_field, id_field, min_chars, max_chars, excerpt_chars, excerpt_at, skip_bad)
    with progress_bar("sampling", total=len(corpus.sampler.tasks_of(plan)), unit="file") as bar:
        docs, stats = corpus.sample(plan, opts, jobs or corpus.default_jobs(), on_task=bar.update)
    with open_output(output, zstd) as out:
        out.write_all(docs)
    if mix is not None:
        for pool, q in quotas.items():
            got = sum(1 for d in docs if d["sample"]["pool"] == pool)
            if got < q and part is None:
                log.warning("pool %s has only %d eligible documents of the %d asked for", pool, got, q)
    _summary(stats, len(docs), skip_bad)


main = entry(app, "spade-sample-docs")
