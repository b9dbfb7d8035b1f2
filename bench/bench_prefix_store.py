"""Multi-turn rollouts with the hf engine's prefix store against without it, side by side.

    python bench/bench_prefix_store.py              # the micro library, k=8, 2 repeats
    python bench/bench_prefix_store.py --quick      # k=2, 1 repeat

The micro model (the shipped build) plays every environment of the micro library (three
families, six levels), k episodes per condition with and without the hint, as a micro
round's `spade-rollout` does (`--prompt micro --hint-source env --max-tokens 4
--temperature 1`) on one torch thread, as the experiment runs its stages. Each repeat
plays it twice, alternating the order: with the engine's
prefix store (a prompt's prefill continues from the longest earlier prompt it extends)
and with the store's budget at 0 (every prompt prefilled from its first token). The
seeds are the same, so the episodes are too, up to float rounding in the logits: printed
are the wall and generate seconds of each, the ratio without / with, and the share of
episodes whose actions agree.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spade_cli.engines import Sampling, load_engine  # noqa: E402
from spade_cli.envs.library import library_candidates, load_library  # noqa: E402
from spade_cli.micro import LIBRARY  # noqa: E402
from spade_cli.micro.model import WEIGHTS  # noqa: E402
from spade_cli.rollout import AgentPrompt, ModelAgent, RolloutStats, run_rollouts  # noqa: E402
from spade_cli.sandbox import SandboxConfig  # noqa: E402

MODES = ("store", "no-store")


def candidates() -> list[dict]:
    cands = library_candidates(load_library(LIBRARY))
    for c in cands:
        c["validation"] = {"valid": True, "reason": "ok"}
    return cands


def play(engine, cands, k: int, seed: int, unsafe: bool) -> tuple[float, RolloutStats, list]:
    sampling = Sampling(temperature=1.0, max_tokens=4)
    stats = RolloutStats()
    t0 = time.perf_counter()
    out = list(
        run_rollouts(
            cands,
            lambda: ModelAgent(engine, sampling, seed=seed),
            k=k,
            seed=seed,
            sandbox_cfg=SandboxConfig(unsafe=unsafe),
            max_turns=8,
            prompt=AgentPrompt("micro"),
            stats=stats,
            hint_source="env",
        )
    )
    wall = time.perf_counter() - t0
    actions = [
        [t["action"] for t in ep["turns"]]
        for rec in out
        for cond in ("nohint", "hint")
        for ep in rec["rollouts"][cond]
    ]
    return wall, stats, actions


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-k", type=int, default=8, help="episodes per condition and environment")
    ap.add_argument("--repeat", type=int, default=2, help="alternating pairs of runs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=str(WEIGHTS), help="default: the shipped micro model")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1, as the experiment runs its stages; 0: torch's default)",
    )
    ap.add_argument("--unsafe", action="store_true", help="no bwrap (for machines without it)")
    ap.add_argument("--quick", action="store_true", help="k=2, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.k, args.repeat = 2, 1
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    cands = candidates()
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    gens: dict[str, list[float]] = {m: [] for m in MODES}
    runs: dict[str, list] = {}
    for rep in range(args.repeat):
        for mode in MODES if rep % 2 == 0 else MODES[::-1]:
            engine = load_engine(args.model, "hf")  # fresh: nothing stored from a run before
            if mode == "no-store":
                engine._prefixes.budget = 0
            wall, stats, actions = play(engine, cands, args.k, args.seed, args.unsafe)
            walls[mode].append(wall)
            gens[mode].append(stats.generate_seconds)
            runs[mode] = actions
            print(
                f"repeat {rep + 1} {mode:>8}: {wall:6.1f}s wall, {stats.generate_seconds:6.1f}s "
                f"generating, {stats.episodes} episodes, {stats.model_tokens} tokens, "
                f"{len(engine._prefixes.entries)} prefixes stored",
                flush=True,
            )
            outside = dict(stats.phases, load=stats.load_seconds)
            print(" " * 18 + "outside: " + ", ".join(f"{k} {v:.1f}s" for k, v in outside.items()))
    with_, without = (statistics.median(walls[m]) for m in MODES)
    gen_with, gen_without = (statistics.median(gens[m]) for m in MODES)
    same = sum(a == b for a, b in zip(runs["store"], runs["no-store"], strict=True))
    print(
        f"\n{len(cands)} environments x {args.k} episodes x 2 conditions, medians of "
        f"{args.repeat}:\n"
        f"  wall:       {without:6.1f}s without the store, {with_:6.1f}s with: "
        f"{without / with_:.2f}x\n"
        f"  generating: {gen_without:6.1f}s without the store, {gen_with:6.1f}s with: "
        f"{gen_without / gen_with:.2f}x\n"
        f"  episodes with the same actions: {same} of {len(runs['store'])}"
    )


if __name__ == "__main__":
    main()
