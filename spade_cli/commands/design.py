"""spade-design: sample G environment designs per grounding document."""

from __future__ import annotations

import itertools
from typing import Annotated

import typer

from ..cli import (
    Config,
    Inputs,
    Limit,
    Output,
    Quiet,
    Seed,
    Shard,
    Verbose,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    progress,
    select,
)
from ..engines import Sampling
from ..engines import options as eo
from ..errors import UsageError
from ..recordio import RecordReader

app = make_app(
    "Read `doc` records and write one `candidate` record per sampled design: the designer "
    "prompt (environment contract, the document excerpted to a budget, exemplars and a "
    "listing from the environment memory), the completion text, token ids, logprobs, and "
    "the engine and sampling settings. G designs per document form one GRPO group.\n\n"
    "Example: spade-sample-docs corpus/ -n 8 | spade-design --model models/tiny -G 4 "
    "--memory memory.jsonl.zst | spade-validate | ..."
)


@app.command()
def design(
    inputs: Inputs = None,
    output: Output = "-",
    model: eo.Model = "",
    engine: eo.EngineName = "auto",
    num_designs: Annotated[int, typer.Option("--num-designs", "-G", min=1, help="Designs sampled per document (the GRPO group size).")] = 4,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Token budget of one design.")] = 2048,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0 = greedy).")] = 1.0,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0, help="Nucleus sampling.")] = 1.0,
    memory: Annotated[str | None, typer.Option("--memory", help="Environment memory (env records) for exemplars and the listing.")] = None,
    no_memory: Annotated[bool, typer.Option("--no-memory", help="Ablation: no exemplars, no listing.")] = False,
    no_doc: Annotated[bool, typer.Option("--no-doc", help="Ablation: design without the grounding document.")] = False,
    exemplars: Annotated[int, typer.Option("--exemplars", "-k", min=0, help="Exemplars shown in full in the prompt.")] = 2,
    listing_limit: Annotated[int, typer.Option("--listing", min=0, help="Most environments named in the listing.")] = 50,
    doc_tokens: Annotated[int, typer.Option("--doc-tokens", min=16, help="Token budget of the document excerpt.")] = 1024,
    max_prompt_tokens: Annotated[int | None, typer.Option("--max-prompt-tokens", min=64, help="Budget of the whole prompt (default: context minus --max-tokens).")] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help="Prompt template file replacing the packaged one (see README).")] = None,
    round_: Annotated[int, typer.Option("--round", min=0, help="Round number recorded in the candidates.")] = 0,
    batch_docs: Annotated[int, typer.Option("--batch-docs", min=1, help="Documents whose designs are generated in one engine call.")] = 8,
    base_url: eo.BaseUrl = None,
    tokenizer: eo.Tokenizer = None,
    api: eo.Api = "completions",
    tensor_parallel: eo.TensorParallel = 1,
    gpu_memory: eo.GpuMemory = 0.85,
    device: eo.Device = "auto",
    dtype: eo.Dtype = "auto",
    max_batch_size: eo.MaxBatch = 32,
    max_model_len: eo.MaxModelLen = None,
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    from ..design import DesignSettings, Template, design_records

    if memory and no_memory:
        raise UsageError("--memory and --no-memory contradict each other")
    template = Template.load(prompt)
    entries = []
    if not no_memory:
        if memory:
            from ..memory import load_memory

            entries = load_memory(memory)
        else:
            from ..envs.library import load_library
            from ..memory import entries_from_library

            entries = entries_from_library(load_library())
    settings = DesignSettings(
        num_designs=num_designs, sampling=Sampling(temperature, top_p, max_tokens), seed=seed,
        round=round_, no_doc=no_doc, no_memory=no_memory, exemplars=exemplars,
        listing_limit=listing_limit, doc_tokens=doc_tokens, max_prompt_tokens=max_prompt_tokens,
        batch_docs=batch_docs,
    )
    reader = RecordReader(inputs or ["-"], kind="doc", required=("id", "text"))

    def docs():
        for rec in select(reader, shard, limit):
            if not isinstance(rec["text"], str) or not rec["text"].strip():
                raise reader.error("doc record has no text")
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
    if not model:
        raise UsageError("--model is required (a model directory; `spade-init-model DIR` builds a tiny one)")
    eng = eo.engine_from_options(model, engine, base_url=base_url, tokenizer=tokenizer, api=api,
                                 tensor_parallel=tensor_parallel, gpu_memory=gpu_memory, device=device,
                                 dtype=dtype, max_batch_size=max_batch_size, max_model_len=max_model_len,
                                 seed=seed)
    log.info("designing with %s engine on %s: %d per doc, %d memory entries%s", eng.name, eng.model,
             num_designs, len(entries), " (no doc)" if no_doc else "")
    n = 0
    try:
        with open_output(output, zstd) as out:
            for rec in progress(design_records(itertools.chain([first], stream), eng, settings, entries, template), "designs", unit="design"):
                out.write(rec)
                n += 1
    finally:
        eng.close()
    log.info("wrote %d candidates", n)


main = entry(app, "spade-design")
