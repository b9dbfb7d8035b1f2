"""What the bwrap sandbox costs: the same worker three ways, in one run.

    python bench/bench_sandbox.py            # ~2-3 minutes on 2 cores
    python bench/bench_sandbox.py --quick    # fewer samples, 32 concurrent workers

Modes: `forked` (the default as root: forked from the fork server's preloaded,
sandboxed Python into namespaces of its own), `bwrap` (a bwrap and a Python of its own,
SandboxConfig(fork=False)) and `unsafe` (the same worker without bwrap). Prints worker
start time, reset/step round-trip latency (p50/p99), memory per worker (PSS, which splits
shared pages fairly, and RSS; the fork server's share included), and a run of N
concurrent workers (default 128) each playing short episodes; ratios are each mode /
unsafe.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spade_cli.sandbox import EnvError, EnvSession, ForkServer, SandboxConfig  # noqa: E402

CODE = """
import gymnasium as gym

class Counter(gym.Env):
    metadata = {"name": "counter", "max_turns": 1000000}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.n = 0
        return "count to 3", {"hint": "say 1, 2, 3", "solution": ["1", "2", "3"]}

    def step(self, action):
        self.n += 1
        ok = action == str(self.n)
        return f"you said {action}", float(ok and self.n == 3), self.n >= 3, False, {"n": self.n}
"""


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def mem_kib(pids: list[int]) -> tuple[int, int]:
    """(PSS, RSS) in KiB summed over pids."""
    pss = rss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            pass
    return pss, rss


def session_pids(env: EnvSession, root: int | None = None) -> list[int]:
    """The outer bwrap, the sandbox's pid 1 and the worker (or just the worker), or the
    process tree under `root`."""
    pids = [root or env.proc.pid]
    frontier = list(pids)
    while frontier:
        pid = frontier.pop()
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        for k in map(int, kids):
            pids.append(k)
            frontier.append(k)
    return pids


def worker_pid(env: EnvSession) -> int:
    return session_pids(env)[-1]


def bench_start(cfg: SandboxConfig, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        with EnvSession(CODE, cfg):
            out.append(time.perf_counter() - t)
    return out


def bench_round_trip(cfg: SandboxConfig, n: int) -> tuple[list[float], list[float]]:
    resets, steps = [], []
    with EnvSession(CODE, cfg) as env:
        for i in range(n):
            t = time.perf_counter()
            env.reset(seed=i)
            resets.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.step("1")
            steps.append(time.perf_counter() - t)
    return resets, steps


def bench_memory(cfg: SandboxConfig, n: int = 8) -> dict:
    envs = [EnvSession(CODE, cfg) for _ in range(n)]
    try:
        for env in envs:
            env.reset(seed=0)
            env.step("1")
        total = mem_kib(all_pids(envs))
        worker = mem_kib([worker_pid(env) for env in envs])
    finally:
        for env in envs:
            env.close()
    return {
        "pss": total[0] / n / 1024,
        "rss": total[1] / n / 1024,
        "worker_pss": worker[0] / n / 1024,
        "worker_rss": worker[1] / n / 1024,
    }


def all_pids(envs: list[EnvSession]) -> list[int]:
    """Every process the sessions need: with a fork server, its whole tree (the zygote
    counts, shared among the workers)."""
    if envs and envs[0].forks is not None:
        return session_pids(envs[0], envs[0].forks.pid)
    return [p for env in envs for p in session_pids(env)]


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_concurrent(cfg: SandboxConfig, n: int, episodes: int) -> dict:
    """n threads, each: start a worker, wait until all n are up, play `episodes`
    episodes of 3 steps, close. The main thread measures memory while all are up."""
    up, done = threading.Barrier(n + 1), threading.Barrier(n + 1)
    starts, steps, errors, sessions = [], [], [], []
    lock = threading.Lock()
    before = mem_available_mib()

    def run(i: int) -> None:
        env = None
        try:
            t = time.perf_counter()
            env = EnvSession(CODE, cfg)
            with lock:
                starts.append(time.perf_counter() - t)
                sessions.append(env)
        except EnvError as e:
            with lock:
                errors.append(f"start: {e}")
        up.wait()
        try:
            if env is not None:
                for ep in range(episodes):
                    env.reset(seed=i * 1000 + ep)
                    for a in ("1", "2", "3"):
                        t = time.perf_counter()
                        env.step(a)
                        with lock:
                            steps.append(time.perf_counter() - t)
        except EnvError as e:
            with lock:
                errors.append(f"episode: {e}")
        done.wait()
        if env is not None:
            env.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    up.wait()
    t_up = time.perf_counter() - t0
    pss, rss = mem_kib(all_pids(list(sessions)))
    avail_drop = before - mem_available_mib()
    done.wait()
    t_done = time.perf_counter() - t0
    for th in threads:
        th.join()
    t_closed = time.perf_counter() - t0
    return {
        "n": n,
        "alive": len(sessions),
        "errors": errors,
        "all_up_s": t_up,
        "episodes_done_s": t_done - t_up,
        "closed_s": t_closed - t_done,
        "start_p50": pct(starts, 0.5) if starts else float("nan"),
        "start_max": max(starts) if starts else float("nan"),
        "step_p50_us": pct(steps, 0.5) * 1e6 if steps else float("nan"),
        "step_p99_us": pct(steps, 0.99) * 1e6 if steps else float("nan"),
        "pss_mib": pss / 1024,
        "rss_mib": rss / 1024,
        "memavailable_drop_mib": avail_drop,
    }


def row(values: list, fmt: str) -> str:
    """The values, then each but the last (unsafe) as a ratio to the last."""
    *others, base = values
    ratios = "".join(f"{v / base:>9.2f}x" if base else f"{'-':>10}" for v in others)
    return "".join(f"{fmt.format(v):>10}" for v in values) + ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples, 32 concurrent workers")
    ap.add_argument("--concurrent", type=int, default=None, help="workers at once (default 128)")
    args = ap.parse_args()
    n_start, n_rt, n_conc, n_ep = (5, 500, 32, 2) if args.quick else (10, 3000, 128, 3)
    if args.concurrent:
        n_conc = args.concurrent
    modes = {
        "forked": SandboxConfig(start_timeout=300, call_timeout=60),
        "bwrap": SandboxConfig(fork=False, start_timeout=300, call_timeout=60),
        "unsafe": SandboxConfig(unsafe=True, start_timeout=300, call_timeout=60),
    }
    if not ForkServer.usable(modes["forked"]):
        print("# the fork server needs root: forked = bwrap here", file=sys.stderr)
    print(
        f"# bench_sandbox: {os.cpu_count()} CPUs, {'quick' if args.quick else 'default'} size",
        file=sys.stderr,
    )
    res: dict[str, dict] = {}
    for mode, cfg in modes.items():
        bench_start(cfg, 1)  # warm the page cache
        st = bench_start(cfg, n_start)
        resets, steps = bench_round_trip(cfg, n_rt)
        res[mode] = {
            "start": statistics.median(st),
            "reset50": pct(resets, 0.5) * 1e6,
            "reset99": pct(resets, 0.99) * 1e6,
            "step50": pct(steps, 0.5) * 1e6,
            "step99": pct(steps, 0.99) * 1e6,
            **bench_memory(cfg),
        }
    head = "".join(f"{m:>10}" for m in modes) + "".join(
        f"{m + '/u':>10}" for m in modes if m != "unsafe"
    )
    print(f"\n{'':28}{head}")
    rows = [
        ("worker start, median (s)", "start", "{:.3f}"),
        ("reset round trip p50 (us)", "reset50", "{:.0f}"),
        ("reset round trip p99 (us)", "reset99", "{:.0f}"),
        ("step round trip p50 (us)", "step50", "{:.0f}"),
        ("step round trip p99 (us)", "step99", "{:.0f}"),
        ("memory/worker PSS (MiB)", "pss", "{:.1f}"),
        ("memory/worker RSS (MiB)", "rss", "{:.1f}"),
        ("  of which the worker PSS", "worker_pss", "{:.1f}"),
    ]
    for label, key, fmt in rows:
        print(f"{label:28}" + row([res[m][key] for m in modes], fmt))
    print(f"\n{n_conc} concurrent workers ({n_ep} episodes of 3 steps each):")
    conc = {mode: bench_concurrent(cfg, n_conc, n_ep) for mode, cfg in modes.items()}
    print(f"{'':28}{head}")
    for label, key, fmt in [
        ("workers up", "alive", "{:d}"),
        ("all up after (s)", "all_up_s", "{:.1f}"),
        ("start p50 under load (s)", "start_p50", "{:.2f}"),
        ("slowest start (s)", "start_max", "{:.2f}"),
        ("episodes done in (s)", "episodes_done_s", "{:.2f}"),
        ("step p50 under load (us)", "step_p50_us", "{:.0f}"),
        ("step p99 under load (us)", "step_p99_us", "{:.0f}"),
        ("all closed in (s)", "closed_s", "{:.2f}"),
        ("total PSS (MiB)", "pss_mib", "{:.0f}"),
        ("MemAvailable drop (MiB)", "memavailable_drop_mib", "{:.0f}"),
    ]:
        print(f"{label:28}" + row([conc[m][key] for m in modes], fmt))
    for mode in modes:
        if conc[mode]["errors"]:
            print(f"{mode}: {len(conc[mode]['errors'])} errors, first: {conc[mode]['errors'][0]}")


if __name__ == "__main__":
    main()
