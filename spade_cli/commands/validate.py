"""spade-validate: check each candidate environment against the environment contract."""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
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
from ..recordio import RecordReader, RecordWriter
from ..records import REASONS
from ..sandbox.settings import SandboxSettings
from ..stage_settings import ValidateSettings

app = make_app(
    "Validate candidate environments: extract the code of each design and run it, in the "
    "bubblewrap sandbox, through a series of named checks (reset/step contract, "
    "determinism, rewards in [0, 1], the solution solves it, dumb baselines do not, the "
    "hint does not give the solution away, it ends within max_turns, resource limits, "
    "duplicates), and with --judge also by the model under test (--model), which reads each "
    "environment that passed and one trajectory and answers whether it is fit for training. "
    "Every candidate is written back with a `validation` verdict, and with `env` when valid; "
    "none is dropped.\n\n"
    "Example: spade-validate designs.jsonl.zst --seeds 3 --workers 8 -o validated.jsonl.zst "
    "--rejects rejects.jsonl"
)


@stage_command(app, settings=ValidateSettings, sandbox=SandboxSettings, engine=EngineSettings)
def validate(
    inputs: Inputs = None,
    output: Output = "-",
    rejects: Annotated[
        str | None,
        typer.Option("--rejects", help="Also write the invalid candidates to this file."),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            help="Environment memory file: designs with the same normalised code "
            "as a memory entry are duplicates.",
        ),
    ] = None,
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    *,
    settings: ValidateSettings,
    sandbox: SandboxSettings,
    engine: EngineSettings,
) -> None:
    from ..envs.validation import validate_records
    from ..sandbox import EnvSession, check_sandbox

    if rejects is not None and rejects == output and output != "-":
        raise UsageError("--rejects must differ from -o")
    if settings.judge and not engine.path:
        raise UsageError("--judge needs --model (the model under test judges the environments)")
    cfg = sandbox.config(episode_timeout=settings.episode_timeout)
    if settings.published_max_turns is not None:  # read by the published adapter in the sandbox
        cfg.extra_env = {**cfg.extra_env, "SPADE_MAX_TURNS": str(settings.published_max_turns)}
    if not sandbox.unsafe_no_sandbox:
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
        seeds=settings.seeds,
        seed=seed,
        workers=settings.workers,
        memory=mem,
        near=settings.near,
        copies=settings.copies,
        stats=stats,
        candidate_timeout=settings.candidate_timeout,
        contract=settings.contract,
        reject_single_shot=settings.reject_single_shot,
        require_solution=settings.require_solution,
        keep_trajectory=settings.judge,
        skill_families=_skill_families(settings.skill),
    )
    eng = None
    if settings.judge:
        from ..envs.judge import judge_records, load_template

        eng = engine.load(seed=seed)
        verdicts = judge_records(
            verdicts, eng, settings.judge_sampling, template=load_template(), seed=seed
        )
    try:
        with (
            open_output(output, zstd) as out,
            RecordWriter(rejects) if rejects else nullcontext() as rej,
        ):
            for rec in verdicts:
                if rec["validation"]["reason"] == "judged_invalid":
                    stats["ok"] -= 1
                    stats["judged_invalid"] += 1
                out.write(rec)
                if rej is not None and not rec["validation"]["valid"]:
                    rej.write(rec)
    finally:
        if eng is not None:
            eng.close()
    _summary(stats)


def _skill_families(check: str) -> dict[str, str] | None:
    if check == "any":
        return None
    from ..micro import skill_families

    return skill_families()


def _summary(stats: Counter) -> None:
    total = sum(stats.values())
    valid = stats.get("ok", 0)
    bad = ", ".join(f"{r} {stats[r]}" for r in REASONS if r != "ok" and stats.get(r))
    log.info(
        "validated %d candidates: %d valid, %d invalid%s",
        total,
        valid,
        total - valid,
        f" ({bad})" if bad else "",
    )


main = entry(app, "spade-validate")
