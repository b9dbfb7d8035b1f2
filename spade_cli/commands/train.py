"""spade-train: GRPO for the designer and the agent on a round's scored candidates."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from ..cli import Inputs, Seed, entry, log, make_app, open_output, stage_command
from ..errors import DataError, UsageError
from ..records import make_id, new_record
from ..stage_settings import TrainSettings
from ..train.config import TrainJob
from ..train.samples import NothingToTrain

app = make_app(
    "Train the model with GRPO (TRL) on the stored generations of a round: designer samples "
    "(the G designs of one prompt, reward = designer reward) and agent samples (the no-hint "
    "episodes of one environment, reward = return; environment tokens masked out of the loss). "
    "Writes an HF checkpoint (model + tokenizer) to --output-dir, metrics as JSONL, and one "
    "`checkpoint` record on stdout.\n\n"
    "Example: spade-train scored.jsonl.zst --model ckpt/round-000 --output-dir ckpt/round-001 "
    "--role both --lr 1e-6 | jq .path"
)


@stage_command(app, settings=TrainSettings)
def train(
    inputs: Inputs = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Starting checkpoint: a local HF model directory, or a peft adapter directory.",
        ),
    ] = "",
    output_dir: Annotated[
        str, typer.Option("--output-dir", help="Where the new checkpoint is written (HF format).")
    ] = "",
    output: Annotated[
        str,
        typer.Option("-o", "--output", help="Where the `checkpoint` record goes (`-` = stdout)."),
    ] = "-",
    metrics: Annotated[
        str | None,
        typer.Option("--metrics", help="Metrics JSONL (default OUTPUT_DIR/metrics.jsonl)."),
    ] = None,
    seed: Seed = 0,
    *,
    settings: TrainSettings,
) -> None:
    cfg = TrainJob(
        **dataclasses.asdict(settings),
        model=model,
        output_dir=output_dir,
        inputs=list(inputs or ["-"]),
        seed=seed,
        metrics_path=metrics,
    )
    role, if_empty = cfg.role, cfg.if_empty
    from ..train.grpo import load_groups, model_kind

    spool = None
    if "-" in cfg.inputs:
        # Every worker (and the in-process run) reads the inputs again, and stdin can be
        # read only once: keep a copy in a file.
        spool = tempfile.NamedTemporaryFile(prefix="spade-train-", suffix=".jsonl", delete=False)
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.close()
        cfg.inputs = [spool.name if p == "-" else p for p in cfg.inputs]
    try:
        # Check everything cheap before loading a model or starting processes: bad data
        # fails here with FILE:LINE, then a missing or bad model.
        try:
            groups, stats = load_groups(cfg)
        except NothingToTrain as e:
            _say_refused(e.stats)
            if if_empty == "fail":
                raise
            info = _unchanged(cfg, e)
            groups = None
        except DataError as e:
            if spool is not None and e.path == spool.name:
                raise DataError(e.problem, "<stdin>", e.line) from None
            raise
        if not model:
            raise UsageError("--model is required (the checkpoint the round's samples came from)")
        if not output_dir:
            raise UsageError("--output-dir is required")
        if groups is None:
            model_kind(cfg.model)
            log.warning(
                "no learning signal this round (%s); keeping %s unchanged",
                info["reason"],
                cfg.model,
            )
        else:
            info = _train(cfg, groups, stats)
    finally:
        if spool is not None:
            os.unlink(spool.name)
    if info is None:  # a machine of rank > 0: the main machine writes the record
        return
    if info["steps"]:
        log.info(
            "checkpoint %s (%s) after %d steps, loss %.4g",
            info["path"],
            info["format"],
            info["steps"],
            info["train_loss"],
        )
    rec = new_record(
        "checkpoint", make_id("ckpt", info["path"], info["base_model"], role, seed), [], **info
    )
    with open_output(output) as out:
        out.write(rec)


def _say_refused(stats: Any) -> None:
    """How many episodes (and designs) were left out because their environment trains
    no one: rollout marked it, or spade-regret did not accept its score."""
    refused = stats.refused()
    if refused:
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(refused.items()))
        log.info(
            "dropped %d episodes and designs of environments that train no one (%s)",
            sum(refused.values()),
            why,
        )


def _unchanged(cfg: TrainJob, e: NothingToTrain) -> dict:
    path = str(Path(cfg.model).resolve()) if cfg.model else ""
    return {
        "path": path,
        "base_model": path,
        "role": cfg.role,
        "format": "unchanged",
        "metrics_path": None,
        "steps": 0,
        "samples": 0,
        "groups": {"designer": 0, "agent": 0},
        "skipped": dict(e.stats.skipped),
        "reason": e.problem,
    }


def _train(cfg: TrainJob, groups: list, stats: Any) -> dict | None:
    """Check the settings against the data, then train here or under accelerate."""
    from ..train.batches import plan_batches
    from ..train.grpo import check_config

    check_config(cfg)
    _say_refused(stats)
    plan = plan_batches(cfg, groups, cfg.num_processes)
    log.info(
        "%d groups (designer %d, agent %d), %d samples, group size %d, %d optimizer steps; skipped %s",
        len(groups),
        stats.groups["designer"],
        stats.groups["agent"],
        stats.samples,
        plan["group_size"],
        plan["steps"],
        dict(stats.skipped) or "nothing",
    )
    if plan["left_out_groups"]:
        log.warning(
            "%d groups do not fill a whole batch of groups and are left out this round",
            plan["left_out_groups"],
        )
    if stats.truncated_prompts or stats.truncated_completions:
        log.warning(
            "truncated %d prompts and %d completions to the length limits",
            stats.truncated_prompts,
            stats.truncated_completions,
        )
    if cfg.num_processes > 1 or cfg.num_machines > 1 or cfg.accelerate_config:
        from ..train.launch import launch

        return launch(cfg)
    from ..train.grpo import run

    with contextlib.redirect_stdout(sys.stderr):
        return run(cfg)


main = entry(app, "spade-train")
