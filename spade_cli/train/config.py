"""Settings of one spade-train run, resolved once by the CLI and handed to every process.

The launcher writes this dataclass as JSON and each `accelerate launch` worker reads it
back, so all ranks train with exactly the same settings (and read the same input files:
stdin is spooled to a file first).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")


@dataclass
class TrainConfig:
    model: str
    """Local HF model directory (config.json) or a peft adapter directory (adapter_config.json)."""
    output_dir: str
    """Where the new checkpoint goes (model + tokenizer in HF format)."""
    inputs: list[str] = field(default_factory=lambda: ["-"])
    role: str = "both"
    include_hinted: bool = False
    """Also train the agent on hinted episodes (their own groups)."""
    designer_fraction: float | None = None
    """Share of designer groups among all groups (None = every group of the round)."""
    group_size: int | None = None
    """GRPO's num_generations; None = the largest group. Smaller groups are padded with
    rows that carry no loss token and no reward (TRL excludes them from the baseline)."""
    loss_type: str = "dapo"
    beta: float = 0.0
    """KL coefficient against the reference model (0 = no reference model is loaded)."""
    ref_model: str | None = None
    """Reference model for the KL term; None = the starting policy of this round."""
    epsilon: float = 0.2
    epsilon_high: float | None = None
    scale_rewards: str = "group"
    learning_rate: float = 1e-6
    temperature: float = 1.0
    """Temperature of the policy whose logprobs are trained (match the sampling temperature)."""
    off_policy_mask_threshold: float | None = None
    """TRL's off-policy sequence mask: drop negative-advantage sequences whose mean KL from
    the stored sampling logprobs exceeds this (None = off)."""
    logprob_warn: float = 0.5
    """Warn when stored logprobs differ from the model's by more than this (nats/token)."""
    epochs: int = 1
    """Optimisation passes over each batch of stored samples (GRPO's mu, TRL num_iterations);
    passes after the first are clipped against the policy that produced the batch."""
    per_device_batch_size: int | None = None
    """Sequences per process per micro-step; None = one group."""
    grad_accum: int = 1
    max_prompt_length: int | None = None
    max_completion_length: int | None = None
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0
    lr_scheduler: str = "constant"
    gradient_checkpointing: bool = False
    bf16: bool | None = None
    """None = bf16 on a GPU that supports it, fp32 on CPU (TRL's default True fails on CPU)."""
    lora_r: int = 0
    """0 = full fine-tuning; >0 trains a LoRA adapter of this rank through peft."""
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: str = "all-linear"
    lora_save: str = "merged"
    """merged: output_dir is a full model (adapter kept in output_dir/adapter);
    adapter: output_dir is the adapter only (peft format)."""
    seed: int = 0
    metrics_path: str | None = None
    report_to: str = "none"
    logging_steps: int = 1
    overwrite: bool = False

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(dataclasses.asdict(self), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        return cls(**json.loads(Path(path).read_text()))

    @property
    def metrics_file(self) -> str:
        return self.metrics_path or str(Path(self.output_dir) / "metrics.jsonl")
