"""spade-train: GRPO for the designer and the agent on a round's scored candidates."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from ..cli import Config, Inputs, Quiet, Seed, Verbose, entry, log, make_app, open_output
from ..errors import DataError, UsageError
from ..records import make_id, new_record
from ..train.config import TrainConfig
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

Opt = typer.Option


@app.command()
def train(
    inputs: Inputs = None,
    model: Annotated[str, Opt("--model", "-m", help="Starting checkpoint: a local HF model directory, or a peft adapter directory.")] = "",
    output_dir: Annotated[str, Opt("--output-dir", help="Where the new checkpoint is written (HF format).")] = "",
    output: Annotated[str, Opt("-o", "--output", help="Where the `checkpoint` record goes (`-` = stdout).")] = "-",
    role: Annotated[str, Opt("--role", help="designer, agent or both.")] = "both",
    designer_fraction: Annotated[float | None, Opt("--designer-fraction", help="With --role both: share of designer groups among all groups; the more plentiful role is subsampled. Default: every group.")] = None,
    include_hinted: Annotated[bool, Opt("--include-hinted", help="Also train the agent on hinted episodes (own groups).")] = False,
    group_size: Annotated[int | None, Opt("--group-size", help="GRPO group size G (default: the largest group; smaller ones are padded with loss-free rows).")] = None,
    loss_type: Annotated[str, Opt("--loss-type", help="TRL loss: grpo, dapo, dr_grpo, bnpo, cispo, sapo, luspo, vespo.")] = "dapo",
    beta: Annotated[float, Opt("--beta", help="KL coefficient against the reference model (0 = no reference model).")] = 0.0,
    ref_model: Annotated[str | None, Opt("--ref-model", help="Reference model for the KL term (default: the starting checkpoint).")] = None,
    epsilon: Annotated[float, Opt("--epsilon", help="Clipping range of the policy ratio (low side; high side too unless --epsilon-high).")] = 0.2,
    epsilon_high: Annotated[float | None, Opt("--epsilon-high", help="Upper clipping range (DAPO suggests 0.28).")] = None,
    scale_rewards: Annotated[str, Opt("--scale-rewards", help="Advantage scaling: group, batch or none.")] = "group",
    lr: Annotated[float, Opt("--lr", "--learning-rate", help="Learning rate.")] = 1e-6,
    lr_scheduler: Annotated[str, Opt("--lr-scheduler", help="transformers scheduler name.")] = "constant",
    warmup_ratio: Annotated[float, Opt("--warmup-ratio")] = 0.0,
    weight_decay: Annotated[float, Opt("--weight-decay")] = 0.0,
    max_grad_norm: Annotated[float, Opt("--max-grad-norm", help="Gradient clipping.")] = 1.0,
    temperature: Annotated[float, Opt("--temperature", help="Policy temperature in the loss; match the round's sampling temperature.")] = 1.0,
    off_policy_mask: Annotated[float | None, Opt("--off-policy-mask-threshold", help="TRL's off-policy sequence mask against the stored logprobs (nats; default off).")] = None,
    epochs: Annotated[int, Opt("--epochs", help="Optimisation passes over each batch of stored samples (GRPO's mu).")] = 1,
    batch_size: Annotated[int | None, Opt("--per-device-batch-size", "--batch-size", help="Sequences per process per micro-step (default: one group).")] = None,
    grad_accum: Annotated[int, Opt("--grad-accum", help="Micro-steps per optimizer step.")] = 1,
    max_prompt_length: Annotated[int | None, Opt("--max-prompt-length", help="Keep the last N prompt tokens.")] = None,
    max_completion_length: Annotated[int | None, Opt("--max-completion-length", help="Keep the first N completion tokens.")] = None,
    gradient_checkpointing: Annotated[bool, Opt("--gradient-checkpointing", help="Trade compute for memory.")] = False,
    bf16: Annotated[bool | None, Opt("--bf16/--no-bf16", help="bfloat16 training (default: on a GPU that supports it, off on CPU).")] = None,
    lora_r: Annotated[int, Opt("--lora-r", help="LoRA rank (0 = full fine-tuning).")] = 0,
    lora_alpha: Annotated[int, Opt("--lora-alpha")] = 16,
    lora_dropout: Annotated[float, Opt("--lora-dropout")] = 0.0,
    lora_target_modules: Annotated[str, Opt("--lora-target-modules", help="Comma-separated module names, or all-linear.")] = "all-linear",
    lora_save: Annotated[str, Opt("--lora-save", help="merged: a full model in --output-dir (adapter in OUTPUT/adapter); adapter: only the peft adapter.")] = "merged",
    metrics: Annotated[str | None, Opt("--metrics", help="Metrics JSONL (default OUTPUT_DIR/metrics.jsonl).")] = None,
    report_to: Annotated[str, Opt("--report-to", help="Live dashboards through TRL: tensorboard, wandb or none.")] = "none",
    logging_steps: Annotated[int, Opt("--logging-steps", help="Log metrics every N optimizer steps.")] = 1,
    overwrite: Annotated[bool, Opt("--overwrite", help="Replace a non-empty --output-dir.")] = False,
    if_empty: Annotated[str, Opt("--if-empty", help="When no group carries a learning signal: fail (exit 3), or keep the model: a record with format `unchanged`, steps 0 and path = --model.")] = "fail",
    num_processes: Annotated[int, Opt("--num-processes", help="Data-parallel processes (all machines); >1 starts `accelerate launch`.")] = 1,
    accelerate_config: Annotated[str | None, Opt("--accelerate-config", help="accelerate config file (DeepSpeed / FSDP; see examples/accelerate/).")] = None,
    num_machines: Annotated[int, Opt("--num-machines", help="Machines taking part (multi-node).")] = 1,
    machine_rank: Annotated[int, Opt("--machine-rank", help="This machine's rank (Slurm: $SLURM_NODEID).")] = 0,
    main_process_ip: Annotated[str | None, Opt("--main-process-ip", help="Address of the rank-0 machine.")] = None,
    main_process_port: Annotated[int | None, Opt("--main-process-port", help="Port on the rank-0 machine (default: a free one; set it for multi-node).")] = None,
    seed: Seed = 0,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    if report_to not in ("none", "tensorboard", "wandb"):
        raise UsageError("--report-to must be tensorboard, wandb or none")
    if num_processes < 1:
        raise UsageError("--num-processes must be at least 1")
    cfg = TrainConfig(
        model=model, output_dir=output_dir, inputs=list(inputs or ["-"]), role=role,
        include_hinted=include_hinted, designer_fraction=designer_fraction, group_size=group_size,
        loss_type=loss_type, beta=beta, ref_model=ref_model, epsilon=epsilon, epsilon_high=epsilon_high,
        scale_rewards=scale_rewards, learning_rate=lr, temperature=temperature, epochs=epochs,
        off_policy_mask_threshold=off_policy_mask,
        per_device_batch_size=batch_size, grad_accum=grad_accum, max_prompt_length=max_prompt_length,
        max_completion_length=max_completion_length, max_grad_norm=max_grad_norm,
        weight_decay=weight_decay, warmup_ratio=warmup_ratio, lr_scheduler=lr_scheduler,
        gradient_checkpointing=gradient_checkpointing, bf16=bf16, lora_r=lora_r,
        lora_alpha=lora_alpha, lora_dropout=lora_dropout, lora_target_modules=lora_target_modules,
        lora_save=lora_save, seed=seed, metrics_path=metrics, report_to=report_to,
        logging_steps=logging_steps, overwrite=overwrite,
    )
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
        if if_empty not in ("fail", "keep"):
            raise UsageError("--if-empty must be fail or keep")
        try:
            groups, stats = load_groups(cfg)
        except NothingToTrain as e:
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
            log.warning("no learning signal this round (%s); keeping %s unchanged", info["reason"], cfg.model)
        else:
            info = _train(cfg, groups, stats, num_processes, accelerate_config=accelerate_config,
                          num_machines=num_machines, machine_rank=machine_rank,
                          main_process_ip=main_process_ip, main_process_port=main_process_port)
    finally:
        if spool is not None:
            os.unlink(spool.name)
    if info is None:  # a machine of rank > 0: the main machine writes the record
        return
    if info["steps"]:
        log.info("checkpoint %s (%s) after %d steps, loss %.4g", info["path"], info["format"], info["steps"],
                 info["train_loss"])
    rec = new_record("checkpoint", make_id("ckpt", info["path"], info["base_model"], role, seed), [], **info)
    with open_output(output) as out:
        out.write(rec)


def _unchanged(cfg: TrainConfig, e: NothingToTrain) -> dict:
    path = str(Path(cfg.model).resolve()) if cfg.model else ""
    return {"path": path, "base_model": path, "role": cfg.role, "format": "unchanged", "metrics_path": None,
            "steps": 0, "samples": 0, "groups": {"designer": 0, "agent": 0},
            "skipped": dict(e.stats.skipped), "reason": e.problem}


def _train(cfg: TrainConfig, groups: list, stats: Any, num_processes: int, **launch_opts: Any) -> dict | None:
    """Check the settings against the data, then train here or under accelerate."""
    from ..train.grpo import check_config, plan_batches

    check_config(cfg)
    plan = plan_batches(cfg, groups, num_processes)
    log.info(
        "%d groups (designer %d, agent %d), %d samples, group size %d, %d optimizer steps; skipped %s",
        len(groups), stats.groups["designer"], stats.groups["agent"], stats.samples,
        plan["group_size"], plan["steps"], dict(stats.skipped) or "nothing",
    )
    if plan["left_out_groups"]:
        log.warning("%d groups do not fill a whole batch of groups and are left out this round",
                    plan["left_out_groups"])
    if stats.truncated_prompts or stats.truncated_completions:
        log.warning("truncated %d prompts and %d completions to the length limits",
                    stats.truncated_prompts, stats.truncated_completions)
    if num_processes > 1 or launch_opts["num_machines"] > 1 or launch_opts["accelerate_config"]:
        from ..train.launch import launch

        return launch(cfg, num_processes, **launch_opts)
    from ..train.grpo import run

    with contextlib.redirect_stdout(sys.stderr):
        return run(cfg)


main = entry(app, "spade-train")
