"""spade-eval: held-out evaluation of a model on real benchmarks and on our own pools."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from .. import logs
from ..cli import Output, Seed, Zstd, entry, log, make_app, open_output, stage_command
from ..engines.settings import EngineSettings
from ..errors import UsageError
from ..evals import check_suites, format_table
from ..sandbox.settings import SandboxSettings
from ..stage_settings import EvalSettings

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


@stage_command(app, settings=EvalSettings, engine=EngineSettings, sandbox=SandboxSettings)
def eval(
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle",
            help="Play each task's privileged solution instead of a model (harness check: must score 100%).",
        ),
    ] = False,
    memory: Annotated[
        str | None, typer.Option("--memory", help="Environment memory file for suite 'memory'.")
    ] = None,
    summary: Annotated[
        Path | None, typer.Option("--summary", help="Also write the summary as JSON to this file.")
    ] = None,
    emit_pool: Annotated[
        bool,
        typer.Option(
            "--emit-pool",
            help="Write the reasoning-gym families (--suite reasoning-gym[:families]) as "
            "fixed-environment `candidate` records instead of evaluating.",
        ),
    ] = False,
    output: Output = "-",
    zstd: Zstd = False,
    seed: Seed = 0,
    *,
    settings: EvalSettings,
    engine: EngineSettings,
    sandbox: SandboxSettings,
) -> None:
    specs = settings.suites or DEFAULT_SUITES
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
        if not engine.path:
            raise UsageError("--model is required (or --oracle to check the harness)")
        if settings.samples > 1 and settings.sampling.temperature == 0:
            raise UsageError(
                "--samples > 1 needs --temperature above 0 (greedy samples are all the same)"
            )
        eng = engine.load(seed=seed)
        sampling = settings.sampling
    else:
        sampling = None

    t0 = time.perf_counter()
    with open_output(output, zstd) as out:
        records, summ = run_eval(
            specs,
            eng,
            n=settings.num_items,
            seed=seed,
            samples=settings.samples,
            sampling=sampling,
            memory=memory,
            oracle=oracle,
            sandbox=sandbox.config(),
            max_in_flight=settings.batch,
            max_turns=settings.max_turns,
            on_record=out.write,
        )
    summ["seconds"] = round(time.perf_counter() - t0, 3)
    if eng is not None:
        eng.close()
    if summary is not None:
        summary.write_text(json.dumps(summ, indent=2) + "\n")
    if not logs.quiet():
        label = "oracle" if oracle else f"{engine.path} ({eng.name if eng else engine.engine})"
        sys.stderr.write(format_table(summ, model=label) + "\n")
        sys.stderr.write(f"{len(records)} tasks in {summ['seconds']:.1f}s\n")
    if oracle:
        failed = [r for r in records if not r["stats"]["successes"]]
        for r in failed:
            s = r["samples"][0]
            log.warning(
                "oracle failed %s/%s: %s %s", r["suite"], r["task"], s["stop"], s.get("detail", "")
            )


main = entry(app, "spade-eval")
