"""An agent step of the micro world with the LM head scoring only the completion's
positions against TRL's CPU default of scoring every position, side by side.

    python bench/bench_train_scoring.py              # k=8, 2 repeats
    python bench/bench_train_scoring.py --quick      # k=4, 1 repeat

The micro model (the shipped build) plays every environment of the micro library (three
families, six levels), k episodes per condition, as a micro round's `spade-rollout` does;
then `spade-train --role agent` trains on those rollouts with examples/micro.toml's
settings, alternately with spade's `score_labelled_positions_only` (the default) and
with it switched off (TRL's own CPU path: the LM head projects the prompt and the pads
too, and their log-probabilities are set to 0 after), each a fresh process. Printed: each
step's seconds as spade-train records them (its checkpoint record), the ratio, and the largest difference between
the two sides' losses (the same samples and seed: only float rounding may differ).
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

MODES = ("labelled", "every-position")
# The child a mode runs in: spade-train, with TRL's own choice restored for "every-position".
CHILD = """
import sys
if sys.argv[1] == "every-position":
    import spade_cli.train.trainer as t
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
    labelled, every = (statistics.median(seconds[m]) for m in MODES)
    diff = max(abs(a - b) for a, b in zip(losses[MODES[0]], losses[MODES[1]], strict=True))
    print(
        f"\nmedians of {args.repeat}: {every:.1f}s scoring every position, {labelled:.1f}s "
        f"scoring the completion's: {every / labelled:.2f}x\n"
        f"largest difference between the two sides' losses: {diff:.2e}"
    )


if __name__ == "__main__":
    main()
