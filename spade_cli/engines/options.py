"""Command-line options that choose and configure an engine, shared by every command
that generates (spade-design, spade-rollout, spade-eval): declare them with these
`Annotated` aliases and build the engine with `engine_from_options`."""

from __future__ import annotations

from typing import Annotated

import typer

Model = Annotated[
    str, typer.Option("--model", "-m", help="Model directory (HF format) or hub name; for --engine "
                      "openai, the served model name (or a local path that also gives the tokenizer).")
]
EngineName = Annotated[
    str, typer.Option("--engine", help="auto (vllm when installed and a GPU is present, else hf), "
                      "vllm, hf or openai.")
]
BaseUrl = Annotated[
    str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1 "
                             "(--engine openai; API key from SPADE_API_KEY or OPENAI_API_KEY).")
]
Tokenizer = Annotated[
    str | None, typer.Option("--tokenizer", help="Local tokenizer directory (--engine openai when "
                             "--model is a served name).")
]
Api = Annotated[
    str, typer.Option("--api", help="--engine openai: `completions` (token-id prompts, exact ids) or "
                      "`chat` (messages; for servers that take no token prompts).")
]
TensorParallel = Annotated[
    int, typer.Option("--tensor-parallel", "--tp", min=1, help="vLLM tensor-parallel size (GPUs per model).")
]
GpuMemory = Annotated[
    float, typer.Option("--gpu-memory", min=0.05, max=1.0, help="vLLM: fraction of GPU memory to use.")
]
Device = Annotated[str, typer.Option("--device", help="hf: cpu, cuda, cuda:1 or auto.")]
Dtype = Annotated[str, typer.Option("--dtype", help="auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16.")]
MaxBatch = Annotated[int, typer.Option("--max-batch-size", min=1, help="hf: sequences per generate call.")]
MaxModelLen = Annotated[
    int | None, typer.Option("--max-model-len", min=16, help="Context window to use (default: the model's).")
]


def engine_from_options(model: str, engine: str = "auto", base_url: str | None = None,
                        tokenizer: str | None = None, api: str = "completions", tensor_parallel: int = 1,
                        gpu_memory: float = 0.85, device: str = "auto", dtype: str = "auto",
                        max_batch_size: int = 32, max_model_len: int | None = None, seed: int = 0):
    from . import load_engine

    opts = dict(base_url=base_url, tokenizer=tokenizer, api=api, tensor_parallel_size=tensor_parallel,
                gpu_memory_utilization=gpu_memory, device=device, dtype=dtype,
                max_batch_size=max_batch_size, max_model_len=max_model_len, seed=seed)
    return load_engine(model, engine, **{k: v for k, v in opts.items() if v is not None})
