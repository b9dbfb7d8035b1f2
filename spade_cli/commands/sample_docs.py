"""spade-sample-docs: a uniform, reproducible sample of documents from large corpora."""

from __future__ import annotations

from typing import Annotated

import typer

from ..cli import Output, Seed, Zstd, entry, log, make_app, open_output, progress_bar, stage_command
from ..errors import UsageError
from ..recordio import RecordReader, display_name
from ..records import parse_shard
from ..stage_settings import SampleDocsSettings

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
    skipped = [
        f"{v} {k}"
        for k, v in (
            ("empty", stats.empty),
            ("shorter than --min-chars", stats.short),
            ("longer than --max-chars", stats.long),
            ("duplicate", stats.duplicate),
        )
        if v
    ]
    log.info(
        "sampled %d documents from %d scanned in %d files (%d parsed%s)",
        written,
        stats.docs,
        stats.files,
        stats.parsed,
        "; skipped " + ", ".join(skipped) if skipped else "",
    )
    if skip_bad and stats.bad:
        log.warning("skipped %d bad lines; the first: %s", stats.bad, stats.first_bad)


@stage_command(app, settings=SampleDocsSettings)
def sample_docs(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Corpus files, globs or directories; NAME=PATH labels a source for --mix; `-` (or none) reads JSON lines from stdin. With --merge: sample files written by --shard jobs.",
            show_default=False,
        ),
    ] = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Inputs are samples written by --shard jobs: merge them into the sample of one run.",
        ),
    ] = False,
    build_demo_corpus: Annotated[
        str | None,
        typer.Option(
            "--build-demo-corpus",
            metavar="OUT",
            help="Write the demo corpus (standard-library documentation) to OUT and exit.",
        ),
    ] = None,
    seed: Seed = 0,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="Read only input files i, i+n, i+2n, ... of the input list (`i/n`); combine the shard outputs with --merge.",
        ),
    ] = None,
    output: Output = "-",
    zstd: Zstd = False,
    *,
    settings: SampleDocsSettings,
) -> None:
    s = settings
    num, mix, min_chars, max_chars = s.docs_per_round, s.mix, s.min_chars, s.max_chars
    from .. import corpus

    if build_demo_corpus is not None:
        n = corpus.build_demo_corpus(build_demo_corpus)
        log.info("wrote %d documents to %s", n, build_demo_corpus)
        return
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

    sources = corpus.expand_inputs(inputs or ["-"], s.format)
    if mix is not None:
        weights = corpus.parse_mix(mix)
        names = {s.name for s in sources}
        if unknown := names - weights.keys():
            raise UsageError(
                f"--mix gives no weight to input(s) {', '.join(sorted(unknown))}; label inputs NAME=PATH"
            )
        if missing := weights.keys() - names:
            raise UsageError(
                f"--mix names {', '.join(sorted(missing))}, which no input is labelled"
            )
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
    opts = corpus.Options(
        num,
        seed,
        s.text_field,
        s.id_field,
        min_chars,
        max_chars,
        s.excerpt_chars,
        s.excerpt_at,
        s.skip_bad,
    )
    with progress_bar("sampling", total=len(corpus.sampler.tasks_of(plan)), unit="file") as bar:
        docs, stats = corpus.sample(plan, opts, s.jobs or corpus.default_jobs(), on_task=bar.update)
    with open_output(output, zstd) as out:
        out.write_all(docs)
    if mix is not None:
        for pool, q in quotas.items():
            got = sum(1 for d in docs if d["sample"]["pool"] == pool)
            if got < q and part is None:
                log.warning(
                    "pool %s has only %d eligible documents of the %d asked for", pool, got, q
                )
    _summary(stats, len(docs), s.skip_bad)


main = entry(app, "spade-sample-docs")
