"""One spade-train run: its settings (`options.TrainSettings`) plus what the command
line gives per run (model, output directory, inputs, seed), resolved once by the CLI
and handed to every process.

The launcher writes this dataclass as JSON and each `accelerate launch` worker reads it
back, so all ranks train with exactly the same settings (and read the same input files:
stdin is spooled to a file first).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..stage_settings import LOSS_TYPES, TrainSettings

__all__ = ["LOSS_TYPES", "TrainJob"]


@dataclass
class TrainJob(TrainSettings):
    model: str = ""
    """Local HF model directory (config.json) or a peft adapter directory (adapter_config.json)."""
    output_dir: str = ""
    """Where the new checkpoint goes (model + tokenizer in HF format)."""
    inputs: list[str] = field(default_factory=lambda: ["-"])
    seed: int = 0
    metrics_path: str | None = None
    logprob_warn: float = 0.5
    """Warn when stored logprobs differ from the model's by more than this (nats/token)."""

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(dataclasses.asdict(self), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> TrainJob:
        return cls(**json.loads(Path(path).read_text()))

    @property
    def metrics_file(self) -> str:
        return self.metrics_path or str(Path(self.output_dir) / "metrics.jsonl")
