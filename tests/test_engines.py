"""Engines on the tiny model: the hf engine end to end on CPU, the OpenAI-compatible
client against a real local HTTP server, vLLM behind the gpu marker."""

from __future__ import annotations

import pytest

from spade_cli.engines import Generation, Sampling, load_engine, resolve_engine
from spade_cli.errors import ResourceError, UsageError

CONVS = [
    [{"role": "user", "content": "Write a new environment."}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello " * 40}],
    [{"role": "user", "content": "é 🙂"}],
]


@pytest.fixture(scope="module")
def hf(tiny_model):
    return load_engine(str(tiny_model), "hf", max_batch_size=8)


def check_generation(engine, g: Generation, prompt_ids: list[int], sampling: Sampling):
    assert g.prompt_ids == prompt_ids
    assert 0 < len(g.completion_ids) <= sampling.max_tokens
    assert g.finish_reason in ("stop", "length")
    if g.finish_reason == "length":
        assert len(g.completion_ids) == sampling.max_tokens
    assert g.logprobs is None or len(g.logprobs) == len(g.completion_ids)
    assert all(lp <= 0.0 for lp in g.logprobs or [])
    if not sampling.stop:
        assert g.text == engine.tokenizer.decode(g.completion_ids, skip_special_tokens=True)


def test_auto_resolves_to_hf_without_vllm_or_gpu():
    import importlib.util

    import torch

    expect = "vllm" if importlib.util.find_spec("vllm") and torch.cuda.is_available() else "hf"
    assert resolve_engine("auto") == expect
    with pytest.raises(UsageError):
        resolve_engine("nope")


def test_missing_model_is_resource_error(tmp_path):
    with pytest.raises(ResourceError):
        load_engine(str(tmp_path / "absent"), "hf")


def test_hf_chat_records_complete_and_ids_consistent(hf):
    s = Sampling(temperature=1.0, max_tokens=16, seed=7)
    gens = hf.chat(CONVS, s)
    assert len(gens) == len(CONVS)
    for conv, g in zip(CONVS, gens, strict=True):
        check_generation(hf, g, hf.chat_ids(conv), s)
        assert hf.tokenizer.decode(g.prompt_ids).endswith("<|im_start|>assistant\n")


def test_hf_deterministic_with_seed(hf):
    s = Sampling(temperature=1.0, top_p=0.95, max_tokens=12, seed=123)
    a, b = hf.chat(CONVS, s), hf.chat(CONVS, s)
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert [g.logprobs for g in a] == [g.logprobs for g in b]
    c = hf.chat(CONVS, Sampling(temperature=1.0, top_p=0.95, max_tokens=12, seed=124))
    assert [g.completion_ids for g in a] != [g.completion_ids for g in c]


def test_hf_logprobs_match_a_forward_pass(hf):
    import torch

    s = Sampling(temperature=0.7, max_tokens=10, seed=1)
    for g in hf.chat(CONVS, s):
        ids = torch.tensor([g.prompt_ids + g.completion_ids])
        with torch.no_grad():
            logp = torch.log_softmax(hf.lm(ids).logits[0].float() / 0.7, dim=-1)
        n = len(g.prompt_ids)
        ref = [logp[n - 1 + t, tok].item() for t, tok in enumerate(g.completion_ids)]
        assert g.logprobs == pytest.approx(ref, abs=1e-4)


def test_hf_left_padding_does_not_change_greedy_output(hf):
    s = Sampling(temperature=0.0, max_tokens=8)
    batched = hf.chat(CONVS, s)
    alone = [hf.chat([c], s)[0] for c in CONVS]
    assert [g.completion_ids for g in batched] == [g.completion_ids for g in alone]


def test_hf_per_request_sampling_and_stop_strings(hf):
    # A stop string that the first greedy completion surely contains: its 3rd token's text.
    probe = hf.chat(CONVS[:1], Sampling(temperature=0.0, max_tokens=8))[0]
    piece = hf.tokenizer.decode(probe.completion_ids[2:3])
    assert piece
    stops = [Sampling(temperature=0.0, max_tokens=8, stop=[piece]), Sampling(temperature=0.0, max_tokens=3)]
    g_stop, g_short = hf.chat([CONVS[0], CONVS[0]], stops)
    assert g_stop.finish_reason == "stop" and piece not in g_stop.text
    assert g_stop.completion_ids == probe.completion_ids[: len(g_stop.completion_ids)]
    assert len(g_stop.completion_ids) <= 3
    assert g_short.finish_reason == "length" and g_short.completion_ids == probe.completion_ids[:3]


def test_hf_end_of_turn_token_kept_and_context_limit(tiny_model):
    eng = load_engine(str(tiny_model), "hf", max_model_len=64)
    prompt = eng.chat_ids(CONVS[0])
    long_prompt = list(range(5, 75))
    out = eng.generate([prompt, long_prompt], Sampling(max_tokens=200, seed=0, temperature=0))
    assert len(prompt) + len(out[0].completion_ids) <= 64
    assert out[1].finish_reason == "context" and out[1].completion_ids == []
    # Force the end-of-turn token: an output layer whose only choice is <|im_end|>.
    import torch

    eos = eng.tokenizer.convert_tokens_to_ids("<|im_end|>")
    head = torch.nn.Linear(eng.lm.lm_head.in_features, eng.lm.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(-10.0)
        head.bias[eos] = 10.0
    eng.lm.lm_head = head
    g = eng.generate([prompt], Sampling(max_tokens=5, temperature=0))[0]
    assert g.completion_ids == [eos] and g.finish_reason == "stop" and g.text == ""


def test_chat_with_tools_uses_template(hf):
    tools = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]
    ids = hf.chat_ids(CONVS[0], tools)
    assert "<tools>" in hf.tokenizer.decode(ids)
    gens = hf.chat([CONVS[0], CONVS[2]], Sampling(max_tokens=4, seed=0), tools=[tools, None])
    assert gens[0].prompt_ids == ids and gens[1].prompt_ids == hf.chat_ids(CONVS[2])
