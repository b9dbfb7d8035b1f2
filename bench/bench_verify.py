"""What verifying a rollout costs: a worker per replay against one per candidate.

    python bench/bench_verify.py                 # about a minute on 2 cores
    python bench/bench_verify.py -k 4 --repeats 1

The micro world's library (every family at every level, 18 designs) is played by the
micro model as the loop's rollout stage plays it (K plays per condition, the micro
prompt, temperature 1, an action of at most 4 tokens), three ways in one run:

    unverified        --verify 0: the floor
    worker per replay every replay in a fresh sandboxed worker (how rollout verified
                      before; here a candidate's replays run one after another, the
                      CPU work is the same)
    shared worker     one worker per candidate for its replays, the module executed
                      again before each (rollout/verify.py)

Both modes probe each candidate as rollout does, a fresh worker per probe play.

The plays themselves are the same in every mode (same seeds; generation never waits on
verification), so what differs is what verification costs. On two cores it costs
generation time: the replays run on their own threads beside the model. Prints each
mode's wall time, its generation time and the CPU seconds the whole machine spent
(the sandboxed workers are not this process's children), then the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spade_cli.engines import Sampling, load_engine  # noqa: E402
from spade_cli.envs.library import library_candidates, load_library  # noqa: E402
from spade_cli.micro import LIBRARY  # noqa: E402
from spade_cli.micro.model import build_micro_model  # noqa: E402
from spade_cli.rollout import AgentPrompt, ModelAgent, RolloutStats, run_rollouts  # noqa: E402
from spade_cli.rollout import verify as verify_mod  # noqa: E402
from spade_cli.sandbox import SandboxConfig  # noqa: E402

MODES = ("unverified", "worker per replay", "shared worker")


class WorkerPerReplay(verify_mod.FirstStateWorker):
    """Every play in a fresh worker: the scheme the shared worker replaced."""

    def first_state(self):
        self.drop()
        return super().first_state()


def machine_cpu_seconds() -> float:
    """CPU time of every process on the machine so far (user, nice, system, irq)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(x) for i, x in enumerate(fields[:8]) if i not in (3, 4))  # not idle, iowait
    return busy / 100.0


def play(mode: str, cands: list[dict], engine, args) -> tuple[RolloutStats, float, list]:
    shared = verify_mod.FirstStateWorker
    verify_mod.FirstStateWorker = WorkerPerReplay if mode == "worker per replay" else shared
    try:
        agent = ModelAgent(engine, Sampling(temperature=1.0, max_tokens=4), seed=0)
        stats = RolloutStats()
        cpu = machine_cpu_seconds()
        out = list(
            run_rollouts(
                cands,
                agent,
                k=args.k,
                seed=0,
                sandbox_cfg=SandboxConfig(),
                max_turns=8,
                prompt=AgentPrompt("micro"),
                stats=stats,
                verify=0.0 if mode == "unverified" else 1.0,
                hint_source="env",
            )
        )
        return stats, machine_cpu_seconds() - cpu, out
    finally:
        verify_mod.FirstStateWorker = shared


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-k", type=int, default=8, help="plays per condition (the micro recipe's)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each mode, interleaved")
    args = ap.parse_args()

    cands = library_candidates(load_library(LIBRARY))
    for c in cands:
        c["validation"] = {"valid": True, "reason": "ok"}
    with tempfile.TemporaryDirectory() as tmp:
        engine = load_engine(str(build_micro_model(Path(tmp) / "micro")), "hf")
        runs: dict[str, list[tuple[RolloutStats, float]]] = {m: [] for m in MODES}
        returns = {}
        play("unverified", cands, engine, args)  # warm-up: the first run pays for first use
        for _ in range(args.repeats):
            for mode in MODES:
                stats, cpu, out = play(mode, cands, engine, args)
                runs[mode].append((stats, cpu))
                returns[mode] = [e["return"] for r in out for e in r["rollouts"]["nohint"]]
                verified = sum(r["rollouts"].get("verified", 0) for r in out)
                refused = sum(
                    bool(
                        r["rollouts"].get("nondeterministic")
                        or r["rollouts"].get("contract_broken")
                    )
                    for r in out
                )
                print(
                    f"{mode:>16}: {stats.wall_seconds:5.2f}s wall, {stats.generate_seconds:5.2f}s "
                    f"generating, {cpu:5.2f} CPU s, {stats.episodes} episodes, {verified} "
                    f"verified, {refused} refused",
                    flush=True,
                )
    assert len({tuple(r) for r in returns.values()}) == 1, "the modes played differently"

    def median(mode: str, what) -> float:
        return statistics.median(what(s, c) for s, c in runs[mode])

    print(f"\nmedians over {args.repeats} runs of {len(cands)} designs x {2 * args.k} plays:")
    for what, fn in (
        ("wall s", lambda s, c: s.wall_seconds),
        ("generating s", lambda s, c: s.generate_seconds),
        ("CPU s", lambda s, c: c),
    ):
        floor, per_replay, shared = (median(m, fn) for m in MODES)
        print(
            f"  {what:>12}: unverified {floor:5.2f}, worker per replay {per_replay:5.2f} "
            f"({per_replay - floor:+.2f}), shared worker {shared:5.2f} ({shared - floor:+.2f}); "
            f"worker per replay / shared worker {per_replay / shared:4.2f}x"
        )


if __name__ == "__main__":
    main()
