"""An agent step of the micro world with the LM head scoring only the model's own tokens,
every completion token, and every position (TRL's CPU default), side by side.

    python bench/bench_train_scoring.py              # k=8, 2 repeats
    python bench/bench_train_scoring.py --quick      # k=4, 1 repeat

The micro model (the shipped build) plays every environment of the micro library (three
families, six levels), k episodes per condition, as a micro round's `spade-rollout` does;
then `spade-train --role agent` trains on those rollouts with examples/micro.toml's
settings, once per mode in turn, each a fresh process:

  model-tokens    the default: the environment's tokens in a multi-turn completion are
                  not labelled (`scored_only_where_model_wrote`), and the LM head
                  projects only the labelled positions (`score_labelled_positions_only`);
  completion      every completion token labelled, the observations included;
  every-position  also TRL's own CPU path: the LM head projects the prompt and the pads
                  too, and their log-probabilities are set to 0 after.

Printed: each step's seconds as spade-train records them (its checkpoint record), the
ratios, and the largest difference between each mode's losses and the default's (the
same samples and seed: only float rounding may differ).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from spade_cli.envs.library import library_candidates, load_library  # noqa: E402
from spade_cli.micro import LIBRARY  # noqa: E402
from spade_cli.micro.model import WEIGHTS  # noqa: E402
from spade_cli.recordio import write_records  # noqa: E402

MODES = ("model-tokens", "completion", "every-position")
# The child a mode runs in: spade-train, with the default's scoring undone mode by mode.
CHILD = """
import contextlib, sys
import spade_cli.train.trainer as t
if sys.argv[1] in ("completion", "every-position"):
    t.scored_only_where_model_wrote = lambda model, inputs: contextlib.nullcontext(inputs)
if sys.argv[1] == "every-position":
    t.score_labelled_positions_only = lambda: None
sys.argv = ["spade", "train", *sys.argv[2:]]
from spade_cli.__main__ import main
main()
"""
ENV = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def rollouts(work: Path, model: str, k: int) -> Path:
    cands = library_candidates(load_library(LIBRARY))
    for c in cands:
        c["validation"] = {"valid": True, "reason": "ok"}
    valid, out = work / "valid.jsonl", work / "rollouts.jsonl.zst"
    write_records(str(valid), cands)
    subprocess.run(
        [sys.executable, "-m", "spade_cli", "rollout", str(valid), "--engine", "hf"]
        + ["--model", model, "--episodes", str(k), "--hint-source", "env", "--max-tokens", "4"]
        + ["--max-turns", "8", "--prompt", "micro", "--temperature", "1", "-q", "-o", str(out)],
        check=True,
        env=ENV,
        cwd=ROOT,
    )
    return out


def train(work: Path, model: str, data: Path, mode: str, rep: int) -> dict:
    out = work / f"{mode}-{rep}"
    subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(data), "--model", model]
        + ["--output-dir", str(out), "--role", "agent", "--lr", "1e-4", "--weight-decay", "0.1"]
        + ["--epochs", "2", "--compact-filter", "--seed", "1", "-q", "-o", f"{out}.jsonl"]
        + ["--metrics", f"{out}.metrics.jsonl"],
        check=True,
        env=ENV,
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    rec = orjson.loads(Path(f"{out}.jsonl").read_bytes().splitlines()[0])
    rows = map(orjson.loads, Path(f"{out}.metrics.jsonl").read_bytes().splitlines())
    rec["losses"] = [r["losses/loss"] for r in rows if "losses/loss" in r]
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-k", type=int, default=8, help="episodes per condition and environment")
    ap.add_argument("--repeat", type=int, default=2, help="alternating pairs of steps")
    ap.add_argument("--model", default=str(WEIGHTS), help="default: the shipped micro model")
    ap.add_argument("--quick", action="store_true", help="k=4, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.k, args.repeat = 4, 1
    seconds: dict[str, list[float]] = {m: [] for m in MODES}
    losses: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = rollouts(work, args.model, args.k)
        for rep in range(args.repeat):
            for mode in MODES if rep % 2 == 0 else MODES[::-1]:
                rec = train(work, args.model, data, mode, rep)
                seconds[mode].append(rec["seconds"])
                losses[mode] = rec["losses"]
                print(
                    f"repeat {rep + 1} {mode:>14}: {rec['seconds']:6.1f}s, "
                    f"{rec['steps']} optimizer steps",
                    flush=True,
                )
    median = {m: statistics.median(seconds[m]) for m in MODES}
    print(f"\nmedians of {args.repeat}:")
    for m in MODES:
        diff = max(abs(a - b) for a, b in zip(losses[m], losses[MODES[0]], strict=True))
        print(
            f"  {m:>14}: {median[m]:6.1f}s, {median[m] / median[MODES[0]]:.2f}x the default's; "
            f"losses within {diff:.2e} of its"
        )


if __name__ == "__main__":
    main()
