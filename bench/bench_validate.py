"""Validation throughput over the example library, in the bubblewrap sandbox and without it.

    python bench/bench_validate.py [--workers 2] [--repeat 2] [--seeds 3] [--quick]

Modes: `forked` (the default as root: workers forked from the fork server), `bwrap` (a
bwrap and Python per worker, SandboxConfig(fork=False)) and `unsafe` (no bwrap). Each
repetition validates every environment of examples/envs once in each mode (modes
interleaved, so machine load hits all alike), `--workers` candidates at a time, through
the same `validate_records` stage spade-validate runs. Prints environments per second per
mode, each sandboxed mode's time over unsafe's (target: at most 1.3), and the worker
start and reset/step round-trip latency (p50, p99) of one session in each mode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spade_cli.envs.library import library_candidates  # noqa: E402
from spade_cli.envs.validation import validate_records  # noqa: E402
from spade_cli.sandbox import EnvSession, SandboxConfig, check_sandbox  # noqa: E402

MODES = {
    "forked": SandboxConfig(),
    "bwrap": SandboxConfig(fork=False),
    "unsafe": SandboxConfig(unsafe=True),
}


def run_once(cands: list[dict], cfg: SandboxConfig, workers: int, seeds: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    out = list(
        validate_records(cands, lambda code: EnvSession(code, cfg), seeds=seeds, workers=workers)
    )
    dt = time.perf_counter() - t0
    valid = sum(r["validation"]["valid"] for r in out)
    return dt, valid


def latency(cfg: SandboxConfig, n: int) -> tuple[float, float, float]:
    code = (Path(__file__).resolve().parents[1] / "examples" / "envs" / "grid_maze.py").read_text()
    t0 = time.perf_counter()
    with EnvSession(code, cfg) as s:
        start = time.perf_counter() - t0
        times = []
        for i in range(n):
            t = time.perf_counter()
            if i % 20 == 0:
                s.reset(seed=i)
            else:
                s.step("left")
            times.append(time.perf_counter() - t)
    times.sort()
    return start, times[len(times) // 2], times[int(len(times) * 0.99)]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one repetition, fewer round trips")
    args = ap.parse_args()
    if args.quick:
        args.repeat = 1
    check_sandbox()
    cands = library_candidates()
    print(
        f"# {len(cands)} library environments, {args.seeds} seeds, {args.workers} workers, "
        f"{args.repeat} repetitions, {os.cpu_count()} CPUs",
        flush=True,
    )
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(args.repeat):
        for mode, cfg in MODES.items():
            dt, valid = run_once(cands, cfg, args.workers, args.seeds)
            times[mode].append(dt)
            print(
                f"rep {r + 1} {mode:7s} {dt:7.2f} s  {len(cands) / dt:6.2f} envs/s  "
                f"({valid}/{len(cands)} valid)",
                flush=True,
            )
    print("\n| mode | envs/s (median) | seconds (median) |\n|---|---|---|")
    med = {m: statistics.median(t) for m, t in times.items()}
    for m in MODES:
        print(f"| {m} | {len(cands) / med[m]:.2f} | {med[m]:.2f} |")
    print()
    for m in ("forked", "bwrap"):
        print(f"sandbox cost: {m} / unsafe time = {med[m] / med['unsafe']:.2f}x (target <= 1.3x)")
    n = 200 if args.quick else 1000
    print("\n| mode | worker start | round trip p50 | p99 |\n|---|---|---|---|")
    for m, cfg in MODES.items():
        start, p50, p99 = latency(cfg, n)
        print(f"| {m} | {start * 1000:.0f} ms | {p50 * 1e6:.0f} µs | {p99 * 1e6:.0f} µs |")


if __name__ == "__main__":
    main()
