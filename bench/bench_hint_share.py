"""How much of a round the hint stage takes: reads a run's metrics.jsonl (per-stage
seconds from the round manifests) and prints, per round, hint seconds beside the round's
total and their ratio.

    python3 bench/bench_hint_share.py runs/demo
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson


def main(run_dir: str) -> None:
    rows = [
        orjson.loads(x)
        for x in (Path(run_dir) / "metrics.jsonl").read_bytes().splitlines()
        if x.strip()
    ]
    print(
        f"{'round':>5}  {'hint s':>8}  {'rollout s':>9}  {'round s':>8}  {'hint/round':>10}  {'hint/rollout':>12}"
    )
    for r in rows:
        st = r.get("stage_seconds") or {}
        total = sum(st.values())
        hint, roll = st.get("hint", 0.0), st.get("rollout", 0.0)
        print(
            f"{r['round']:>5}  {hint:>8.1f}  {roll:>9.1f}  {total:>8.1f}  {hint / total if total else 0:>10.1%}"
            f"  {hint / roll if roll else 0:>12.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/demo")
