"""One loop round with its stages forked from the loop's heap as imported, and collected
and frozen first, side by side.

    python bench/bench_fork_heap.py                      # examples/micro.toml, 1 round
    python bench/bench_fork_heap.py --repeat 2

The loop imports torch, transformers, PEFT and TRL once and forks every stage from that
warm interpreter (spade_cli/loop/stage_process.py): some 500,000 objects that each stage
inherits. Left as imported, most of them are young to the garbage collector, so a
stage's first full collection walks them all (0.25 s on two cores), and every explicit
`gc.collect()` (accelerate's, after training) walks them again. The loop collects them
once and freezes them (gc.freeze) before its first fork. This runs `spade-loop --rounds
1` on the config with its stages forked, once as the loop does and once with the
collect and the freeze left out (this script's --drive), alternating, each into a fresh
directory, after one warm-up round that builds the micro model if it is not cached.
Prints every stage's seconds under both, the round's wall time and the ratio, and
checks that both wrote the same round figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import orjson
from bench_stage_process import print_side_by_side, round_parser, side_by_side

ROOT = Path(__file__).resolve().parents[1]
HEAPS = ("as-imported", "frozen")


def one_round(config: str, heap: str, runs: Path) -> tuple[float, dict]:
    """`spade-loop --rounds 1`, its stages forked from a heap as imported or frozen: its
    wall time and its round record."""
    t = time.perf_counter()
    r = subprocess.run(
        [sys.executable, __file__, "--drive", heap, config, "--rounds", "1"]
        + ["--runs-dir", str(runs), "--stage-process", "fork", "-q"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"spade-loop with its heap {heap} failed (exit {r.returncode})")
    return wall, orjson.loads(r.stdout.splitlines()[0])


def drive(heap: str, loop_args: list[str]) -> None:
    """Run `spade-loop LOOP_ARGS` in this process; as-imported: without the collect and
    the freeze before its first fork."""
    from spade_cli import __main__ as spade_main
    from spade_cli.loop import stage_process

    if heap == "as-imported":
        stage_process.gc = types.SimpleNamespace(collect=lambda: 0, freeze=lambda: None)
    sys.argv = ["spade", "loop", *loop_args]
    spade_main.main()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--drive":
        drive(sys.argv[2], sys.argv[3:])
        return
    args = round_parser(__doc__, "heap").parse_args()
    walls, stages, figures = side_by_side(
        list(HEAPS), args.repeat, lambda heap, runs: one_round(args.config, heap, runs)
    )
    print(f"config: {args.config}, {args.repeat} round(s) per heap, median seconds")
    if not print_side_by_side("heap", list(HEAPS), walls, stages, figures):
        sys.exit(1)


if __name__ == "__main__":
    main()
