"""Generation engines behind one interface (see base.py for the conventions).

    from spade_cli.engines import load_engine, Sampling, Generation
    engine = load_engine("models/tiny", engine="auto")
    gens = engine.chat([[{"role": "user", "content": "hi"}]], Sampling(max_tokens=32, seed=0))

Engines: "hf" (transformers, CPU or GPU), "vllm" (GPU, tensor parallel), "openai" (an
OpenAI-compatible HTTP server). "auto" picks vllm when it is installed and CUDA is
present, else hf.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .. import timing
from ..errors import ResourceError, UsageError
from .base import Engine, Generation, Sampling, parse_tool_calls

ENGINES = ("auto", "hf", "vllm", "openai")

__all__ = [
    "ENGINES",
    "Engine",
    "Generation",
    "Sampling",
    "load_engine",
    "parse_tool_calls",
    "resolve_engine",
]


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def resolve_engine(engine: str) -> str:
    """The concrete engine name `auto` stands for on this machine."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    if engine != "auto":
        return engine
    return "vllm" if importlib.util.find_spec("vllm") is not None and _cuda() else "hf"


def _looks_local(model: str) -> bool:
    # Hub names are `org/name`; anything else with a path shape is meant to be local.
    return (
        model.startswith((".", "/", "~"))
        or Path(model).expanduser().exists()
        or model.count("/") != 1
    )


def load_engine(model: str, engine: str = "auto", **opts) -> Engine:
    """Build an engine for `model` (a local directory or a hub name).

    Options by engine (others are ignored):
      hf:     device, dtype, max_batch_size, max_model_len, trust_remote_code
      vllm:   tensor_parallel_size, gpu_memory_utilization, dtype, max_model_len, seed,
              enforce_eager, trust_remote_code
      openai: base_url (required), api_key, tokenizer, served_model, api, timeout,
              max_concurrency, max_model_len
    Raises ResourceError (exit 4) for a missing local model or a missing vllm.
    """
    if not model:
        raise UsageError("no model given (--model PATH)")
    kind = resolve_engine(engine)
    if kind != "openai" or opts.get("tokenizer") is None:
        path = Path(model).expanduser()
        if _looks_local(model) and not path.exists():
            raise ResourceError(f"model not found: {model}")
        if path.exists():
            model = str(path)
    with timing.phase("load"):
        engine = _construct(kind, model, opts)
    return timing.timed(engine, "generate", "generate", "chat")


def _construct(kind: str, model: str, opts: dict) -> Engine:
    if kind == "hf":
        from .hf import HFEngine

        return HFEngine(model, **opts)
    if kind == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ResourceError(
                "engine vllm: the vllm package is not installed (pip install 'spade-cli[gpu]')"
            )
        from .vllm import VLLMEngine

        return VLLMEngine(model, **opts)
    from .openai import OpenAIEngine

    return OpenAIEngine(model, **opts)
