"""spade-eval: held-out evaluation of a model on real benchmarks and on our own pools."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ..cli import Config, Output, Quiet, Seed, Verbose, Zstd, entry, log, make_app, open_output
from ..engines import options as eo
from ..errors import UsageError
from ..evals import SUITES, check_suites, format_table

app = make_app(
    "Evaluate a model on held-out suites: BFCL-v4 multi-turn (bfcl), procedural reasoning "
    "(reasoning-gym), text games (textarena), the example environment library (library) and "
    "an environment memory file (memory). Writes one `eval` record per task (stdout or -o) "
    "and a summary table (accuracy, pass@k, mean return) on stderr.\n\n"
    "A suite may name a subset after a colon: bfcl:base,miss_func; "
    "reasoning-gym:gcd,maze; textarena:Mastermind-v0; library:nim.\n\n"
    "Example: spade-eval --model models/tiny --suite reasoning-gym --suite bfcl -n 20 "
    "-o eval.jsonl.zst"
)

DEFAULT_SUITES = ["bfcl", "reasoning-gym", "textarena", "library"]

UnsafeNoSandbox = Annotated[bool, typer.Option(
    "--unsafe-no-sandbox",
    help="Run pool environments (library, memory) WITHOUT the bubblewrap sandbox. Dangerous: "
         "only for trusted code or inside a disposable VM/container.")]


@app.command()
def eval(
    suite: Annotated[list[str] | None, typer.Option(
        "--suite", "-s",
        help=f"Suite to run (repeatable): {', '.join(SUITES)}; NAME:a,b picks categories, "
             f"families, games or environments. Default: {', '.join(DEFAULT_SUITES)}.")] = None,
    model: eo.Model = "",
    engine: eo.EngineName = "auto",
    oracle: Annotated[bool, typer.Option("--oracle", help="Play each task's privileged solution instead of a model (harness check: must score 100%).")] = False,
    num_items: Annotated[int, typer.Option("-n", "--num-items", min=0, help="Tasks per suite; 0 = every item once where the set is finite (bfcl: all 800 entries; library, memory: every environment).")] = 20,
    samples: Annotated[int, typer.Option("--samples", "-k", min=1, help="Samples per task; pass@k is reported for k > 1.")] = 1,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Default 0 (greedy) for one sample, 1.0 for several.")] = None,
    top_p: Annotated[float, typer.Option("--top-p")] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per model turn.")] = 512,
    max_turns: Annotated[int | None, typer.Option("--max-turns", min=1, help="Cap on model turns per episode (default: the environment's).")] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Episodes in flight together (one batched generation per turn).")] = 64,
    memory: Annotated[str | None, typer.Option("--memory", help="Environment memory file for suite 'memory'.")] = None,
    summary: Annotated[Path | None, typer.Option("--summary", help="Also write the summary as JSON to this file.")] = None,
    emit_pool: Annotated[bool, typer.Option(
        "--emit-pool", help="Write the reasoning-gym families (--suite reasoning-gym[:families]) as "
                            "fixed-environment `candidate` records instead of evaluating.")] = False,
    unsafe_no_sandbox: UnsafeNoSandbox = False,
    base_url: eo.BaseUrl = None,
    tokenizer: eo.Tokenizer = None,
    api: eo.Api = "completions",
    tensor_parallel: eo.TensorParallel = 1,
    gpu_memory: eo.GpuMemory = 0.85,
    device: eo.Device = "auto",
    dtype: eo.Dtype = "auto",
    max_batch_size: eo.MaxBatch = 32,
    max_model_len: eo.MaxModelLen = None,
    output: Output = "-",
    zstd: Zstd = False,
    seed: Seed = 0,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    specs = suite or DEFAULT_SUITES
    parsed = check_suites(specs)  # bad names and missing packages fail here, before any loading

    if emit_pool:
        from ..evals.rgym import fixed_pool_candidates

        fams = [f for name, sub in parsed if name == "reasoning-gym" for f in (sub or [])]
        if any(name != "reasoning-gym" for name, _ in parsed):
            raise UsageError("--emit-pool works with --suite reasoning-gym[:families] only")
        with open_output(output, zstd) as out:
            n = out.write_all(fixed_pool_candidates(fams or None))
        log.info("wrote %d fixed-pool candidates", n)
        return

    from ..evals import run_eval

    eng = None
    if not oracle:
        if not model:
            raise UsageError("--model is required (or --oracle to check the harness)")
        from ..engines import Sampling

        eng = eo.engine_from_options(model, engine, base_url=base_url, tokenizer=tokenizer, api=api,
                                     tensor_parallel=tensor_parallel, gpu_memory=gpu_memory, device=device,
                                     dtype=dtype, max_batch_size=max_batch_size, max_model_len=max_model_len,
                                     seed=seed)
        temp = temperature if temperature is not None else (0.0 if samples == 1 else 1.0)
        sampling = Sampling(temperature=temp, top_p=top_p, max_tokens=max_tokens)
    else:
        sampling = None

    t0 = time.perf_counter()
    with open_output(output, zstd) as out:
        records, summ = run_eval(
            specs, eng, n=num_items, seed=seed, samples=samples, sampling=sampling,
            memory=memory, oracle=oracle, unsafe=unsafe_no_sandbox, max_in_flight=batch,
            max_turns=max_turns, on_record=out.write,
        )
    summ["seconds"] = round(time.perf_counter() - t0, 3)
    if eng is not None:
        eng.close()
    if summary is not None:
        summary.write_text(json.dumps(summ, indent=2) + "\n")
    if not quiet:
        label = "oracle" if oracle else f"{model} ({eng.name if eng else engine})"
        sys.stderr.write(format_table(summ, model=label) + "\n")
        sys.stderr.write(f"{len(records)} tasks in {summ['seconds']:.1f}s\n")
    if oracle:
        failed = [r for r in records if not r["stats"]["successes"]]
        for r in failed:
            s = r["samples"][0]
            log.warning("oracle failed %s/%s: %s %s", r["suite"], r["task"], s["stop"], s.get("detail", ""))


main = entry(app, "spade-eval")
