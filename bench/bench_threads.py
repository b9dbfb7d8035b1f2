"""One loop round with torch on one thread against one thread per core, side by side.

    python bench/bench_threads.py                      # examples/micro.toml, 1 round
    python bench/bench_threads.py --threads 1,2 --repeat 2

Runs `spade-loop --rounds 1` on the config under each OMP_NUM_THREADS (its stages forked
from the loop, so they share its torch thread pool's size), alternating, each into a
fresh directory. Prints every stage's seconds under each setting, the round's wall time
and the ratio to the first setting, and whether the round's figures agree (a float
reduction split over threads may round differently, and a sampled token then differs).
The micro model is built first if it is not cached, outside the timings.
"""

from __future__ import annotations

import os

from bench_stage_process import one_round, print_side_by_side, round_parser, side_by_side


def main() -> None:
    ap = round_parser(__doc__, "setting")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}", help="settings to compare")
    args = ap.parse_args()
    settings = args.threads.split(",")
    walls, stages, figures = side_by_side(
        settings,
        args.repeat,
        lambda threads, runs: one_round(args.config, runs, env={"OMP_NUM_THREADS": threads}),
    )
    print(f"config: {args.config}, {args.repeat} round(s) per setting, median seconds")
    # Threads may round a float reduction differently, and a sampled token then differs.
    print_side_by_side("OMP_NUM_THREADS", settings, walls, stages, figures)


if __name__ == "__main__":
    main()
