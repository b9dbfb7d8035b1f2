"""Rollout throughput: episodes advanced together vs one episode at a time.

    python bench/bench_rollout.py [--envs 8] [-k 2] [--max-turns 3] [--max-tokens 16] [--quick]
    python bench/bench_rollout.py --engine vllm --model PATH      # on a GPU

The same candidates (text environments of the example library, sandboxed) are played by
the tiny offline model on CPU through `run_rollouts` twice: with every episode in flight
at once (one batched generate call per turn) and with `--batch-size 1` (each episode's
turns generated alone). Greedy decoding, so both modes produce (nearly) the same tokens;
the untrained tiny model almost never ends a turn early, so every turn is `--max-tokens`
long. Prints, per mode: wall time, model tokens, tokens/s, generate calls, and the share
of wall time spent outside generation (sandbox start-up, env steps, prompt rendering,
record assembly); then the throughput ratio (target >= 5x) and the batched mode's share
outside generation (target <= 10%); then the batched mode once more without replay
verification, and what verifying every episode's return by replay cost (`--verify`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from spade_cli.engines import Sampling, load_engine  # noqa: E402
from spade_cli.envs.library import library_candidates  # noqa: E402
from spade_cli.rollout import ModelAgent, RolloutStats, run_rollouts  # noqa: E402
from spade_cli.sandbox import SandboxConfig  # noqa: E402
from spade_cli.sandbox.forkserver import fork_server  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def tiny_model() -> str:
    path = DATA / "tiny-model"
    if not (path / "config.json").exists():
        from spade_cli.tinymodel import build_tiny_model

        build_tiny_model(path, seed=0)
    return str(path)


def candidates(n: int) -> list[dict]:
    # Text environments: short prompts, so the CPU model's prefill does not dominate.
    cands = [c for c in library_candidates() if not c["env"].get("tools")][:n]
    for c in cands:
        c["validation"] = {"valid": True, "reason": "ok"}
    return cands


def run(
    cands, engine, args, batch_size: int, ramp: int = 1, verify: float | None = None
) -> tuple[RolloutStats, float]:
    agent = ModelAgent(engine, Sampling(temperature=0.0, max_tokens=args.max_tokens), seed=0)
    stats = RolloutStats()
    t0 = time.perf_counter()
    out = list(
        run_rollouts(
            cands,
            agent,
            k=args.k,
            seed=0,
            sandbox_cfg=sandbox(args),
            max_turns=args.max_turns,
            batch_size=batch_size,
            workers=args.workers,
            ramp=ramp,
            stats=stats,
            verify=args.verify if verify is None else verify,
        )
    )
    # Record I/O belongs to the rollout's cost: serialise what a command would write.
    blob = b"".join(orjson.dumps(r) + b"\n" for r in out)
    wall = time.perf_counter() - t0
    stats.wall_seconds = wall
    assert len(blob) > 0
    return stats, wall


def sandbox(args) -> SandboxConfig:
    return SandboxConfig(unsafe=args.unsafe, fork=not args.no_fork)


def show(name: str, st: RolloutStats) -> None:
    run = st.wall_seconds
    outside = 1 - st.generate_seconds / run
    print(
        f"{name:>10}: {run:7.1f}s wall, {st.episodes} episodes, {st.model_tokens} tokens, "
        f"{st.model_tokens / run:7.1f} tok/s, {st.generate_calls} generate calls, "
        f"{outside:5.1%} of wall time outside generation"
    )
    parts = dict(st.phases, other=run - st.generate_seconds - sum(st.phases.values()))
    print(" " * 12 + "outside generation: " + ", ".join(f"{k} {v:.2f}s" for k, v in parts.items()))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--envs", type=int, default=8, help="environments (text ones of the library)")
    ap.add_argument("-k", type=int, default=2, help="episodes per condition")
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: OpenMP spin-waiting on a shared, busy machine "
        "slows every step many times over; 0 leaves torch's default)",
    )
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument(
        "--ramp", type=int, default=1, help="turns over which the batch fills (run_rollouts ramp)"
    )
    ap.add_argument("--engine", default="hf")
    ap.add_argument(
        "--model", default=None, help="default: the tiny model (built under bench/data)"
    )
    ap.add_argument("--unsafe", action="store_true", help="no bwrap (for machines without it)")
    ap.add_argument(
        "--no-fork",
        action="store_true",
        help="a bwrap and Python per worker instead of forking them from the fork server",
    )
    ap.add_argument("--quick", action="store_true", help="4 environments, k=1")
    ap.add_argument(
        "--verify",
        type=float,
        default=1.0,
        help="fraction of episodes replayed to verify their returns (run_rollouts verify)",
    )
    args = ap.parse_args()
    if args.quick:
        args.envs, args.k = 4, 1
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    model = args.model or tiny_model()
    cands = candidates(args.envs)
    n_eps = 2 * args.k * len(cands)
    engine = load_engine(model, args.engine, max_batch_size=n_eps)
    print(
        f"{len(cands)} environments x {args.k} episodes x 2 conditions = {n_eps} episodes, "
        f"max {args.max_turns} turns x {args.max_tokens} tokens, engine {engine.name}, model {model}"
    )
    engine.generate([[1, 2, 3]], Sampling(max_tokens=2))  # warm-up
    # Like the model, the fork server is started once per process (spade-rollout starts
    # it while the model loads): start it before timing, so neither mode pays for it.
    server = fork_server(sandbox(args))
    t0 = time.perf_counter()
    if server is not None and server.start():
        print(f"fork server started in {time.perf_counter() - t0:.2f}s (not timed below)")
    else:
        print(
            "workers start a bwrap and Python each (no fork server: --no-fork, --unsafe or not root)"
        )
    together, _ = run(cands, engine, args, batch_size=n_eps, ramp=args.ramp)
    show("together", together)
    alone, _ = run(cands, engine, args, batch_size=1)
    show("one by one", alone)
    ratio = (together.model_tokens / together.wall_seconds) / (
        alone.model_tokens / alone.wall_seconds
    )
    gen_ratio = (together.model_tokens / together.generate_seconds) / (
        alone.model_tokens / alone.generate_seconds
    )
    print(f"generation-only ratio (tokens per second inside generate): {gen_ratio:.1f}x")
    outside = 1 - together.generate_seconds / together.wall_seconds
    print(
        f"throughput ratio together/one-by-one: {ratio:.1f}x (target >= 5x); "
        f"tokens {together.model_tokens} vs {alone.model_tokens}"
    )
    print(f"share of batched rollout wall time outside generation: {outside:.1%} (target <= 10%)")
    # What verifying returns by replay costs: the batched run again without it.
    bare, _ = run(cands, engine, args, batch_size=n_eps, ramp=args.ramp, verify=0.0)
    show("no replay", bare)
    waited = together.phases.get("replay_wait", 0.0)
    print(
        f"replay verification (--verify {args.verify:g}): {together.replays} replays and probes; "
        f"the run waited {waited:.2f}s for them = {waited / together.wall_seconds:.1%} of the "
        f"batched wall time ({together.replay_seconds:.2f}s on their own threads, concurrent); "
        f"batched wall {together.wall_seconds:.2f}s vs {bare.wall_seconds:.2f}s without "
        f"({together.wall_seconds / bare.wall_seconds - 1:+.1%})"
    )


if __name__ == "__main__":
    main()
