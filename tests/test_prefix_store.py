"""The hf engine's prefix store: prefills continue from the longest earlier prompt they
extend, batched, with the KV cache and the tokens of a prefill from the first token."""

from __future__ import annotations

import random

import pytest
import torch

from spade_cli.engines import Sampling, load_engine
from spade_cli.engines.prefix import PrefixStore, forward, prefill


def kv(n: int, fill: float = 0.0) -> list:
    t = torch.full((1, 2, n, 4), fill)
    return [(t, t.clone())]


def test_store_finds_the_longest_stored_prefix_and_drops_the_least_recently_used():
    one = 2 * kv(1)[0][0].nbytes  # bytes of one token's entry
    store = PrefixStore(budget=6 * one)
    store.add((1, 2), kv(2, 2.0))
    store.add((1, 2, 3, 4), kv(4, 4.0))
    assert store.longest((1, 2, 3, 4, 5))[0] == 4
    assert store.longest((1, 2, 3, 9))[0] == 2
    assert store.longest((1, 2))[0] == 2
    assert store.longest((7, 1, 2)) is None and store.longest((1,)) is None
    store.longest((1, 2, 3, 4))  # now the most recently used
    store.add((5, 6), kv(2))  # 8 tokens > 6: the oldest, (1, 2), goes
    assert store.longest((1, 2, 9)) is None
    assert store.longest((1, 2, 3, 4))[0] == 4 and store.bytes == 6 * one
    store.add((9,) * 7, kv(7))  # over the whole budget alone: not kept, nothing dropped
    assert len(store.entries) == 2 and sorted(store.lengths) == [2, 4]


@pytest.fixture(scope="module")
def engines(tiny_model):
    with_store = load_engine(str(tiny_model), "hf")
    without = load_engine(str(tiny_model), "hf")
    without._prefixes.budget = 0
    return with_store, without


def forwarded_tokens(engine, monkeypatch) -> list[int]:
    """Counts the tokens each forward of the engine's model runs (prefills and decode)."""
    seen: list[int] = []
    real = engine.lm.forward

    def forward(*args, **kwargs):
        seen.append(int(kwargs["input_ids"].numel()))
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.lm, "forward", forward)
    return seen


def test_a_conversations_next_turn_prefills_only_its_new_tokens(engines, monkeypatch):
    with_store, without = engines
    conv = [{"role": "user", "content": "Walk to the door. " * 6}]
    greedy = Sampling(temperature=0.0, max_tokens=5)
    first = with_store.chat([conv], greedy)[0]
    conv2 = conv + [
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "No door. You face right."},
    ]
    seen = forwarded_tokens(with_store, monkeypatch)
    again = with_store.chat([conv2], greedy)[0]
    prompt = with_store.chat_ids(conv2)
    assert prompt[: len(first.prompt_ids)] == first.prompt_ids
    # The prefill ran from the end of the first prompt, not from the start.
    assert seen[0] == len(prompt) - len(first.prompt_ids)
    fresh = without.chat([conv2], greedy)[0]
    assert again.completion_ids == fresh.completion_ids
    assert again.logprobs == pytest.approx(fresh.logprobs, abs=1e-4)


def test_batched_extensions_give_the_kv_cache_of_a_prefill_from_the_first_token(engines):
    with_store, _ = engines
    rng = random.Random(0)
    words = range(10, 200)
    bases = [tuple(rng.choices(words, k=rng.randrange(3, 40))) for _ in range(5)]
    lm, store, pad = with_store.lm, with_store._prefixes, with_store._pad
    prefill(lm, store, bases, pad, "cpu")
    keys = [b + tuple(rng.choices(words, k=rng.randrange(1, 25))) for b in bases for _ in "ab"]
    got = prefill(lm, store, keys, pad, "cpu")
    for key in keys:
        (ref,) = forward(lm, [key], [0], None, pad, "cpu")
        for (k, v), (k_ref, v_ref) in zip(got[key], ref, strict=True):
            assert k.shape == k_ref.shape == (1, k.shape[1], len(key), k.shape[3])
            assert torch.allclose(k, k_ref, atol=1e-4) and torch.allclose(v, v_ref, atol=1e-4)


def test_sampled_multi_turn_batches_match_an_engine_without_the_store(engines):
    with_store, without = engines
    convs = [[{"role": "user", "content": f"Room {i}. " * (2 + i)}] for i in range(4)]
    sampling = Sampling(temperature=1.0, max_tokens=4, seed=3)
    for _turn in range(3):
        a, b = with_store.chat(convs, sampling), without.chat(convs, sampling)
        assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
        for x, y in zip(a, b, strict=True):
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)
        convs = [
            c + [{"role": "assistant", "content": g.text}, {"role": "user", "content": "And?"}]
            for c, g in zip(convs, a, strict=True)
        ]
    assert len(with_store._prefixes.entries) >= 12 and not without._prefixes.entries
