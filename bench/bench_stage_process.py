"""One loop round with its stages forked from the loop against started fresh, side by side.

    python bench/bench_stage_process.py                      # examples/micro.toml, 1 round
    python bench/bench_stage_process.py --config examples/demo.toml --repeat 2

Runs `spade-loop --rounds 1` on the config with `--stage-process exec` (a fresh
`python -m spade_cli` per stage) and `--stage-process fork` (each stage a child of the
loop, which imported torch, transformers, PEFT and TRL once), alternating, each into a
fresh directory. Prints every stage's seconds under both, the round's wall time and the
ratio exec / fork, and checks that both wrote the same records. The micro model is built
first if it is not cached, outside the timings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
MODES = ("exec", "fork")


def one_round(
    config: str, runs: Path, flags: tuple = (), env: dict | None = None
) -> tuple[float, dict]:
    """`spade-loop --rounds 1` on the config with extra flags and environment: its wall
    time and its round record."""
    t = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "spade_cli", "loop", config, "--rounds", "1"]
        + ["--runs-dir", str(runs), *flags, "-q"],
        stdout=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"spade-loop {' '.join(flags)} {env or ''} failed (exit {r.returncode})")
    return wall, orjson.loads(r.stdout.splitlines()[0])


def side_by_side(settings: list[str], repeat: int, round_of) -> tuple[dict, dict, dict]:
    """`round_of(setting, runs_dir)` for each setting, alternating, `repeat` times after one
    warm-up round under the first (which builds and caches the model): per setting its
    walls, its stages' seconds and the last round's comparable figures."""
    walls: dict[str, list[float]] = {s: [] for s in settings}
    stages: dict[str, dict[str, list[float]]] = {s: {} for s in settings}
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        round_of(settings[0], Path(tmp) / "warm-up")
        for i in range(repeat):
            for s in settings:
                wall, summary = round_of(s, Path(tmp) / f"{s}-{i}")
                walls[s].append(wall)
                for name, secs in summary["stage_seconds"].items():
                    stages[s].setdefault(name, []).append(secs)
                figures[s] = comparable(summary)
    return walls, stages, figures


def comparable(summary: dict) -> dict:
    """The round's figures that do not depend on timing or on the run's directory. The
    training loss is compared to 5 significant digits: CPU float reductions can differ
    in the last digits between two processes, forked or not."""
    keep = ("designs", "valid", "reasons", "regret_mean", "designer_reward_mean", "episodes")
    loss = summary.get("train_loss_last")
    return {k: summary.get(k) for k in keep} | {"train_loss_last": loss and float(f"{loss:.5g}")}


def round_parser(description: str, per: str) -> argparse.ArgumentParser:
    """The round benchmarks' options: the loop config and how many rounds per setting."""
    ap = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default=str(ROOT / "examples" / "micro.toml"))
    ap.add_argument("--repeat", type=int, default=1, help=f"Rounds per {per} (alternating).")
    return ap


def print_side_by_side(label: str, settings: list[str], walls, stages, figures) -> bool:
    """Print each stage's and the round's median seconds under every setting, with the
    first setting's time over each other's (above 1: that one is faster); True where
    every setting wrote the same round figures (printed where they differ)."""
    base = settings[0]
    width = max(9, *(len(s) + 2 for s in settings))
    print(f"{label:16}" + "".join(f"{s:>{width}}" for s in settings) + "   ratio to the first")
    names = list(stages[base]) + [n for s in settings for n in stages[s] if n not in stages[base]]
    rows = [(n, [statistics.median(stages[s].get(n, [0.0])) for s in settings]) for n in names]
    rows.append(("round (wall)", [statistics.median(walls[s]) for s in settings]))
    for name, med in dict(rows).items():
        ratios = " ".join(f"{med[0] / m if m else float('nan'):5.2f}" for m in med[1:])
        print(f"{name:16}" + "".join(f"{m:{width}.2f}" for m in med) + f"   {ratios}")
    same = all(figures[s] == figures[base] for s in settings)
    print(f"same round figures under every setting: {'yes' if same else 'NO'}")
    if not same:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    return same


def main() -> None:
    args = round_parser(__doc__, "mode").parse_args()
    walls, stages, figures = side_by_side(
        list(MODES),
        args.repeat,
        lambda mode, runs: one_round(args.config, runs, ("--stage-process", mode)),
    )
    print(f"config: {args.config}, {args.repeat} round(s) per mode, median seconds")
    if not print_side_by_side("stage process", list(MODES), walls, stages, figures):
        sys.exit(1)


if __name__ == "__main__":
    main()
