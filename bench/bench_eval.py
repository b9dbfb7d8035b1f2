"""spade-eval throughput: oracle run times per suite, tiny-model items/s per suite on CPU,
and batched turns vs one episode at a time (same items, same greedy tokens).

    python bench/bench_eval.py            # default sizes, a few minutes on 2 cores
    python bench/bench_eval.py --quick    # smaller
    python bench/bench_eval.py --full     # the oracle on all 800 BFCL entries etc.

Suites whose package is missing (or the sandbox, for `library`) are skipped with a note.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spade_cli.errors import SpadeError  # noqa: E402
from spade_cli.evals import run_eval  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def oracle_times(sizes: dict[str, int]) -> None:
    print("\n== oracle (harness check): tasks, seconds, tasks/s, accuracy")
    for suite, n in sizes.items():
        try:
            (recs, summ), dt = timed(lambda s=suite, n=n: run_eval([s], n=n, seed=0, oracle=True))
        except SpadeError as e:
            print(f"{suite:14s} skipped: {e}")
            continue
        acc = summ["overall"]["accuracy"]
        print(f"{suite:14s} {len(recs):5d} {dt:8.2f}s {len(recs) / dt:8.1f}/s  {100 * acc:5.1f}%")


def model_times(model: str, plans: dict[str, dict]) -> None:
    from spade_cli.engines import Sampling, load_engine

    eng = load_engine(model, engine="hf")
    print(
        "\n== tiny model on CPU (hf engine, greedy): tasks, model turns, seconds, items/s, tokens/s"
    )
    rows = {}
    for suite, plan in plans.items():
        sampling = Sampling(temperature=0.0, max_tokens=plan["max_tokens"])
        try:
            (recs, summ), dt = timed(
                lambda s=suite, p=plan, sm=sampling: run_eval(
                    [s], eng, n=p["n"], seed=0, sampling=sm, max_turns=p.get("max_turns")
                )
            )
        except SpadeError as e:
            print(f"{suite:14s} skipped: {e}")
            continue
        turns = sum(x["samples"][0]["num_turns"] for x in recs)
        toks = sum(x["samples"][0]["completion_tokens"] for x in recs)
        rows[suite] = dt
        print(
            f"{suite:14s} {len(recs):5d} {turns:6d} {dt:8.2f}s {len(recs) / dt:8.2f}/s {toks / dt:8.1f}"
        )

    # Batched turns vs one episode at a time on the same items: the agent loop's batching.
    suite, plan = "reasoning-gym", plans["reasoning-gym"]
    sampling = Sampling(temperature=0.0, max_tokens=plan["max_tokens"])
    try:
        (a, _), t_batch = timed(
            lambda: run_eval([suite], eng, n=plan["n"], seed=0, sampling=sampling, max_in_flight=64)
        )
        (b, _), t_one = timed(
            lambda: run_eval([suite], eng, n=plan["n"], seed=0, sampling=sampling, max_in_flight=1)
        )
    except SpadeError as e:
        print(f"batching comparison skipped: {e}")
        return
    same = [x["samples"][0]["turns"] for x in a] == [x["samples"][0]["turns"] for x in b]
    print(
        f"\n== {suite}, {plan['n']} items: batched {t_batch:.2f}s vs one at a time {t_one:.2f}s "
        f"-> {t_one / t_batch:.2f}x (same actions: {same})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--model", help="model directory (default: build the tiny model)")
    args = ap.parse_args()
    if args.quick:
        oracle = {"bfcl": 40, "reasoning-gym": 36, "textarena": 10, "library": 18}
        plans = {
            "reasoning-gym": {"n": 18, "max_tokens": 16},
            "textarena": {"n": 5, "max_tokens": 16, "max_turns": 3},
            "bfcl": {"n": 1, "max_tokens": 16, "max_turns": 2},
            "library": {"n": 4, "max_tokens": 16, "max_turns": 3},
        }
    else:
        oracle = {
            "bfcl": 0 if args.full else 200,
            "reasoning-gym": 180,
            "textarena": 50,
            "library": 36,
        }
        plans = {
            "reasoning-gym": {"n": 36, "max_tokens": 32},
            "textarena": {"n": 10, "max_tokens": 16, "max_turns": 4},
            "bfcl": {"n": 2, "max_tokens": 16, "max_turns": 2},
            "library": {"n": 8, "max_tokens": 16, "max_turns": 4},
        }
    oracle_times(oracle)
    model = args.model
    with tempfile.TemporaryDirectory() as tmp:
        if model is None:
            from spade_cli.tinymodel import build_tiny_model

            model = str(build_tiny_model(Path(tmp) / "tiny", seed=0))
        model_times(model, plans)


if __name__ == "__main__":
    main()
