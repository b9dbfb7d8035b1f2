"""Prefills that continue earlier ones: the hf engine's prefix store on CPU.

A multi-turn episode's next prompt is its last prompt plus the action and the new
observation. Prefilled from its first token, an eight-turn episode costs about five times
its length in prefill, which was most of a micro rollout's time. `PrefixStore` keeps the
KV caches of recent prefills by their tokens; `prefill` runs only what a prompt adds to
the longest stored prompt it extends, every such continuation of a call in one padded
forward (`forward`). The caches are those of a prefill from the first token up to float
rounding (bench/bench_prefix_store.py compares the two).
"""

from __future__ import annotations

from collections import Counter, OrderedDict

# Of KV caches kept for reuse by later prefills: for the micro model about 350,000
# tokens (several rounds of rollouts' turns), for a 135M model about 11,000.
PREFIX_STORE_BYTES = 512 << 20

# Rows x padded length of one batched prefill: bounds the padded copies of the pasts.
PREFILL_BATCH_TOKENS = 8192


class PrefixStore:
    """KV caches of earlier prefills by their tokens, least recently used dropped first
    beyond a byte budget. `longest(key)` finds the longest stored prefix of `key`."""

    def __init__(self, budget: int):
        self.budget, self.bytes = budget, 0
        self.entries: OrderedDict[tuple, list] = OrderedDict()
        self.lengths: Counter[int] = Counter()

    def longest(self, key: tuple) -> tuple[int, list] | None:
        for n in sorted((n for n in self.lengths if n <= len(key)), reverse=True):
            kv = self.entries.get(key[:n])
            if kv is not None:
                self.entries.move_to_end(key[:n])
                return n, kv
        return None

    def add(self, key: tuple, kv: list) -> None:
        if key in self.entries:
            return
        size = sum(k.nbytes + v.nbytes for k, v in kv)
        if size > self.budget:
            return
        self.entries[key] = kv
        self.lengths[len(key)] += 1
        self.bytes += size
        while self.bytes > self.budget:
            old, old_kv = self.entries.popitem(last=False)
            self.lengths[len(old)] -= 1
            if not self.lengths[len(old)]:
                del self.lengths[len(old)]
            self.bytes -= sum(k.nbytes + v.nbytes for k, v in old_kv)


def prefill(lm, store: PrefixStore, keys: list[tuple], pad: int, device: str) -> dict:
    """The KV cache of each key (per layer, keys and values of shape [1, heads, len, dim]),
    stored for later prefills. A key with a stored prefix runs only the rest, in one
    `forward` with the others that have one; a key without is run alone."""
    done, hits = {}, {}
    for key in keys:
        hit = store.longest(key)
        if hit is None:
            done[key] = forward(lm, [key], [0], None, pad, device)[0]
        elif hit[0] == len(key):
            done[key] = hit[1]
        else:
            hits[key] = hit
    # Similar lengths share a batch: the padding a batch carries is its longest row's.
    order = sorted(hits, key=len)
    b = 0
    while b < len(order):
        n = 1
        while b + n < len(order) and (n + 1) * len(order[b + n]) <= PREFILL_BATCH_TOKENS:
            n += 1
        batch = order[b : b + n]
        starts, pasts = [hits[k][0] for k in batch], [hits[k][1] for k in batch]
        done.update(zip(batch, forward(lm, batch, starts, pasts, pad, device), strict=True))
        b += n
    for key in keys:
        store.add(key, done[key])
    return done


def forward(lm, keys: list[tuple], starts: list[int], pasts: list | None, pad: int, device: str):
    """One forward over `key[start:]` of every key, after its past (the KV cache of
    `key[:start]`); without pasts, over the one key from its first token (no mask: the
    causal kernel). Rows are aligned right: [pad, past, pad, rest], the pads masked and the
    positions counted from each row's own first token; each row's KV comes back without
    its pads."""
    import torch
    from transformers import DynamicCache

    keep = {"logits_to_keep": 1} if getattr(lm, "_supports_logits_to_keep", lambda: False)() else {}
    with torch.inference_mode():
        if pasts is None:
            out = lm(input_ids=torch.tensor([keys[0]], device=device), use_cache=True, **keep)
            return [[(x.keys, x.values) for x in out.past_key_values.layers]]
        rows = len(keys)
        width = max(starts)  # of the past
        rest = max(len(k) - s for k, s in zip(keys, starts, strict=True))
        ids = torch.full((rows, rest), pad, dtype=torch.long)
        mask = torch.zeros((rows, width + rest), dtype=torch.long)
        pos = torch.zeros((rows, rest), dtype=torch.long)
        layers = []
        for li in range(len(pasts[0])):
            k0, v0 = pasts[0][li]
            k = k0.new_zeros((rows, k0.shape[1], width, k0.shape[3]))
            v = v0.new_zeros((rows, v0.shape[1], width, v0.shape[3]))
            for r, past in enumerate(pasts):
                k[r, :, width - starts[r] :] = past[li][0][0]
                v[r, :, width - starts[r] :] = past[li][1][0]
            layers.append((k, v))
        for r, (key, start) in enumerate(zip(keys, starts, strict=True)):
            tail = key[start:]
            ids[r, rest - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            mask[r, width - start : width] = 1
            mask[r, width + rest - len(tail) :] = 1
            pos[r] = start  # the pads' positions: any, they are masked
            pos[r, rest - len(tail) :] = torch.arange(start, len(key))
        out = lm(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=pos.to(device),
            past_key_values=DynamicCache(ddp_cache_data=layers),
            use_cache=True,
            **keep,
        )
        kvs = []
        for r, (key, start) in enumerate(zip(keys, starts, strict=True)):
            cut = width + rest - (len(key) - start)
            kvs.append(
                [
                    tuple(
                        torch.cat(
                            [t[r : r + 1, :, width - start : width], t[r : r + 1, :, cut:]], 2
                        )
                        for t in (x.keys, x.values)
                    )
                    for x in out.past_key_values.layers
                ]
            )
        return kvs
