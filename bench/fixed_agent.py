#!/usr/bin/env python3
"""The designer's reward with the agent held fixed, measured beside a running loop.

    python bench/fixed_agent.py RUN_DIR --rounds N -- ROLLOUT_FLAGS...

For each round of RUN_DIR in turn, once the loop has played the round (its
`rollouts.jsonl.zst` exists, so its validated designs are final), the fixed agent (the
--model of ROLLOUT_FLAGS) plays the round's validated designs and spade-regret scores them
as the loop scores its own: `RUN_DIR/fixed-agent/round-NNN-scored.jsonl.zst`. A round
already scored is not played again, so a rerun resumes.

bench/micro_experiment.py starts it with the loop rather than after it: outside training
the loop's stages leave much of a second core idle, and the measurement, at the lowest
priority, runs there instead of adding its half a minute to the run. Its stages are
forked from this warm interpreter (spade_cli/loop/stage_process.py), so the run starts
Python twice, not once per round. Each round's designs play in their own rollout: a
design's sampled actions depend on the designs it is batched with, so they are the same
whenever the round is measured.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spade_cli.loop import stage_process  # noqa: E402

POLL_SECONDS = 1.0
# What its stages import, preloaded once: not training's packages, which the loop's own
# warm-up takes seconds over.
WARM = (
    "torch",
    "transformers",
    "transformers.models.qwen3.modeling_qwen3",
    "spade_cli.engines.hf",
    "spade_cli.commands.rollout",
    "spade_cli.commands.regret",
)


def round_dir(run_dir: Path, r: int) -> Path:
    return run_dir / f"round-{r:03d}"


def scored_path(run_dir: Path, r: int) -> Path:
    return run_dir / "fixed-agent" / f"round-{r:03d}-scored.jsonl.zst"


def validated(run_dir: Path, r: int) -> list[Path]:
    """The round's validated designs, every design attempt's file."""
    return sorted(round_dir(run_dir, r).glob("validated*.jsonl.zst"))


def played(run_dir: Path, r: int) -> bool:
    """The loop has played round r: its design attempts and their validation are done."""
    return (round_dir(run_dir, r) / "rollouts.jsonl.zst").exists()


def measure_round(run_dir: Path, r: int, rollout_flags: list[str]) -> None:
    files = validated(run_dir, r)
    scored = scored_path(run_dir, r)
    if not files or scored.exists():
        return
    scored.parent.mkdir(exist_ok=True)
    plays = scored.with_name(f"round-{r:03d}-rollouts.jsonl.zst")
    if not plays.exists():
        command(["rollout", *map(str, files), *rollout_flags, "-o", str(plays)])
    command(["regret", str(plays), "--no-dedup", "-o", str(scored)])


def command(argv: list[str]) -> None:
    rc = stage_process.run_command(argv)
    if rc:
        sys.exit(f"fixed_agent: spade-{argv[0]} failed (exit {rc})")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="fixed_agent.py RUN_DIR --rounds N -- ROLLOUT_FLAGS...",
    )
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--rounds", type=int, required=True)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, flags = ap.parse_args(argv[:cut]), argv[cut + 1 :]  # after --: spade-rollout's
    stage_process.die_with_parent()  # the experiment stops it with the loop
    os.nice(19)  # the loop's stages first: this takes only what they leave idle
    stage_process.warm_up(WARM)
    for r in range(1, args.rounds + 1):
        while not played(args.run_dir, r):
            time.sleep(POLL_SECONDS)
        measure_round(args.run_dir, r, flags)


if __name__ == "__main__":
    main()
