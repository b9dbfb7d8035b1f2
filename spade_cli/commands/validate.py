"""spade-validate: check each candidate environment against the environment contract."""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
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
from ..errors import UsageError
from ..recordio import RecordReader, RecordWriter
from ..records import REASONS
from ..sandbox import SandboxPackages

app = make_app(
    "Validate candidate environments: extract the code of each design and run it, in the "
    "bubblewrap sandbox, through a series of named checks (reset/step contract, "
    "determinism, rewards in [0, 1], the solution solves it, dumb baselines do not, the "
    "hint does not give the solution away, it ends within max_turns, resource limits, "
    "duplicates). Every candidate is written back with a `validation` verdict, and with "
    "`env` when valid; none is dropped.\n\n"
    "Example: spade-validate designs.jsonl.zst --seeds 3 --workers 8 -o validated.jsonl.zst "
    "--rejects rejects.jsonl"
)


@app.command()
def validate(
    inputs: Inputs = None,
    output: Output = "-",
    rejects: Annotated[str | None, typer.Option(
        "--rejects", help="Also write the invalid candidates to this file.")] = None,
    seeds: Annotated[int, typer.Option(
        "--seeds", min=1, max=64, help="Reset seeds each environment is checked on.")] = 3,
    workers: Annotated[int, typer.Option(
        "--workers", "-j", min=1, help="Candidates validated concurrently (one sandboxed "
        "worker each).")] = 2,
    memory: Annotated[str | None, typer.Option(
        "--memory", help="Environment memory file: designs with the same normalised code "
        "as a memory entry are duplicates.")] = None,
    near: Annotated[float | None, typer.Option(
        "--near", min=0.0, max=1.0, help="Also reject near-duplicates: shingle Jaccard "
        "similarity at least this (e.g. 0.8). Default: exact duplicates only.")] = None,
    call_timeout: Annotated[float, typer.Option(
        "--call-timeout", min=0.1, help="Seconds one reset()/step() may take.")] = 5.0,
    episode_timeout: Annotated[float, typer.Option(
        "--episode-timeout", min=0.1, help="Seconds one episode may take.")] = 60.0,
    memory_mb: Annotated[int, typer.Option(
        "--memory-mb", min=192, help="Address-space limit of a worker in MiB.")] = 512,
    candidate_timeout: Annotated[float, typer.Option(
        "--candidate-timeout", min=1.0, help="Seconds all checks of one candidate may take "
        "together (verdict `timeout`).")] = 120.0,
    sandbox_package: SandboxPackages = None,
    unsafe_no_sandbox: Annotated[bool, typer.Option(
        "--unsafe-no-sandbox",
        help="Run designer code WITHOUT the bubblewrap sandbox (rlimits only). Dangerous: "
             "only for trusted code or inside a disposable VM/container.")] = False,
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    from ..envs.validation import validate_records
    from ..sandbox import EnvSession, SandboxConfig, check_sandbox

    if rejects is not None and rejects == output and output != "-":
        raise UsageError("--rejects must differ from -o")
    cfg = SandboxConfig(unsafe=unsafe_no_sandbox, call_timeout=call_timeout,
                        episode_timeout=episode_timeout, memory_mb=memory_mb,
                        packages=tuple(sandbox_package or ()))
    if not unsafe_no_sandbox:
        check_sandbox()  # a missing or broken bwrap is one clear error before any work
    mem = None
    if memory is not None:
        from ..memory import load_memory

        mem = load_memory(memory)
    reader = RecordReader(inputs or ["-"], kind="candidate")
    stats: Counter = Counter()
    verdicts = validate_records(
        progress(select(reader, shard, limit), "validate"),
        lambda code: EnvSession(code, cfg),
        seeds=seeds, seed=seed, workers=workers, memory=mem, near=near, stats=stats,
        candidate_timeout=candidate_timeout)
    with open_output(output, zstd) as out, \
            (RecordWriter(rejects) if rejects else nullcontext()) as rej:
        for rec in verdicts:
            out.write(rec)
            if rej is not None and not rec["validation"]["valid"]:
                rej.write(rec)
    _summary(stats)


def _summary(stats: Counter) -> None:
    total = sum(stats.values())
    valid = stats.get("ok", 0)
    bad = ", ".join(f"{r} {stats[r]}" for r in REASONS if r != "ok" and stats.get(r))
    log.info("validated %d candidates: %d valid, %d invalid%s", total, valid, total - valid,
             f" ({bad})" if bad else "")


main = entry(app, "spade-validate")
