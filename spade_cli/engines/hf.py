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
seeds gives the same outputs (the determinism contract), but a request's output also
depends on which other requests share its batch.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

from ..errors import ResourceError
from ..records import stable_hash
from .base import Engine, Generation, Sampling, as_list, cut_at_stop, first_line

log = logging.getLogger("spade")


class HFEngine(Engine):
    name = "hf"

    def __init__(self, model: str, device: str | None = None, dtype: str | None = None,
                 max_batch_size: int = 32, max_model_len: int | None = None,
                 trust_remote_code: bool = False, **_ignored):
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
        self.device = device
        self.max_batch_size = max(1, int(max_batch_size))
        self._lock = threading.Lock()
        ctx = max_model_len or getattr(lm.config, "max_position_embeddings", None)
        super().__init__(model, tokenizer, ctx)
        gen_eos = lm.generation_config.eos_token_id if lm.generation_config is not None else None
        eos = {gen_eos} if isinstance(gen_eos, int) else set(gen_eos or [])
        self._eos = sorted(eos | self.eos_ids())
        pad = tokenizer.pad_token_id
        self._pad = int(pad if pad is not None else (self._eos[0] if self._eos else 0))

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[list[int]], sampling: Sampling | list[Sampling]) -> list[Generation]:
        # One generate at a time: seeded batches swap torch's global RNG state.
        with self._lock:
            return self._generate(prompts, sampling)

    def _generate(self, prompts: list[list[int]], sampling: Sampling | list[Sampling]) -> list[Generation]:
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
            for b in range(0, len(idx), self.max_batch_size):
                chunk = idx[b : b + self.max_batch_size]
                outs = self._generate_batch([list(prompts[i]) for i in chunk], [samplings[i] for i in chunk])
                for i, g in zip(chunk, outs, strict=True):
                    results[i] = g
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[list[int]], samplings: list[Sampling]) -> list[Generation]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        s0 = samplings[0]
        budgets = [min(s.max_tokens, self.max_model_len - len(p)) for p, s in zip(prompts, samplings, strict=True)]
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            input_ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[r, width - len(p) :] = 1
        greedy = s0.temperature <= 0
        # top_k=0 switches off a top_k the checkpoint's generation_config may set
        # (Qwen ships top_k=20): only temperature and top_p shape the distribution.
        knobs = {} if greedy else dict(temperature=float(s0.temperature), top_p=float(s0.top_p), top_k=0)
        config = GenerationConfig(
            max_new_tokens=max(budgets),
            do_sample=not greedy,
            eos_token_id=self._eos,
            pad_token_id=self._pad,
            **knobs,
        )
        recorder = _LogprobRecorder(1.0, 1.0) if greedy else _LogprobRecorder(float(s0.temperature), float(s0.top_p))
        stopper = _RowStopper(self.tokenizer, width, budgets, [s.stop for s in samplings])
        seeds = [s.seed for s in samplings]
        seed = int(stable_hash("hf-batch", *seeds, n=8), 16) & 0x7FFFFFFF if any(x is not None for x in seeds) else None
        devices = [torch.device(self.device)] if self.device.startswith("cuda") else []
        with torch.random.fork_rng(devices=devices, enabled=seed is not None), torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            seqs = self.lm.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=config,
                logits_processor=LogitsProcessorList([recorder]),
                stopping_criteria=StoppingCriteriaList([stopper]),
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
            out.append(Generation(text, prompt, ids, [float(x) for x in lps[r, :end].tolist()], reason))
        return out


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
