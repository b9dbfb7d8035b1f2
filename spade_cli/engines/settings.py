"""The engine settings shared by every command that generates (spade-design,
spade-rollout, spade-hint, spade-eval) and by the `[model]` table of a loop config:
declared once here, built into an engine by `EngineSettings.load`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..declare import option

ENGINES = ("auto", "hf", "vllm", "openai")


@dataclass
class EngineSettings:
    TABLE: ClassVar[str] = "model"

    path: str = option(
        "",
        "--model",
        "-m",
        help="""Model directory (HF format) or hub name; for
        --engine openai, the served model name (or a local path that also gives the
        tokenizer). In a loop config, empty builds the tiny offline model into the run
        directory; each later round uses the previous round's checkpoint.""",
    )
    engine: str = option(
        "auto",
        "--engine",
        choices=ENGINES,
        help="""Generation engine: auto
        (vllm when installed and a GPU is present, else hf), vllm, hf or openai.""",
    )
    base_url: str | None = option(
        None,
        "--base-url",
        help="""OpenAI-compatible endpoint, e.g.
        http://host:8000/v1 (--engine openai; API key from SPADE_API_KEY or
        OPENAI_API_KEY).""",
    )
    tokenizer: str | None = option(
        None,
        "--tokenizer",
        help="""Local tokenizer directory
        (--engine openai when --model is a served name).""",
    )
    api: str = option(
        "completions",
        "--api",
        choices=("completions", "chat"),
        help="""--engine
        openai: `completions` (token-id prompts, exact ids) or `chat` (messages; for servers
        that take no token prompts).""",
    )
    tensor_parallel: int = option(
        1, "--tensor-parallel", "--tp", min=1, help="vLLM tensor-parallel size (GPUs per model)."
    )
    gpu_memory: float = option(
        0.85, "--gpu-memory", min=0.05, max=1.0, help="vLLM: fraction of GPU memory to use."
    )
    device: str = option("auto", "--device", help="hf: cpu, cuda, cuda:1 or auto.")
    dtype: str = option(
        "auto",
        "--dtype",
        choices=("auto", "float32", "bfloat16", "float16"),
        help="auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16.",
    )
    max_batch_size: int | None = option(
        None,
        "--max-batch-size",
        min=1,
        help="""hf: most
        sequences per generate call (default: every sequence of the call, e.g. all episodes
        in flight).""",
    )
    max_model_len: int | None = option(
        None, "--max-model-len", min=16, help="Context window to use (default: the model's)."
    )

    def load(self, seed: int = 0, model: str | None = None):
        """The engine these options describe (`model` overrides `path`)."""
        from . import load_engine

        opts = dict(
            base_url=self.base_url,
            tokenizer=self.tokenizer,
            api=self.api,
            tensor_parallel_size=self.tensor_parallel,
            gpu_memory_utilization=self.gpu_memory,
            device=self.device,
            dtype=self.dtype,
            max_batch_size=self.max_batch_size,
            max_model_len=self.max_model_len,
            seed=seed,
        )
        return load_engine(
            model or self.path, self.engine, **{k: v for k, v in opts.items() if v is not None}
        )
