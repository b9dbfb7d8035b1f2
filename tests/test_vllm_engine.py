"""The vllm engine end to end on CPU, against a test double of vLLM's offline API.

The double has the shape of the real API (vllm/entrypoints/llm.py, sampling_params.py,
outputs.py, logprobs.py, inputs): `LLM(model, *, tensor_parallel_size, dtype, seed, ...,
**engine_args)` refusing unknown engine arguments, `generate(prompts, sampling_params,
*, use_tqdm)` over `TokensPrompt` dicts with one `SamplingParams` per prompt,
`RequestOutput.outputs[0]` a `CompletionOutput` whose `logprobs` is one
`{token_id: Logprob}` per token (or a `FlatLogprobs`), stop strings cut from `text`,
EOS kept in `token_ids`. It generates pseudo-random tokens from the tiny model's
vocabulary (seeded per request), so everything our engine does with the output is
exercised. It is installed in `sys.modules` only for the duration of each test.
"""

from __future__ import annotations

import importlib.machinery
import json
import random
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import pytest

from spade_cli.engines import Sampling, load_engine
from spade_cli.errors import ResourceError

from .test_engines import CONVS, check_generation

ENGINE_ARGS = {
    "max_model_len",
    "enable_prefix_caching",
    "logprobs_mode",
    "distributed_executor_backend",
    "max_num_seqs",
    "swap_space",
}
LOGPROBS_MODES = ("raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits")


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class FlatLogprobs:
    """vLLM's flattened logprobs: indexing a position gives its {token_id: Logprob}."""

    def __init__(self):
        self.starts, self.ends, self.ids, self.values = [], [], [], []

    def append(self, position: dict) -> None:
        self.starts.append(len(self.ids))
        for tok, lp in position.items():
            self.ids.append(tok)
            self.values.append(lp.logprob)
        self.ends.append(len(self.ids))

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, i: int) -> dict:
        return {self.ids[j]: Logprob(self.values[j]) for j in range(self.starts[i], self.ends[i])}

    def __iter__(self):
        return (self[i] for i in range(len(self)))


class TokensPrompt(TypedDict, total=False):
    prompt_token_ids: list[int]
    prompt: str


class SamplingParams:
    def __init__(
        self,
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        stop: str | list[str] | None = None,
        stop_token_ids: list[int] | None = None,
        ignore_eos: bool = False,
        max_tokens: int | None = 16,
        logprobs: int | None = None,
        detokenize: bool = True,
        skip_special_tokens: bool = True,
        include_stop_str_in_output: bool = False,
    ):
        if (
            temperature < 0
            or not 0 < top_p <= 1
            or (max_tokens is not None and max_tokens < 1)
            or n < 1
        ):
            raise ValueError("invalid sampling parameters")
        self.n, self.temperature, self.top_p, self.top_k, self.seed = (
            n,
            temperature,
            top_p,
            top_k,
            seed,
        )
        self.stop = [stop] if isinstance(stop, str) else list(stop or [])
        self.stop_token_ids, self.ignore_eos, self.max_tokens = (
            list(stop_token_ids or []),
            ignore_eos,
            max_tokens,
        )
        self.logprobs, self.detokenize, self.skip_special_tokens = (
            logprobs,
            detokenize,
            skip_special_tokens,
        )
        self.include_stop_str_in_output = include_stop_str_in_output


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict] | FlatLogprobs | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True


@dataclass
class FakeCore:
    shutdowns: int = 0

    def shutdown(self):
        self.shutdowns += 1


@dataclass
class ModelConfig:
    model: str
    max_model_len: int


@dataclass
class FakeEngine:
    model_config: ModelConfig
    engine_core: FakeCore = field(default_factory=FakeCore)


class LLM:
    instances: list[LLM] = []
    flat_logprobs = False  # like VLLM_FLAT_LOGPROBS=1
    force_finish: str | None = None  # e.g. "abort", for the next request

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.9,
        enforce_eager: bool = False,
        trust_remote_code: bool = False,
        tokenizer: str | None = None,
        **kwargs,
    ):
        unknown = set(kwargs) - ENGINE_ARGS
        if unknown:
            raise TypeError(
                f"EngineArgs.__init__() got an unexpected keyword argument {sorted(unknown)[0]!r}"
            )
        if kwargs.get("logprobs_mode", "raw_logprobs") not in LOGPROBS_MODES:
            raise ValueError(f"invalid logprobs_mode {kwargs['logprobs_mode']!r}")
        config = Path(model) / "config.json"
        if not config.exists():
            raise OSError(f"{model} does not appear to have a file named config.json")
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
        self.kwargs = dict(
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=enforce_eager,
            trust_remote_code=trust_remote_code,
            **kwargs,
        )
        cfg = json.loads(config.read_text())
        self.eos = (
            {cfg["eos_token_id"]}
            if isinstance(cfg.get("eos_token_id"), int)
            else set(cfg.get("eos_token_id") or [])
        )
        self.vocab = cfg["vocab_size"]
        self.llm_engine = FakeEngine(
            ModelConfig(model, kwargs.get("max_model_len") or cfg["max_position_embeddings"])
        )
        self.model_config = self.llm_engine.model_config
        self.calls: list[tuple[list, list]] = []
        self.sampled: list[list[float]] = []  # the logprob of every sampled token, per request
        LLM.instances.append(self)

    def generate(
        self,
        prompts,
        sampling_params=None,
        *,
        use_tqdm=True,
        lora_request=None,
        priority=None,
        tokenization_kwargs=None,
    ) -> list[RequestOutput]:
        prompts = [prompts] if isinstance(prompts, dict) else list(prompts)
        params = (
            sampling_params
            if isinstance(sampling_params, list)
            else [sampling_params or SamplingParams()] * len(prompts)
        )
        if len(params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        self.calls.append((prompts, params))
        outs = []
        for k, (prompt, sp) in enumerate(zip(prompts, params, strict=True)):
            ids = list(prompt["prompt_token_ids"])
            if len(ids) > self.model_config.max_model_len:
                raise ValueError(
                    f"The decoder prompt (length {len(ids)}) is longer than the maximum model length"
                )
            outs.append(RequestOutput(str(k), None, ids, [self._complete(ids, sp)]))
        LLM.force_finish = None
        return outs

    def _complete(self, prompt: list[int], sp: SamplingParams) -> CompletionOutput:
        seed = (
            sp.seed if sp.seed is not None else self.kwargs["seed"],
            0.0 if sp.temperature == 0 else 1.0,
        )
        rng = random.Random(f"{seed}:{prompt}")
        room = self.model_config.max_model_len - len(prompt)
        ids, lps, positions, reason, text = (
            [],
            [],
            FlatLogprobs() if LLM.flat_logprobs else [],
            "length",
            "",
        )
        stops = set(sp.stop_token_ids) | (set() if sp.ignore_eos else self.eos)
        while len(ids) < min(sp.max_tokens, room):
            tok = sorted(self.eos)[0] if rng.random() < 0.1 else rng.randrange(8, self.vocab)
            lp = -rng.random() * 5
            ids.append(tok)
            lps.append(lp)
            positions.append({tok: Logprob(lp, rank=1)})
            text = self.tokenizer.decode(ids, skip_special_tokens=sp.skip_special_tokens)
            hit = [text.find(s) for s in sp.stop if s in text]
            if hit:
                text, reason = text[: min(hit)], "stop"
                break
            if tok in stops:
                reason = "stop"
                break
        self.sampled.append(lps)
        return CompletionOutput(
            0,
            text,
            ids,
            sum(lps),
            positions if sp.logprobs is not None else None,
            LLM.force_finish or reason,
        )


def fake_vllm_modules() -> dict[str, types.ModuleType]:
    mods = {}
    for name in (
        "vllm",
        "vllm.inputs",
        "vllm.sampling_params",
        "vllm.outputs",
        "vllm.logprobs",
        "vllm.distributed",
        "vllm.distributed.parallel_state",
    ):
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
        mods[name] = mod
    mods["vllm"].LLM, mods["vllm"].SamplingParams, mods["vllm"].TokensPrompt = (
        LLM,
        SamplingParams,
        TokensPrompt,
    )
    mods["vllm.inputs"].TokensPrompt = TokensPrompt
    mods["vllm.sampling_params"].SamplingParams = SamplingParams
    mods["vllm.outputs"].RequestOutput, mods["vllm.outputs"].CompletionOutput = (
        RequestOutput,
        CompletionOutput,
    )
    mods["vllm.logprobs"].Logprob, mods["vllm.logprobs"].FlatLogprobs = Logprob, FlatLogprobs
    torn_down = []
    mods["vllm.distributed.parallel_state"].destroy_model_parallel = lambda: torn_down.append(
        "model_parallel"
    )
    mods["vllm.distributed.parallel_state"].destroy_distributed_environment = lambda: (
        torn_down.append("distributed")
    )
    mods["vllm.distributed.parallel_state"].torn_down = torn_down
    return mods


@pytest.fixture
def fake_vllm(monkeypatch):
    mods = fake_vllm_modules()
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(LLM, "instances", [])
    monkeypatch.setattr(LLM, "flat_logprobs", False)
    monkeypatch.setattr(LLM, "force_finish", None)
    return mods


def test_llm_gets_the_engine_arguments(fake_vllm, tiny_model):
    eng = load_engine(
        str(tiny_model),
        "vllm",
        tensor_parallel_size=2,
        gpu_memory_utilization=0.5,
        seed=3,
        max_model_len=512,
        enforce_eager=True,
        device="cpu",
        max_batch_size=8,
    )
    assert LLM.instances[-1].kwargs == dict(
        model=str(tiny_model),
        tensor_parallel_size=2,
        dtype="auto",
        seed=3,
        gpu_memory_utilization=0.5,
        enforce_eager=True,
        trust_remote_code=False,
        max_model_len=512,
        enable_prefix_caching=True,
        logprobs_mode="processed_logprobs",
    )
    assert eng.max_model_len == 512
    # Without --max-model-len the window is the one vLLM derived from the model.
    assert (
        load_engine(str(tiny_model), "vllm").max_model_len
        == LLM.instances[-1].model_config.max_model_len
    )


def test_auto_dtype_is_bf16_on_a_gpu(fake_vllm, tiny_model, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    load_engine(str(tiny_model), "vllm")
    assert LLM.instances[-1].kwargs["dtype"] == "bfloat16"
    load_engine(str(tiny_model), "vllm", dtype="float16")
    assert LLM.instances[-1].kwargs["dtype"] == "float16"


def test_chat_end_to_end(fake_vllm, tiny_model):
    eng = load_engine(str(tiny_model), "vllm")
    s = Sampling(max_tokens=12, seed=5, temperature=0.7, top_p=0.9)
    gens = eng.chat(CONVS, s)
    llm = LLM.instances[-1]
    assert len(llm.calls) == 1  # the whole batch in one generate call
    prompts, params = llm.calls[0]
    assert [p["prompt_token_ids"] for p in prompts] == [eng.chat_ids(c) for c in CONVS]
    for sp in params:
        assert (sp.temperature, sp.top_p, sp.max_tokens, sp.seed, sp.logprobs, sp.stop) == (
            0.7,
            0.9,
            12,
            5,
            0,
            [],
        )
        assert sp.skip_special_tokens and sp.detokenize and not sp.include_stop_str_in_output
    for conv, g, lps in zip(CONVS, gens, llm.sampled, strict=True):
        check_generation(eng, g, eng.chat_ids(conv), s)
        assert g.logprobs == pytest.approx(lps)
        if g.finish_reason == "stop":
            assert g.completion_ids[-1] in llm.eos  # the end-of-turn token is kept
    assert any(
        g.finish_reason == "stop" for g in eng.chat(CONVS * 4, Sampling(max_tokens=40, seed=1))
    )


def test_flat_logprobs_read_like_lists(fake_vllm, tiny_model):
    eng = load_engine(str(tiny_model), "vllm")
    s = Sampling(max_tokens=10, seed=2)
    as_lists = eng.chat(CONVS, s)
    LLM.flat_logprobs = True
    flat = eng.chat(CONVS, s)
    assert [g.logprobs for g in flat] == [g.logprobs for g in as_lists]
    assert all(g.logprobs for g in flat)


def test_stop_string_cuts_the_text(fake_vllm, tiny_model):
    eng = load_engine(str(tiny_model), "vllm")
    conv = [[{"role": "user", "content": "go"}]]
    free = eng.chat(conv, Sampling(max_tokens=30, seed=11))[0]
    assert len(free.text) > 6, free
    stop = free.text[4:6]
    cut = eng.chat(conv, Sampling(max_tokens=30, seed=11, stop=[stop]))[0]
    assert LLM.instances[-1].calls[-1][1][0].stop == [stop]
    assert cut.finish_reason == "stop" and stop not in cut.text
    assert free.text.startswith(cut.text) and cut.text == free.text[: free.text.index(stop)]
    assert cut.completion_ids == free.completion_ids[: len(cut.completion_ids)]


def test_greedy_context_and_budget(fake_vllm, tiny_model):
    eng = load_engine(str(tiny_model), "vllm", max_model_len=64)
    llm = LLM.instances[-1]
    greedy = eng.generate([[5, 6, 7]], Sampling(temperature=0, top_p=0.5, max_tokens=4))[0]
    sp = llm.calls[-1][1][0]
    assert (sp.temperature, sp.top_p) == (0.0, 1.0)
    assert (
        greedy.completion_ids
        == eng.generate([[5, 6, 7]], Sampling(temperature=0, max_tokens=4))[0].completion_ids
    )
    calls = len(llm.calls)
    full = eng.generate([[5] * 64], Sampling(max_tokens=4))[0]
    assert (full.finish_reason, full.completion_ids, len(llm.calls)) == ("context", [], calls)
    near = eng.generate([[5] * 61], Sampling(max_tokens=10))[0]
    assert llm.calls[-1][1][0].max_tokens == 3 and len(near.completion_ids) <= 3


def test_abort_is_an_error_not_a_stop(fake_vllm, tiny_model):
    eng = load_engine(str(tiny_model), "vllm")
    LLM.force_finish = "abort"
    with pytest.raises(ResourceError, match="abort"):
        eng.generate([[5, 6, 7]], Sampling(max_tokens=4))


def test_close_and_reload_a_new_checkpoint(fake_vllm, tiny_model, tmp_path):
    import shutil

    eng = load_engine(str(tiny_model), "vllm", seed=4, tensor_parallel_size=2)
    first = LLM.instances[-1]
    eng.close()
    eng.close()  # safe twice
    assert first.llm_engine.engine_core.shutdowns == 1
    assert fake_vllm["vllm.distributed.parallel_state"].torn_down == [
        "model_parallel",
        "distributed",
    ]
    with pytest.raises(ResourceError, match="after close"):
        eng.generate([[5, 6]], Sampling(max_tokens=2))
    nxt = tmp_path / "round-2"
    shutil.copytree(tiny_model, nxt)
    eng.reload(str(nxt))
    second = LLM.instances[-1]
    assert second is not first and eng.model == str(nxt)
    assert {k: v for k, v in second.kwargs.items() if k != "model"} == {
        k: v for k, v in first.kwargs.items() if k != "model"
    }
    assert second.kwargs["model"] == str(nxt)
    assert eng.generate([[5, 6]], Sampling(max_tokens=2, seed=0))[0].completion_ids


def test_bad_checkpoint_is_a_resource_error(fake_vllm, tmp_path):
    from spade_cli.engines.vllm import VLLMEngine

    (tmp_path / "empty").mkdir()
    with pytest.raises(ResourceError, match="cannot start"):
        VLLMEngine(str(tmp_path / "empty"))


def test_without_vllm_the_engine_says_so(monkeypatch, tiny_model):
    from spade_cli.engines.vllm import VLLMEngine

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ResourceError, match="cannot import vllm"):
        VLLMEngine(str(tiny_model))
