"""Wall time of one demo round with 1 agent step and with N (`loop.agent_steps`).

Runs `spade-loop` on a config (default: examples/demo.toml) twice, one round each, into
fresh directories: as written (`[loop] agent_steps = 1`) and with `agent_steps = N`
appended, then prints each stage's seconds from the rounds' manifests side by side and
the ratio of the round totals. The extra steps cost one no-hint rollout and one agent
train stage each, plus the designer's rescoring.

    python bench/bench_schedule.py
    python bench/bench_schedule.py --steps 4 --config examples/demo.toml
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def round_seconds(config: Path, runs: Path) -> dict[str, float]:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "spade_cli",
            "loop",
            str(config),
            "--runs-dir",
            str(runs),
            "--rounds",
            "1",
            "-q",
        ],
        stdout=subprocess.DEVNULL,
    )
    if r.returncode != 0:
        sys.exit(f"spade-loop {config} failed (exit {r.returncode})")
    (manifest,) = runs.glob("*/round-001/manifest.json")
    return {k: v["seconds"] for k, v in orjson.loads(manifest.read_bytes())["stages"].items()}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default=str(ROOT / "examples" / "demo.toml"))
    ap.add_argument(
        "--steps", type=int, default=2, help="agent_steps of the second round (default 2)"
    )
    args = ap.parse_args()
    text = Path(args.config).read_text()
    if "[loop]" in text:
        sys.exit(f"{args.config} has a [loop] table already; give a config without one")
    with tempfile.TemporaryDirectory() as tmp:
        one, many = Path(tmp) / "one.toml", Path(tmp) / "many.toml"
        one.write_text(text)
        many.write_text(text + f"\n[loop]\nagent_steps = {args.steps}\n")
        a = round_seconds(one, Path(tmp) / "runs-1")
        b = round_seconds(many, Path(tmp) / "runs-n")
    print(f"config: {args.config}; one round, agent_steps 1 vs {args.steps}")
    print(f"{'stage':14} {'1 step s':>9} {f'{args.steps} steps s':>10}")
    for stage in dict.fromkeys([*a, *b]):
        cells = [f"{d[stage]:.1f}" if stage in d else "-" for d in (a, b)]
        print(f"{stage:14} {cells[0]:>9} {cells[1]:>10}")
    ta, tb = sum(a.values()), sum(b.values())
    print(f"{'round':14} {ta:9.1f} {tb:10.1f}   ratio {tb / ta:.2f}x")


if __name__ == "__main__":
    main()
