"""Wall time of one CPU demo round, stage by stage, and where it goes.

Runs `spade-loop` on a config (default: examples/demo.toml) into a fresh directory with
SPADE_TIMINGS set, then splits each stage's wall time into model generation, training,
model loading and the rest: the toolchain's own overhead (process start and imports,
record I/O, sandbox, orchestration). Target: the demo round under 5 minutes on 2 cores.

    python bench/bench_loop.py
    python bench/bench_loop.py --config examples/ablations/fixed-pool.toml
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
STAGE_COMMAND = {
    "sample-docs": "spade-sample-docs",
    "pool-source": "spade-eval",
    "pool": "spade-memory",
    "design": "spade-design",
    "validate": "spade-validate",
    "replay": "spade-memory",
    "rollout": "spade-rollout",
    "regret": "spade-regret",
    "train": "spade-train",
    "eval": "spade-eval",
}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default=str(ROOT / "examples" / "demo.toml"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        timings = Path(tmp) / "timings.jsonl"
        t = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "spade_cli", "loop", args.config, "--runs-dir", tmp, "-q"],
            env={**os.environ, "SPADE_TIMINGS": str(timings)},
            stdout=subprocess.PIPE,
        )
        total = time.perf_counter() - t
        if r.returncode != 0:
            sys.exit(f"spade-loop failed (exit {r.returncode})")
        summary = orjson.loads(r.stdout.splitlines()[0])
        stages = summary["stage_seconds"]
        lines = [orjson.loads(x) for x in timings.read_bytes().splitlines()]

    # Commands ran in stage order, one process each (spade-train may add launcher children).
    by_command: dict[str, list[dict]] = {}
    for line in lines:
        by_command.setdefault(line["command"], []).append(line)
    print(f"config: {args.config}")
    print(f"{'stage':12} {'wall s':>8} {'generate':>9} {'train':>8} {'load':>8} {'other':>8}")
    sums = {"wall": 0.0, "generate": 0.0, "train": 0.0, "load": 0.0, "other": 0.0}
    for stage, wall in stages.items():
        rows = by_command.get(STAGE_COMMAND.get(stage, ""), [])
        rec = rows.pop(0) if rows else {"phases": {}}
        ph = rec["phases"]
        gen, train, load = ph.get("generate", 0.0), ph.get("train", 0.0), ph.get("load", 0.0)
        other = max(wall - gen - train - load, 0.0)
        for k, v in (
            ("wall", wall),
            ("generate", gen),
            ("train", train),
            ("load", load),
            ("other", other),
        ):
            sums[k] += v
        print(f"{stage:12} {wall:8.1f} {gen:9.1f} {train:8.1f} {load:8.1f} {other:8.1f}")
    print(
        f"{'stages':12} {sums['wall']:8.1f} {sums['generate']:9.1f} {sums['train']:8.1f} "
        f"{sums['load']:8.1f} {sums['other']:8.1f}"
    )
    setup = total - sums["wall"]
    print(
        f"whole round incl. tiny model + demo corpus build and reporting: {total:.1f} s "
        f"({setup:.1f} s outside stages); target < 300 s"
    )
    print(
        f"share in generation + training: {(sums['generate'] + sums['train']) / total:.1%}; "
        f"model loading {sums['load'] / total:.1%}; toolchain overhead (process start, I/O, "
        f"sandbox, orchestration) {(sums['other'] + setup) / total:.1%}"
    )


if __name__ == "__main__":
    main()
