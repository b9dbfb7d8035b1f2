"""vLLM engine (GPU): the offline `LLM` with tensor parallelism.

One `llm.generate` call takes the whole batch as `TokensPrompt`s with one
`SamplingParams` per request, and vLLM's scheduler batches everything in flight
(continuous batching, prefix caching), so callers should hand over all episodes of a
step at once. Seeds are per request (vLLM's per-request generators): a request's
output does not depend on its batch mates. Logprobs come from vLLM with
`logprobs_mode="processed_logprobs"` (after temperature/top-p), as TRL does.

vllm is imported only when this engine is built, so the rest of the toolchain runs
without it.
"""

from __future__ import annotations

import logging

from ..errors import ResourceError
from .base import Engine, Generation, Sampling, as_list, first_line

log = logging.getLogger("spade")


class VLLMEngine(Engine):
    name = "vllm"

    def __init__(self, model: str, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.85,
                 dtype: str | None = None, max_model_len: int | None = None, seed: int = 0,
                 enforce_eager: bool = False, trust_remote_code: bool = False, **_ignored):
        try:
            from vllm import LLM
        except ImportError as e:
            raise ResourceError(f"engine vllm: cannot import vllm ({first_line(e)})") from None
        kwargs = dict(
            model=model,
            tensor_parallel_size=int(tensor_parallel_size),
            gpu_memory_utilization=float(gpu_memory_utilization),
            dtype=dtype or "auto",
            seed=int(seed),
            enforce_eager=bool(enforce_eager),
            trust_remote_code=trust_remote_code,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
        )
        if max_model_len:
            kwargs["max_model_len"] = int(max_model_len)
        try:
            self.llm = LLM(**kwargs)
        except (OSError, RuntimeError, ValueError) as e:
            raise ResourceError(f"engine vllm: cannot start on {model!r}: {first_line(e)}") from None
        # The same tokenizer class every other engine loads, so chat_ids agree across engines.
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        super().__init__(model, tokenizer, max_model_len or _context(self.llm) or None)

    def generate(self, prompts: list[list[int]], sampling: Sampling | list[Sampling]) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        samplings = as_list(sampling, len(prompts))
        results: list[Generation | None] = [None] * len(prompts)
        todo, inputs, params = [], [], []
        for i, (p, s) in enumerate(zip(prompts, samplings, strict=True)):
            room = self.max_model_len - len(p)
            if room <= 0 or s.max_tokens <= 0:
                results[i] = Generation("", list(p), [], [], "length" if s.max_tokens <= 0 else "context")
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
            outs = self.llm.generate(inputs, sampling_params=params, use_tqdm=False)
            for i, out in zip(todo, outs, strict=True):
                c = out.outputs[0]
                ids = list(c.token_ids)
                lps = None
                if c.logprobs is not None:
                    lps = [float(step[tok].logprob) for step, tok in zip(c.logprobs, ids, strict=False)]
                reason = "length" if c.finish_reason == "length" else "stop"
                results[i] = Generation(c.text, list(prompts[i]), ids, lps, reason)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        try:
            import gc

            import torch

            del llm
            gc.collect()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


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
