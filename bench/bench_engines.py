"""Batched generation vs one conversation at a time, for the same tokens.

On the tiny offline model (built into bench/data/ on first use), N chat conversations
of varied length are answered greedily with max_tokens each, three ways on the hf
engine: one conversation per call (batch size 1), and batches of 8 and of N. Greedy
decoding with left padding gives identical tokens each way (checked), so completion
tokens per second compare like for like. On a machine with CUDA and vllm installed,
`--engines hf,vllm` adds vLLM on the same prompts (one call, its own scheduler).

    python bench/bench_engines.py                  # 32 conversations x 64 tokens
    python bench/bench_engines.py --quick          # 16 x 32
    python bench/bench_engines.py --model DIR --engines hf,vllm -n 256 --max-tokens 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spade_cli.engines import Sampling, load_engine  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def conversations(n: int) -> list[list[dict]]:
    topics = [
        "a river crossing puzzle",
        "a bank account API",
        "tic-tac-toe",
        "unit conversion",
        "a calendar with meetings",
        "the tower of hanoi",
        "a cipher",
        "a shop inventory",
    ]
    out = []
    for i in range(n):
        detail = " Make it multi-step and stateful." * (1 + i % 6)
        out.append(
            [
                {"role": "system", "content": "You design environments."},
                {
                    "role": "user",
                    "content": f"Write an environment about {topics[i % len(topics)]}.{detail}",
                },
            ]
        )
    return out


def timed(engine, prompts, sampling, batch: int | None):
    if hasattr(engine, "max_batch_size"):
        engine.max_batch_size = batch or len(prompts)
    t0 = time.perf_counter()
    if batch == 1:
        gens = [engine.generate([p], sampling)[0] for p in prompts]
    else:
        gens = engine.generate(prompts, sampling)
    return time.perf_counter() - t0, gens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model directory (default: the tiny model, built on first use)")
    ap.add_argument("-n", type=int, default=32, help="conversations")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--engines", default="hf", help="comma list: hf, vllm")
    ap.add_argument("--quick", action="store_true", help="16 conversations x 32 tokens")
    args = ap.parse_args()
    if args.quick:
        args.n, args.max_tokens = 16, 32
    model = args.model
    if model is None:
        model = DATA / "tiny-model"
        if not (model / "config.json").exists():
            from spade_cli.tinymodel import build_tiny_model

            build_tiny_model(model, seed=0)
    model = str(model)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    # Greedy, and the end-of-turn token cannot end a row early when it is never the
    # argmax; rows that do stop early still produce identical tokens in every mode.
    sampling = Sampling(temperature=0.0, max_tokens=args.max_tokens)

    hf = load_engine(model, "hf")
    prompts = [hf.chat_ids(c) for c in conversations(args.n)]
    print(
        f"model {model}  device {hf.device}  {args.n} conversations, prompts "
        f"{min(map(len, prompts))}-{max(map(len, prompts))} tokens, {args.max_tokens} new tokens each"
    )
    timed(hf, prompts[:2], Sampling(temperature=0.0, max_tokens=4), None)  # warm-up
    rows, ref = [], None
    for batch in (1, 8, args.n):
        secs, gens = timed(hf, prompts, sampling, batch)
        toks = sum(len(g.completion_ids) for g in gens)
        ids = [g.completion_ids for g in gens]
        same = "ref" if ref is None else ("yes" if ids == ref else "NO")
        ref = ref or ids
        rows.append((f"hf batch={batch}", secs, toks, same))
    if "vllm" in engines:
        vl = load_engine(model, "vllm")
        timed(vl, prompts[:2], Sampling(temperature=0.0, max_tokens=4), None)
        secs, gens = timed(vl, prompts, sampling, None)
        ids = [g.completion_ids for g in gens]
        rows.append(
            ("vllm (one call)", secs, sum(len(g) for g in ids), "yes" if ids == ref else "differs")
        )
        vl.close()
    base = rows[0][2] / rows[0][1]
    print(f"{'mode':<18}{'seconds':>9}{'tokens':>8}{'tok/s':>10}{'x seq':>8}  same tokens")
    for name, secs, toks, same in rows:
        rate = toks / secs
        print(f"{name:<18}{secs:>9.2f}{toks:>8}{rate:>10.1f}{rate / base:>8.2f}  {same}")


if __name__ == "__main__":
    main()
