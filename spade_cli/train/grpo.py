"""GRPO on stored samples with TRL's GRPOTrainer: model loading, the run, the checkpoint.

The loss is TRL's own (`GRPOTrainer._compute_loss`, every `loss_type` it offers); this
module only feeds it stored samples (see feeder.py), sets the knobs and saves a
checkpoint the next round's engines load directly. The TRL subclass, which counts tokens
for `perf/tokens_per_second` and writes metrics under namespaced keys, is trainer.py.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from .. import timing
from ..errors import ResourceError, UsageError
from ..logs import log
from . import optimizer_state
from .batches import plan_batches
from .config import LOSS_TYPES, TrainJob
from .design_replay import design_replay_for
from .feeder import StoredRollouts, quiet_padding_warning, stored_reward
from .samples import BuildStats, Sample, mix_groups, read_groups

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


def model_kind(path: str) -> str:
    """'full' for an HF model directory, 'adapter' for a peft adapter; anything else is an error."""
    p = Path(path)
    if not p.is_dir():
        raise ResourceError(
            f"{path}: not a model directory (spade-train loads local HF checkpoints)"
        )
    if (p / "adapter_config.json").is_file():
        kind = "adapter"
    elif (p / "config.json").is_file():
        kind = "full"
    else:
        raise ResourceError(
            f"{path}: not a model: no config.json (HF model) or adapter_config.json (peft adapter)"
        )
    if not any((p / w).is_file() for w in WEIGHT_FILES) and not list(p.glob("*.safetensors")):
        raise ResourceError(f"{path}: has {kind} config but no weights (*.safetensors / *.bin)")
    return kind


def load_groups(cfg: TrainJob) -> tuple[list[list[Sample]], BuildStats]:
    groups, stats = read_groups(
        cfg.inputs,
        cfg.role,
        cfg.include_hinted,
        cfg.max_prompt_length,
        cfg.max_completion_length,
        cfg.designer_baseline,
        cfg.designer_scale,
        cfg.designer_scale_cap,
        cfg.designer_interval or 1,
        cfg.group_size,
        cfg.seed if cfg.shuffle_designer_rewards else None,
        compact_filter=cfg.compact_filter,
        designer_negatives=cfg.designer_negatives,
    )
    groups = mix_groups(groups, cfg.designer_fraction, cfg.seed)
    stats.groups = {"designer": 0, "agent": 0}
    stats.samples = 0
    for g in groups:
        stats.groups[g[0].role] += 1
        stats.samples += len(g)
    return groups, stats


def check_config(cfg: TrainJob) -> None:
    if cfg.loss_type not in LOSS_TYPES:
        raise UsageError(f"--loss-type must be one of {', '.join(LOSS_TYPES)}")
    if cfg.scale_rewards not in ("group", "batch", "none"):
        raise UsageError("--scale-rewards must be group, batch or none")
    if cfg.lora_save not in ("merged", "adapter"):
        raise UsageError("--lora-save must be merged or adapter")
    if cfg.epochs < 1 or cfg.grad_accum < 1:
        raise UsageError("--epochs and --grad-accum must be at least 1")
    if cfg.beta < 0:
        raise UsageError("--beta must be >= 0")
    if cfg.ref_model and cfg.beta == 0:
        raise UsageError("--ref-model is only used with --beta > 0 (the KL term)")
    if cfg.design_replay_from and cfg.design_replay <= 0:
        raise UsageError("--design-replay-from is only used with --design-replay > 0")
    out = Path(cfg.output_dir)
    if out.exists() and any(out.iterdir()) and not cfg.overwrite:
        raise UsageError(
            f"{cfg.output_dir}: exists and is not empty (use --overwrite to replace it)"
        )
    model_kind(cfg.model)
    if cfg.optimizer_state not in optimizer_state.MODES:
        raise UsageError("--optimizer-state must be fresh or carry")
    if cfg.optimizer == "sgd" and cfg.weight_decay > 0:
        raise UsageError(
            "--optimizer sgd takes no --weight-decay (SGD's is an L2 term at the step's learning rate)"
        )
    if cfg.optimizer_state == "carry" and cfg.optimizer != "adamw":
        raise UsageError("--optimizer-state carry resumes AdamW's moments: use --optimizer adamw")
    if cfg.optimizer_state == "carry" and (cfg.lora_r > 0 or model_kind(cfg.model) == "adapter"):
        raise UsageError("--optimizer-state carry needs full fine-tuning (--lora-r 0)")
    if cfg.optimizer_state == "carry" and cfg.accelerate_config:
        raise UsageError(
            "--optimizer-state carry keeps one process's AdamW state: not with DeepSpeed or FSDP"
        )
    if cfg.ref_model:
        if cfg.lora_r > 0 or model_kind(cfg.model) == "adapter":
            raise UsageError(
                "--ref-model does not apply to LoRA: the reference is the model with its adapter off"
            )
        if model_kind(cfg.ref_model) != "full":
            raise UsageError(f"{cfg.ref_model}: the reference model must be a full HF model")


# --------------------------------------------------------------------------- model


def _use_bf16(cfg: TrainJob) -> bool:
    import torch

    if cfg.bf16 is not None:
        if cfg.bf16 and not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
            raise UsageError("--bf16 needs a GPU with bfloat16 support")
        return cfg.bf16
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def load_policy(cfg: TrainJob, bf16: bool) -> tuple[Any, Any, str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kind = model_kind(cfg.model)
    dtype = torch.bfloat16 if bf16 else torch.float32
    try:
        if kind == "adapter":
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(
                cfg.model, is_trainable=True, dtype=dtype
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype)
        tok_dir = cfg.model
        if kind == "adapter" and not (Path(cfg.model) / "tokenizer_config.json").exists():
            tok_dir = model.peft_config["default"].base_model_name_or_path
        tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    except Exception as e:  # noqa: BLE001 - corrupt weights raise many different types
        raise ResourceError(
            f"{cfg.model}: cannot load the model: {type(e).__name__}: {e}"
        ) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, kind


# --------------------------------------------------------------------------- the run


def build_trainer(
    cfg: TrainJob, groups: list[list[Sample]], work_dir: str
) -> tuple[Any, dict, str]:
    """A ready GRPOTrainer over stored samples (not yet trained), the batch plan, and the
    kind of starting checkpoint ('full' or 'adapter')."""
    import torch
    from accelerate import PartialState
    from datasets import Dataset
    from peft import LoraConfig
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig

    from .trainer import MetricsFile, SpadeGRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented path
    quiet_padding_warning()
    state = PartialState(cpu=not torch.cuda.is_available())
    plan = plan_batches(cfg, groups, state.num_processes)
    bf16 = _use_bf16(cfg)
    model, tokenizer, kind = load_policy(cfg, bf16)
    max_completion = cfg.max_completion_length or max(
        len(s.completion_ids) for g in groups for s in g
    )
    args = GRPOConfig(
        output_dir=work_dir,
        per_device_train_batch_size=plan["per_device"],
        gradient_accumulation_steps=plan["grad_accum"],
        steps_per_generation=plan["steps_per_generation"],
        num_generations=plan["group_size"],
        num_iterations=cfg.epochs,
        num_train_epochs=1,
        learning_rate=cfg.learning_rate,
        **({"optim": "sgd"} if cfg.optimizer == "sgd" else {}),  # else TRL's AdamW
        lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        loss_type=cfg.loss_type,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high,
        scale_rewards=cfg.scale_rewards,
        temperature=cfg.temperature,
        max_completion_length=max_completion,
        importance_sampling_level="sequence" if cfg.loss_type == "luspo" else "token",
        off_policy_mask_threshold=cfg.off_policy_mask_threshold,
        bf16=bf16,
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=cfg.gradient_checkpointing,
        logging_steps=cfg.logging_steps,
        save_strategy="no",
        report_to=[] if cfg.report_to == "none" else [cfg.report_to],
        seed=cfg.seed,
        data_seed=cfg.seed,
        disable_tqdm=True,
        log_completions=False,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,
    )
    peft_config = None
    if cfg.lora_r > 0 and kind == "full":
        targets = cfg.lora_target_modules
        peft_config = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            task_type="CAUSAL_LM",
            target_modules=targets
            if targets == "all-linear"
            else [t.strip() for t in targets.split(",")],
        )
    elif cfg.lora_r > 0:
        log.info(
            "continuing to train the adapter in %s (--lora-r applies to new adapters only)",
            cfg.model,
        )
    rollouts = StoredRollouts(groups, plan["group_size"])
    dataset = Dataset.from_dict({"prompt": [str(i) for i in range(len(groups))]})
    # With beta > 0 TRL builds (and, under DeepSpeed/FSDP, shards) the reference model
    # from the policy's config name; pointing that name at --ref-model for the duration
    # of __init__ lets TRL do all of it for our reference.
    name = model.config._name_or_path
    if cfg.ref_model and cfg.beta > 0:
        model.config._name_or_path = cfg.ref_model
    try:
        trainer = SpadeGRPOTrainer(
            model=model,
            reward_funcs=[stored_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollouts,
            peft_config=peft_config,
        )
    finally:
        model.config._name_or_path = name
    trainer._spade_tokens, trainer._spade_total, trainer._spade_t0 = 0, 0.0, time.perf_counter()
    trainer._spade_rollouts = rollouts
    trainer._spade_checked, trainer._spade_logp_warn = False, cfg.logprob_warn
    trainer._spade_tis_cap = cfg.tis_cap if cfg.tis else None
    trainer._spade_replay = design_replay_for(
        cfg.design_replay, cfg.design_replay_from or cfg.inputs, cfg.seed
    )
    if cfg.optimizer_state == "carry":
        trainer._spade_optimizer_from = optimizer_state.saved_in(cfg.model)
    # TRL's printer dumps every log dict to stdout; MetricsFile logs one compact line instead.
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(
        MetricsFile(cfg.metrics_path or str(Path(work_dir) / "metrics.jsonl"), trainer)
    )
    plan["lora"] = peft_config is not None or kind == "adapter"
    return trainer, plan, kind


def run(cfg: TrainJob) -> dict[str, Any] | None:
    """Train one round. Every process calls this; the main process returns the result
    (checkpoint path, steps, stats), the others None."""
    import torch
    from accelerate import PartialState

    check_config(cfg)
    if cfg.threads:
        # A stage forked from the loop inherits the loop's thread-pool size; set here,
        # before any op runs, training can take more threads than the loop's generation
        # stages, which leave the other cores to their sandbox workers.
        torch.set_num_threads(cfg.threads)
    state = PartialState(cpu=not torch.cuda.is_available())
    groups, stats = load_groups(cfg)
    out = Path(cfg.output_dir)
    # Train into OUT.partial and rename at the end: OUT exists only once it is complete.
    work = Path(f"{cfg.output_dir}.partial")
    if state.is_main_process and work.exists():
        shutil.rmtree(work)
    state.wait_for_everyone()
    with timing.phase("load"):
        trainer, plan, kind = build_trainer(cfg, groups, str(work))

    t0 = time.perf_counter()
    with timing.phase("train"):
        result = trainer.train()
    seconds = time.perf_counter() - t0
    tokenizer = trainer.processing_class
    if plan["lora"] and cfg.lora_save == "adapter":
        trainer.save_model(str(work))
        fmt = "adapter"
    elif plan["lora"]:
        trainer.save_model(str(work / "adapter"))
        fmt = "merged"
    else:
        trainer.save_model(str(work))
        fmt = "full"
    if cfg.optimizer_state == "carry" and state.is_main_process:
        optimizer_state.save(trainer.optimizer, work)
    state.wait_for_everyone()
    if not state.is_main_process:
        return None
    if fmt == "merged":
        _merge_adapter(work / "adapter", work, tokenizer)
    tokenizer.save_pretrained(str(work))
    if cfg.report_to == "none":
        shutil.rmtree(work / "runs", ignore_errors=True)
    if out.exists():
        shutil.rmtree(out)
    os.replace(work, out)
    metrics = Path(cfg.metrics_path) if cfg.metrics_path else out / "metrics.jsonl"
    info = {
        "path": str(out.resolve()),
        "base_model": str(Path(cfg.model).resolve()),
        "role": cfg.role,
        "format": fmt,
        "metrics_path": str(metrics.resolve()),
        "steps": int(result.global_step),
        "samples": stats.samples,
        "groups": stats.groups,
        "group_size": plan["group_size"],
        "left_out_groups": plan["left_out_groups"],
        "padded_rows": trainer._spade_rollouts.padded * state.num_processes,
        "skipped": dict(stats.skipped),
        "truncated": {
            "prompts": stats.truncated_prompts,
            "completions": stats.truncated_completions,
        },
        "processes": state.num_processes,
        "threads": torch.get_num_threads(),
        "replayed_designs": len(trainer._spade_replay.designs) if trainer._spade_replay else 0,
        "seconds": round(seconds, 3),
        "train_loss": float(result.training_loss),
    }
    (out / "spade_train.json").write_text(
        json.dumps({"result": info, "config": cfg.__dict__}, indent=1)
    )
    return info


def _merge_adapter(adapter_dir: Path, target: Path, tokenizer: Any) -> None:
    """Fold the adapter into the base weights so vLLM / transformers load `target` as a
    plain model; reloading from disk works the same after DeepSpeed/FSDP sharding."""
    from peft import AutoPeftModelForCausalLM

    merged = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
