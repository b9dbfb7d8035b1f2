"""transformers engine: batched `generate` with left padding, on CPU or GPU.

Requests are grouped by their sampling settings (temperature, top_p, max_tokens), each
group sorted by prompt length and cut into batches of at most `max_batch_size`; one
`model.generate` call serves each batch. Per-request stop strings and per-request token
budgets are enforced by a stopping criterion that finishes rows one at a time, and the
logprob of every sampled token is recorded by a logits processor (custom processors
run before generate's temperature/top-p warpers, so it applies the same warpers to a
copy of the raw logits).

Seeds: generate samples from torch's global RNG, so a seed cannot follow one request
through a shared batch as it does in vLLM. When requests carry seeds, each batch is run
under a private RNG seeded from all its requests' seeds: the same call with the same
seeds gives the same tokens (the determinism contract; logprobs agree up to float
rounding, as CPU kernels may split their sums differently), but a request's output also
depends on which other requests share its batch.

On CPU, three costs that grow with the batch and the padding are cut (tokens unchanged,
logprobs up to float rounding): prompts of unequal length are prefilled one distinct
prompt at a time, without padding, and gathered into one left-padded KV cache, so pads
cost no attention or MLP work and the causal kernel applies; that cache is allocated
once for the whole generation instead of being copied by `torch.cat` at every step;
and attention with grouped KV heads goes through sdpa's `enable_gqa` instead of
materialising repeated keys and values per layer and step (transformers does that
whenever an attention mask is present, i.e. for every padded batch).

Also on CPU, prefills continue earlier ones (prefix.py): a multi-turn episode's next
prompt is its last prompt plus the action and the new observation, so only those tokens
are run, not the whole history again.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import defaultdict

from ..errors import ResourceError
from ..records import stable_hash
from .base import Engine, Generation, Sampling, as_list, cut_at_stop, first_line
from .prefix import PREFIX_STORE_BYTES, PrefixStore, prefill

log = logging.getLogger("spade")


class HFEngine(Engine):
    name = "hf"

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        max_batch_size: int | None = None,
        max_model_len: int | None = None,
        trust_remote_code: bool = False,
        **_ignored,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        # transformers draws its loading bars even when stderr is a log file.
        hf_logging.disable_progress_bar()
        if device in (None, "auto"):
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype in (None, "auto"):
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        try:
            tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
            lm = AutoModelForCausalLM.from_pretrained(
                model, dtype=getattr(torch, dtype), trust_remote_code=trust_remote_code
            )
        except OSError as e:
            raise ResourceError(f"cannot load model {model!r}: {first_line(e)}") from None
        tokenizer.padding_side = "left"
        self.lm = lm.to(device).eval()
        if device == "cpu" and getattr(lm.config, "_attn_implementation", None) == "sdpa":
            _register_cpu_sdpa()
            try:
                self.lm.set_attn_implementation(_CPU_SDPA)
            except ValueError as e:  # a transformers that refuses registered functions: plain sdpa
                log.debug("hf engine keeps sdpa attention: %s", first_line(e))
        self._n_layers: int | None = None  # of a plain full-attention KV cache; 0: another kind
        self._prefixes = PrefixStore(PREFIX_STORE_BYTES)
        self.device = device
        # None: every sequence of a call in one generate (callers bound their batches).
        self.max_batch_size = max(1, int(max_batch_size)) if max_batch_size else None
        self._lock = threading.Lock()
        ctx = max_model_len or getattr(lm.config, "max_position_embeddings", None)
        super().__init__(model, tokenizer, ctx)
        gen_eos = lm.generation_config.eos_token_id if lm.generation_config is not None else None
        eos = {gen_eos} if isinstance(gen_eos, int) else set(gen_eos or [])
        self._eos = sorted(eos | self.eos_ids())
        pad = tokenizer.pad_token_id
        self._pad = int(pad if pad is not None else (self._eos[0] if self._eos else 0))

    # ------------------------------------------------------------------ generation

    def generate(
        self, prompts: list[list[int]], sampling: Sampling | list[Sampling]
    ) -> list[Generation]:
        # One generate at a time: seeded batches swap torch's global RNG state.
        with self._lock:
            return self._generate(prompts, sampling)

    def _generate(
        self, prompts: list[list[int]], sampling: Sampling | list[Sampling]
    ) -> list[Generation]:
        samplings = as_list(sampling, len(prompts))
        results: list[Generation | None] = [None] * len(prompts)
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, (p, s) in enumerate(zip(prompts, samplings, strict=True)):
            if self.max_model_len - len(p) <= 0 or s.max_tokens <= 0:
                reason = "length" if s.max_tokens <= 0 else "context"
                results[i] = Generation("", list(p), [], [], reason)
                continue
            groups[s.key()].append(i)
        for idx in groups.values():
            idx.sort(key=lambda i: -len(prompts[i]))
            step = self.max_batch_size or len(idx)
            for b in range(0, len(idx), step):
                chunk = idx[b : b + step]
                outs = self._generate_batch(
                    [list(prompts[i]) for i in chunk], [samplings[i] for i in chunk]
                )
                for i, g in zip(chunk, outs, strict=True):
                    results[i] = g
        return results  # type: ignore[return-value]

    def _generate_batch(
        self, prompts: list[list[int]], samplings: list[Sampling]
    ) -> list[Generation]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        s0 = samplings[0]
        budgets = [
            min(s.max_tokens, self.max_model_len - len(p))
            for p, s in zip(prompts, samplings, strict=True)
        ]
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            input_ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[r, width - len(p) :] = 1
        greedy = s0.temperature <= 0
        # top_k=0 switches off a top_k the checkpoint's generation_config may set
        # (Qwen ships top_k=20): only temperature and top_p shape the distribution.
        knobs = (
            {}
            if greedy
            else dict(temperature=float(s0.temperature), top_p=float(s0.top_p), top_k=0)
        )
        config = GenerationConfig(
            max_new_tokens=max(budgets),
            do_sample=not greedy,
            eos_token_id=self._eos,
            pad_token_id=self._pad,
            **knobs,
        )
        recorder = (
            _LogprobRecorder(1.0, 1.0)
            if greedy
            else _LogprobRecorder(float(s0.temperature), float(s0.top_p))
        )
        stopper = _RowStopper(self.tokenizer, width, budgets, [s.stop for s in samplings])
        cache = self._cache(prompts, width, max(budgets)) if self.device == "cpu" else None
        seeds = [s.seed for s in samplings]
        seed = (
            int(stable_hash("hf-batch", *seeds, n=8), 16) & 0x7FFFFFFF
            if any(x is not None for x in seeds)
            else None
        )
        devices = [torch.device(self.device)] if self.device.startswith("cuda") else []
        with (
            torch.random.fork_rng(devices=devices, enabled=seed is not None),
            torch.inference_mode(),
        ):
            if seed is not None:
                torch.manual_seed(seed)
            seqs = self.lm.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=config,
                logits_processor=LogitsProcessorList([recorder]),
                stopping_criteria=StoppingCriteriaList([stopper]),
                **({} if cache is None else {"past_key_values": cache}),
            )
        seqs = seqs.cpu()
        lps = recorder.finish(seqs)
        eos = set(self._eos)
        out = []
        for r, prompt in enumerate(prompts):
            gen = seqs[r, width:].tolist()
            end, reason = min(budgets[r], len(gen)), "length"
            for t, tok in enumerate(gen[:end]):
                if tok in eos:
                    end, reason = t + 1, "stop"
                    break
            if stopper.stop_at[r] is not None and stopper.stop_at[r] <= end:
                end, reason = stopper.stop_at[r], "stop"
            ids = gen[:end]
            text, _ = cut_at_stop(self.decode(ids), samplings[r].stop)
            out.append(
                Generation(text, prompt, ids, [float(x) for x in lps[r, :end].tolist()], reason)
            )
        return out

    def _cache(self, prompts: list[list[int]], width: int, new_tokens: int):
        """A KV cache with room reserved for the whole generation (`_reserved_layer_class`),
        or None (generate's own) where the model's cache is not plain full attention.

        It comes filled with every prompt but its last token, left-padded to `width - 1`,
        each distinct prompt run alone from its longest stored prefix: a padded batch
        prefill spends attention and MLP work on every pad and, being masked, cannot use
        the causal kernel. `generate` then runs only the last prompt token. Distinct
        prompts of one length with nothing stored are left to generate's own prefill,
        one padless batch."""
        import torch
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        if self._n_layers is None:
            layers = DynamicCache(config=self.lm.config).layers
            self._n_layers = (
                len(layers) if layers and all(type(x) is DynamicLayer for x in layers) else 0
            )
        if not self._n_layers:
            return None
        capacity = width + new_tokens
        cache = DynamicCache()
        cache.layers = [_reserved_layer_class()(capacity) for _ in range(self._n_layers)]
        if min(len(p) for p in prompts) < 2:
            return cache
        distinct = list(dict.fromkeys(tuple(p[:-1]) for p in prompts))
        if len({len(p) for p in prompts}) == 1 and len(distinct) > 1:
            if not any(self._prefixes.longest(key) for key in distinct):
                return cache  # one padless batch prefill beats one forward per prompt
        done = prefill(self.lm, self._prefixes, distinct, self._pad, self.device)
        with torch.inference_mode():
            for li, layer in enumerate(cache.layers):
                k0, v0 = done[tuple(prompts[0][:-1])][li]
                keys = k0.new_zeros((len(prompts), k0.shape[1], capacity, k0.shape[3]))
                values = v0.new_zeros((len(prompts), v0.shape[1], capacity, v0.shape[3]))
                for r, p in enumerate(prompts):
                    k, v = done[tuple(p[:-1])][li]
                    keys[r, :, width - len(p) : width - 1] = k[0]
                    values[r, :, width - len(p) : width - 1] = v[0]
                layer.adopt(keys, values, width - 1)
        return cache


@functools.cache
def _reserved_layer_class():
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """A DynamicLayer whose keys and values are views into buffers allocated once
        for `capacity` positions: each decode step writes one position in place instead
        of `torch.cat` copying (and allocating) the whole cache, per layer, K and V."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = capacity
            self.kbuf = self.vbuf = None

        def adopt(self, kbuf, vbuf, length: int) -> None:
            self.dtype, self.device, self.is_initialized = kbuf.dtype, kbuf.device, True
            self.kbuf, self.vbuf = kbuf, vbuf
            self.keys, self.values = kbuf[:, :, :length], vbuf[:, :, :length]

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                b, h, _, d = key_states.shape
                vshape = (b, value_states.shape[1], self.capacity, value_states.shape[3])
                self.adopt(
                    key_states.new_empty((b, h, self.capacity, d)),
                    value_states.new_empty(vshape),
                    0,
                )
            start = self.keys.shape[-2]
            end = start + key_states.shape[-2]
            views = self.kbuf is not None and self.keys.data_ptr() == self.kbuf.data_ptr()
            if not views or end > self.kbuf.shape[-2] or key_states.shape[0] != self.kbuf.shape[0]:
                self.kbuf = self.vbuf = (
                    None  # reordered, cropped past or outgrown: plain cat from here
                )
                return super().update(key_states, value_states, *args, **kwargs)
            self.kbuf[:, :, start:end] = key_states
            self.vbuf[:, :, start:end] = value_states
            self.keys, self.values = self.kbuf[:, :, :end], self.vbuf[:, :, :end]
            return self.keys, self.values

    return ReservedLayer


_CPU_SDPA = "spade_cpu_sdpa"


def _register_cpu_sdpa() -> None:
    """Registers `_CPU_SDPA`: transformers' sdpa attention, except that grouped KV heads
    go to sdpa's `enable_gqa` even under an attention mask. transformers repeats keys and
    values into a fresh tensor for every layer and step whenever a mask is present (its
    CUDA kernels fall back to the math path with both); torch's CPU flash kernel takes
    both and gives bit-identical outputs, at half the attention cost of a padded batch."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def attention(
        module,
        query,
        key,
        value,
        attention_mask,
        dropout=0.0,
        scaling=None,
        is_causal=None,
        **kwargs,
    ):
        import torch

        if (
            query.device.type != "cpu"
            or getattr(module, "num_key_value_groups", 1) == 1
            or kwargs.get("position_bias") is not None
            or kwargs.get("output_attentions")
        ):
            return sdpa_attention_forward(
                module,
                query,
                key,
                value,
                attention_mask,
                dropout=dropout,
                scaling=scaling,
                is_causal=is_causal,
                **kwargs,
            )
        q_len = query.shape[2]
        is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        is_causal = bool(q_len > 1 and attention_mask is None and is_causal)
        if is_causal and key.shape[2] > q_len:
            key, value = key[:, :, :q_len], value[:, :, :q_len]
        out = torch.nn.functional.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attention_mask,
            dropout_p=dropout,
            scale=scaling,
            is_causal=is_causal,
            enable_gqa=True,
        )
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(_CPU_SDPA, attention)
    AttentionMaskInterface.register(_CPU_SDPA, sdpa_mask)


def _LogprobRecorder(temperature: float, top_p: float):
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

    # The very warpers generate samples through, applied to a copy: the recorded logprob
    # is that of the distribution the token was drawn from (vLLM's "processed_logprobs").
    warpers = []
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))

    class Recorder(LogitsProcessor):
        """Keeps the previous step's log-distribution and, once the next call shows
        which token was sampled, gathers that token's logprob; `finish` gathers the last
        step's. Holds one (batch, vocab) matrix at a time, not the whole run."""

        def __init__(self):
            self.prev = None
            self.steps = []

        def __call__(self, input_ids, scores):
            import torch

            if self.prev is not None:
                self.steps.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1).cpu())
            warped = scores.float()
            for w in warpers:
                warped = w(input_ids, warped)
            self.prev = torch.log_softmax(warped, dim=-1)
            return scores

        def finish(self, sequences):
            import torch

            if self.prev is not None:
                last = sequences[:, -1:].to(self.prev.device)
                self.steps.append(self.prev.gather(1, last).squeeze(1).cpu())
                self.prev = None
            if not self.steps:
                return torch.zeros((sequences.shape[0], 0))
            return torch.stack(self.steps, dim=1)

    return Recorder()


def _RowStopper(tokenizer, prompt_width: int, budgets: list[int], stops: list[list[str]]):
    from transformers import StoppingCriteria

    class RowStopper(StoppingCriteria):
        """Finishes each row on its own token budget or its own stop strings. Only the
        last few tokens are decoded per step: enough to hold the longest stop string,
        since every byte-level token carries at least one byte."""

        def __init__(self):
            self.stop_at: list[int | None] = [None] * len(budgets)
            self.tail = [max((len(s.encode()) for s in st if s), default=0) + 2 for st in stops]

        def __call__(self, input_ids, scores, **kwargs):
            import torch

            n = input_ids.shape[1] - prompt_width
            done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            for r in range(input_ids.shape[0]):
                if self.stop_at[r] is not None:
                    done[r] = True
                    continue
                if stops[r]:
                    lo = max(prompt_width, input_ids.shape[1] - self.tail[r])
                    text = tokenizer.decode(input_ids[r, lo:].tolist(), skip_special_tokens=False)
                    if any(s and s in text for s in stops[r]):
                        self.stop_at[r] = n
                        done[r] = True
                        continue
                if n >= budgets[r]:
                    done[r] = True
            return done

    return RowStopper()
