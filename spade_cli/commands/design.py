"""spade-design: sample G environment designs per grounding document."""

from __future__ import annotations

import itertools
from typing import Annotated

import typer

from ..cli import (
    Inputs,
    Limit,
    Output,
    Seed,
    Shard,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    progress,
    select,
    stage_command,
)
from ..engines.settings import EngineSettings
from ..errors import UsageError
from ..recordio import RecordReader
from ..stage_settings import DesignSettings

app = make_app(
    "Read `doc` records and write one `candidate` record per sampled design: the designer "
    "prompt (environment contract, the document excerpted to a budget, exemplars and a "
    "listing from the environment memory), the completion text, token ids, logprobs, and "
    "the engine and sampling settings. G designs per document form one GRPO group.\n\n"
    "Example: spade-sample-docs corpus/ -n 8 | spade-design --model models/tiny -G 4 "
    "--memory memory.jsonl.zst | spade-validate | ..."
)


def failed_docs(paths: list[str]) -> set[str]:
    """Ids of the documents whose designs in `paths` all failed validation."""
    valid, seen = set(), set()
    for rec in RecordReader(paths, kind="candidate"):
        for doc_id in rec.get("parents") or []:
            seen.add(doc_id)
            if (rec.get("validation") or {}).get("valid"):
                valid.add(doc_id)
    return seen - valid


@stage_command(app, settings=DesignSettings, engine=EngineSettings)
def design(
    inputs: Inputs = None,
    output: Output = "-",
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory", help="Environment memory (env records) for exemplars and the listing."
        ),
    ] = None,
    round_: Annotated[
        int, typer.Option("--round", min=0, help="Round number recorded in the candidates.")
    ] = 0,
    attempt: Annotated[
        int,
        typer.Option(
            "--attempt",
            min=1,
            help="Design attempt recorded in the candidates "
            "(later attempts get their own ids and seeds).",
        ),
    ] = 1,
    retry_failed: Annotated[
        list[str] | None,
        typer.Option(
            "--retry-failed",
            help="Validated candidates of earlier attempts (repeatable): design only for the "
            "documents none of whose designs there is valid.",
        ),
    ] = None,
    fresh_docs: Annotated[
        str | None,
        typer.Option(
            "--fresh-docs",
            help="With --retry-failed: doc records to show instead, as the release gives each "
            "attempt a fresh document: the k-th document designed again takes this file's k-th (its "
            "skill, difficulty and group stay the original's).",
        ),
    ] = None,
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    *,
    settings: DesignSettings,
    engine: EngineSettings,
) -> None:
    from ..design import Template, design_records

    if memory and settings.no_memory:
        raise UsageError("--memory and --no-memory contradict each other")
    template = Template.load(settings.prompt)
    entries = []
    if not settings.no_memory:
        if memory:
            from ..memory import load_memory

            entries = load_memory(memory)
        elif settings.contract == "published":
            entries = []  # the example library would teach our contract, not this one
        else:
            from ..envs.library import load_library
            from ..memory import entries_from_library

            entries = entries_from_library(load_library())
    reader = RecordReader(inputs or ["-"], kind="doc", required=("id", "text"))

    failed = failed_docs(retry_failed) if retry_failed else None
    if fresh_docs and failed is None:
        raise UsageError("--fresh-docs replaces the documents of --retry-failed: give both")
    spare = (
        iter(RecordReader([fresh_docs], kind="doc", required=("id", "text")))
        if fresh_docs
        else None
    )
    stand_ins: dict[str, dict] = {}

    def docs():
        for rec in select(reader, shard, limit):
            if failed is not None and rec["id"] not in failed:
                continue
            if not isinstance(rec["text"], str) or not rec["text"].strip():
                raise reader.error("doc record has no text")
            if spare is not None:
                fresh = next(spare, None)
                if fresh is None:
                    raise UsageError(f"{fresh_docs}: fewer documents than those designed again")
                stand_ins[rec["id"]] = fresh
            yield rec

    # Read the first document before loading the model: bad input fails in a second,
    # not after minutes of loading weights, and an empty input needs no model at all.
    stream = docs()
    first = next(stream, None)
    if first is None:
        with open_output(output, zstd):
            pass
        log.info("no documents: wrote 0 candidates")
        return
    if not engine.path:
        raise UsageError(
            "--model is required (a model directory; `spade-init-model DIR` builds a tiny one)"
        )
    eng = engine.load(seed=seed)
    per_doc = 1 if settings.doc_per_design else settings.designs_per_doc
    log.info(
        "designing with %s engine on %s: %d per doc, %d memory entries%s",
        eng.name,
        eng.model,
        per_doc,
        len(entries),
        " (no doc)" if settings.no_doc else "",
    )
    n = 0
    try:
        with open_output(output, zstd) as out:
            designs = design_records(
                itertools.chain([first], stream),
                eng,
                settings,
                entries,
                template,
                seed=seed,
                round=round_,
                attempt=attempt,
                stand_ins=stand_ins,
            )
            for rec in progress(designs, "designs", unit="design"):
                out.write(rec)
                n += 1
    finally:
        eng.close()
    log.info("wrote %d candidates", n)


main = entry(app, "spade-design")
