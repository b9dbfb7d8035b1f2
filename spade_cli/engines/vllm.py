"""vLLM engine (GPU): the offline `LLM` with tensor parallelism.

One `llm.generate` call takes the whole batch as `TokensPrompt`s with one
`SamplingParams` per request, and vLLM's scheduler batches everything in flight
(continuous batching, prefix caching), so callers should hand over all episodes of a
step at once. Seeds are per request (vLLM's per-request generators): a request's
output does not depend on its batch mates. Logprobs come from vLLM with
`logprobs_mode="processed_logprobs"` (after temperature/top-p), as TRL does.

vllm is imported only when this engine is built, so the rest of the toolchain runs
without it.

The vLLM API this relies on (`vllm/entrypoints/llm.py`, `vllm/sampling_params.py`,
`vllm/logprobs.py`): `LLM(model, *, tensor_parallel_size, dtype, seed,
gpu_memory_utilization, enforce_eager, trust_remote_code, **EngineArgs)`;
`LLM.generate(prompts, sampling_params, *, use_tqdm)` with one `SamplingParams` per
prompt, returned in prompt order; `SamplingParams(logprobs=0)` returns the sampled
token's logprob only; `CompletionOutput.logprobs` is one `{token_id: Logprob}` per
generated token, as a list or as vLLM's `FlatLogprobs` (same indexing); stop strings are
cut from `text` (`include_stop_str_in_output=False`); `finish_reason` is "stop",
"length" or "abort". dtype "auto" means bfloat16 on a GPU, as for the hf engine:
vLLM's own "auto" turns a float32 checkpoint into float16.

A new checkpoint (the next round's model) needs a new `LLM`: `reload(model)` shuts the
running engine down (its engine-core process and GPU memory) and starts one on the new
weights with the same settings.
"""

from __future__ import annotations

import logging

from ..errors import ResourceError
from .base import Engine, Generation, Sampling, as_list, first_line

log = logging.getLogger("spade")


class VLLMEngine(Engine):
    name = "vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        dtype: str | None = None,
        max_model_len: int | None = None,
        seed: int = 0,
        enforce_eager: bool = False,
        trust_remote_code: bool = False,
        **_ignored,
    ):
        try:
            import vllm  # noqa: F401
        except ImportError as e:
            raise ResourceError(f"engine vllm: cannot import vllm ({first_line(e)})") from None
        self._settings = dict(
            tensor_parallel_size=int(tensor_parallel_size),
            gpu_memory_utilization=float(gpu_memory_utilization),
            dtype=_dtype(dtype),
            seed=int(seed),
            enforce_eager=bool(enforce_eager),
            trust_remote_code=bool(trust_remote_code),
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
        )
        if max_model_len:
            self._settings["max_model_len"] = int(max_model_len)
        self._max_model_len = max_model_len
        self.llm = None
        self._start(model)

    def _start(self, model: str) -> None:
        from vllm import LLM

        try:
            self.llm = LLM(model=model, **self._settings)
        except (OSError, RuntimeError, ValueError) as e:
            raise ResourceError(
                f"engine vllm: cannot start on {model!r}: {first_line(e)}"
            ) from None
        # The same tokenizer class every other engine loads, so chat_ids agree across engines.
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(
            model, trust_remote_code=self._settings["trust_remote_code"]
        )
        super().__init__(model, tokenizer, self._max_model_len or _context(self.llm) or None)

    def reload(self, model: str) -> None:
        """Serve `model` (e.g. the checkpoint a training round wrote) instead: the running
        engine is shut down first, so the two never hold GPU memory at once."""
        self.close()
        self._start(model)

    def generate(
        self, prompts: list[list[int]], sampling: Sampling | list[Sampling]
    ) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        samplings = as_list(sampling, len(prompts))
        results: list[Generation | None] = [None] * len(prompts)
        todo, inputs, params = [], [], []
        for i, (p, s) in enumerate(zip(prompts, samplings, strict=True)):
            room = self.max_model_len - len(p)
            if room <= 0 or s.max_tokens <= 0:
                results[i] = Generation(
                    "", list(p), [], [], "length" if s.max_tokens <= 0 else "context"
                )
                continue
            todo.append(i)
            inputs.append(TokensPrompt(prompt_token_ids=list(p)))
            params.append(
                SamplingParams(
                    temperature=float(s.temperature),
                    top_p=float(s.top_p) if s.temperature > 0 else 1.0,
                    max_tokens=min(int(s.max_tokens), room),
                    seed=s.seed,
                    stop=list(s.stop) or None,
                    logprobs=0,  # just the sampled token's logprob
                    skip_special_tokens=True,
                )
            )
        if todo:
            if self.llm is None:
                raise ResourceError("engine vllm: generate after close (reload a model first)")
            outs = self.llm.generate(inputs, sampling_params=params, use_tqdm=False)
            for i, out in zip(todo, outs, strict=True):
                results[i] = _generation(out.outputs[0], list(prompts[i]))
        return results  # type: ignore[return-value]

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        # The engine core runs in its own process: shut it down explicitly, since dropping
        # the last reference frees nothing while a cycle still holds the LLM.
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        try:
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
        except Exception as e:  # noqa: BLE001 - best effort at shutdown
            log.debug("vllm engine core shutdown: %s", first_line(e))
        del llm, core
        try:
            import gc

            import torch
            from vllm.distributed.parallel_state import (
                destroy_distributed_environment,
                destroy_model_parallel,
            )

            destroy_model_parallel()
            destroy_distributed_environment()
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 - best effort at shutdown
            log.debug("vllm engine teardown: %s", first_line(e))


def _generation(c, prompt_ids: list[int]) -> Generation:
    """Our Generation from a vLLM CompletionOutput."""
    if c.finish_reason not in ("stop", "length"):
        raise ResourceError(f"engine vllm: request ended with finish_reason={c.finish_reason!r}")
    ids = list(c.token_ids)
    lps = None
    if c.logprobs is not None:
        # One {token_id: Logprob} per generated token; the sampled token is always a key
        # (logprobs=0 asks for it alone). Indexing works on lists and FlatLogprobs alike.
        if len(c.logprobs) != len(ids):
            log.warning(
                "vllm returned %d logprobs for %d tokens; dropping them", len(c.logprobs), len(ids)
            )
        else:
            lps = [float(c.logprobs[k][tok].logprob) for k, tok in enumerate(ids)]
    return Generation(c.text, prompt_ids, ids, lps, c.finish_reason)


def _dtype(dtype: str | None) -> str:
    """The dtype to ask vLLM for. "auto" means what the CLI documents (bf16 on a GPU):
    vLLM's own "auto" runs a float32 checkpoint (the tiny model, fp32 training output)
    in float16. Asking torch whether the GPU has bf16 would create a CUDA context in
    this process, which forces vLLM's workers to spawn and holds GPU memory, so GPUs
    without bf16 (before Ampere) need an explicit --dtype float16."""
    if dtype not in (None, "auto"):
        return str(dtype)
    try:
        import torch

        if torch.cuda.is_available():  # a device count, no context
            return "bfloat16"
    except Exception:  # noqa: BLE001 - no usable torch: let vLLM decide
        pass
    return "auto"


def _context(llm) -> int | None:
    """The engine's context window; where vLLM keeps it has moved between versions."""
    for path in ("llm_engine.model_config", "llm_engine.vllm_config.model_config", "model_config"):
        obj = llm
        for part in path.split("."):
            obj = getattr(obj, part, None)
        n = getattr(obj, "max_model_len", None)
        if isinstance(n, int) and n > 0:
            return n
    return None
