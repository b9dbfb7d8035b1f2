"""Micro-model pretraining step: the loss on assistant tokens only vs the full LM head.

Both sides take the same AdamW-free forward/backward on the same batches of micro
transcripts (length-sorted as pretraining draws them), from the same weights:

- `full-head`: `model(input_ids, labels=labels).loss`, transformers' causal LM loss, which
  applies the output head to every position;
- `assistant-only`: `spade_cli.micro.model.assistant_loss`, the head on the labelled
  positions only (most positions are prompt).

It prints both losses (they must agree) and the wall time per step of each, and the ratio.

    python bench/bench_micro_pretrain.py               # ~1 minute on 2 CPU cores
    python bench/bench_micro_pretrain.py --steps 40 --model data/micro-model
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def batches(tok, n_steps: int, batch: int, seed: int):
    import torch

    from spade_cli.micro import model as micro

    data = micro.transcripts(tok, n_steps * batch, seed, micro.recipe(seed))
    order = sorted(range(len(data)), key=lambda i: len(data[i][0]))
    rng = random.Random(seed)
    chunks = [order[i : i + batch] for i in range(0, len(order) - batch + 1, batch)]
    for _ in range(n_steps):
        idx = chunks[rng.randrange(len(chunks))]
        width = max(len(data[i][0]) for i in idx)
        ids = torch.full((len(idx), width), tok.pad_token_id)
        labels = torch.full((len(idx), width), -100)
        for row, i in enumerate(idx):
            x, m = data[i]
            ids[row, : len(x)] = torch.tensor(x)
            labels[row, : len(x)] = torch.tensor(
                [t if k else -100 for t, k in zip(x, m, strict=True)]
            )
        yield ids, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="data/micro-model", help="a micro model directory")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spade_cli.micro.model import assistant_loss

    if not Path(args.model, "config.json").exists():
        sys.exit(f"bench_micro_pretrain: no model at {args.model} (run `just micro-model`)")
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).train()
    sides = {
        "full-head": lambda ids, labels: model(input_ids=ids, labels=labels).loss,
        "assistant-only": lambda ids, labels: assistant_loss(model, ids, labels),
    }
    data = list(batches(tok, args.steps, args.batch, args.seed))
    seconds = {name: 0.0 for name in sides}
    losses = {name: [] for name in sides}
    for ids, labels in data:  # the sides alternate, so drift in the machine hits both
        for name, loss_of in sides.items():
            t = time.perf_counter()
            loss = loss_of(ids, labels)
            loss.backward()
            seconds[name] += time.perf_counter() - t
            model.zero_grad(set_to_none=True)
            losses[name].append(loss.item())
    gap = max(abs(a - b) for a, b in zip(*losses.values(), strict=True))
    for name in sides:
        mean = sum(losses[name]) / len(losses[name])
        print(f"{name:15s} {1000 * seconds[name] / args.steps:7.1f} ms/step   mean loss {mean:.4f}")
    print(f"largest loss difference {gap:.2e}")
    print(f"assistant-only is {seconds['full-head'] / seconds['assistant-only']:.2f}x faster")


if __name__ == "__main__":
    main()
