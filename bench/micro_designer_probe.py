#!/usr/bin/env python3
"""Did the designer's policy change, and by its signal? A probe of finished micro runs.

The designer's reward per round (bench/micro_experiment.py) is measured on the 12 to 18
designs each round happened to write, against an agent that learns in every arm: it is
noisy, and it drifts as the agent learns to use the hint. This probe holds everything but
the designer's weights fixed. For each finished run, its final model and the micro model
it started from write designs for the same prompts: the same documents, skills and seeds,
and the same memory (by default the run's final memory, the context its last designs were
written in; `--memory library`: the library every run starts with, no exemplar). One
agent plays both sides' designs: the micro model (`--agent start`, a fixed agent as in the
experiment's fixed-agent measurement) or the run's own final model (`--agent final`, the
agent its designer was trained to challenge). They are scored as the loop scores them
(one attempt each; invalid designs are dropped from the reward, as in training, and
counted in the valid share). Final minus start, with a bootstrap interval over the
designs, is the change in what the designer writes and nothing else.

    python bench/micro_designer_probe.py                         # runs/micro-experiment
    python bench/micro_designer_probe.py --memory library --agent final --prompts 30

Writes OUT/designer-probe/ (each model's designs, plays and scores, kept and reused by a
rerun and shared by the agents), OUT/designer-probe-MEMORY-AGENT-agent.json and
OUT/micro-designer-probe-MEMORY-AGENT-agent.png, and prints the table. Stages run as the
loop runs them: forked from this process once it has imported torch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import micro_experiment as mx  # noqa: E402
import micro_report as mr  # noqa: E402

from spade_cli import declare as st  # noqa: E402
from spade_cli import dedup  # noqa: E402
from spade_cli.envs.validation import candidate_code  # noqa: E402
from spade_cli.loop.config import load_config  # noqa: E402
from spade_cli.loop.layout import checkpoint_model, checkpoint_record  # noqa: E402
from spade_cli.loop.recipe import engine_args, sandbox_args  # noqa: E402
from spade_cli.loop.stage_process import run_command  # noqa: E402

MIN_VALID = 5  # fewer valid designs on a side than this: no verdict


@contextmanager
def stderr_to(log: Path):
    """The stages' own logs go to LOG, not the terminal (forked children share fd 2)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def stage(argv: list[str], output: Path, log: Path) -> Path:
    """Run `spade-<argv>` into OUTPUT unless a finished one is there (stages write
    atomically, so a file under the final name is complete)."""
    if not output.exists():
        with stderr_to(log):
            code = run_command([*argv, "-o", str(output)])
        if code:
            raise SystemExit(f"spade-{argv[0]} failed (exit {code}); see {log}")
    return output


def probe(
    model: str, where: Path, cfg, agent: str, tag: str, docs: Path, memory: Path, seed: int
) -> Path:
    """One model's designs for the shared prompts, played by one agent (TAG names it in
    the files; the designs are shared by every agent) and scored."""
    where.mkdir(parents=True, exist_ok=True)
    log = where / "stages.log"
    sandbox = sandbox_args(cfg)
    seed_args = ["--seed", str(seed)]
    cands = stage(
        [
            "design",
            str(docs),
            *engine_args(cfg, model),
            *st.to_argv(cfg.design),
            "--memory",
            str(memory),
        ]
        + ["--round", "1", *seed_args],
        where / "candidates.jsonl.zst",
        log,
    )
    valid = stage(
        ["validate", str(cands), *st.to_argv(cfg.validate), *sandbox, *seed_args],
        where / "validated.jsonl.zst",
        log,
    )
    plays = stage(
        ["rollout", str(valid), *engine_args(cfg, agent), *st.to_argv(cfg.rollout), *sandbox]
        + seed_args,
        where / f"rollouts{tag}.jsonl.zst",
        log,
    )
    return stage(
        ["regret", str(plays), *st.to_argv(cfg.regret)], where / f"scored{tag}.jsonl.zst", log
    )


def measures(scored: Path) -> dict:
    """What the designs earned: the reward over the valid ones (invalid designs are
    dropped, as the loop trains), the valid share, the plateau share and the levels. A
    micro design is a family at a level, so most of a probe's designs repeat an earlier
    one, which validation rejects as a duplicate of the batch: each such copy counts as
    the design it copies, with its score (the designer's policy is what is measured)."""
    cands = mx.records(scored)
    valid = [c for c in cands if mx.is_valid(c)]
    by_code = {dedup.code_hash(c["env"]["code"]): c for c in valid}
    played = []
    for c in cands:
        if mx.is_valid(c):
            played.append(c)
        elif c["validation"].get("reason") == "duplicate" and (code := candidate_code(c)):
            if (same := by_code.get(dedup.code_hash(code))) is not None:
                played.append(same)
    rewards = [c["score"]["reward"] for c in played if c["score"].get("reward") is not None]
    rates = [w for c in played if (w := mx.win_rate(c)) is not None]
    levels = [int(m.group(1)) for c in played if (m := mx.LEVEL.search(c["env"]["code"]))]
    return {
        "designs": len(cands),
        "valid": len(played),
        "distinct": len(valid),
        "rewards": rewards,
        "reward": mr.rounded(mr.mean_of(rewards)),
        "valid_share": mr.rounded(len(played) / len(cands)) if cands else None,
        "plateau_share": mr.rounded(
            sum(mx.BAND[0] <= w <= mx.BAND[1] for w in rates) / len(rates) if rates else None
        ),
        "levels": {str(k): levels.count(k) for k in sorted(set(levels))},
    }


def interval(a: list[float], b: list[float], reps: int, seed: int) -> tuple[float, float]:
    """A 90% bootstrap interval of mean(b) - mean(a), resampling each side's designs."""
    rng = random.Random(seed)
    diffs = sorted(
        statistics.fmean(rng.choices(b, k=len(b))) - statistics.fmean(rng.choices(a, k=len(a)))
        for _ in range(reps)
    )
    return round(diffs[int(0.05 * reps)], 4), round(diffs[int(0.95 * reps) - 1], 4)


def verdict(r: dict) -> str:
    if r["interval"] is None:
        return f"too few valid designs (fewer than {MIN_VALID} on a side)"
    lo, hi = r["interval"]
    return "up" if lo > 0 else "down" if hi < 0 else "no change"


def compare(start: dict, final: dict, reps: int, seed: int) -> dict:
    enough = min(len(start["rewards"]), len(final["rewards"])) >= MIN_VALID
    diff = final["reward"] - start["reward"] if enough else None
    out = {"start": start, "final": final, "difference": mr.rounded(diff)}
    out["interval"] = interval(start["rewards"], final["rewards"], reps, seed) if enough else None
    out["verdict"] = verdict(out)
    return out


def table(res: dict) -> str:
    lines = [
        "| run | valid designs (distinct), start → final | reward, start → final "
        "| final − start (90% interval) | plateau share, start → final | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in res["runs"].items():
        s, f = r["start"], r["final"]
        gap = "–"
        if r["interval"] is not None:
            lo, hi = r["interval"]
            gap = f"{r['difference']:+.3f} ({lo:+.3f}, {hi:+.3f})"
        lines.append(
            f"| {name} | {s['valid']} ({s['distinct']}) → {f['valid']} ({f['distinct']}) "
            f"of {s['designs']} "
            f"| {mr.shown(s['reward'])} → {mr.shown(f['reward'])} | {gap} "
            f"| {mr.shown(s['plateau_share'], '.2f')} → {mr.shown(f['plateau_share'], '.2f')} "
            f"| {r['verdict']} |"
        )
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, r in res["runs"].items() if r["interval"] is not None]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1.5))
    for i, name in enumerate(names):
        r = res["runs"][name]
        d, (lo, hi) = r["difference"], r["interval"]
        ax.errorbar(d, i, xerr=[[d - lo], [hi - d]], fmt="o", capsize=3)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("designer reward: final designer − start (90% interval)")
    ax.set_title(
        f"{res['prompts']} prompts, {res['memory']} memory, played by the {res['agent']} agent"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def final_models(out: Path, results: dict) -> dict[str, str]:
    """{run: final model} for each finished run: the model its last round's train stage
    names, its own checkpoint or, when no group had a reward spread, the model it kept."""
    last = f"round-{results['rounds']:03d}"
    found = {}
    for arm, seeds in results["runs"].items():
        for seed in seeds:
            rec = out / f"{arm}-s{seed}" / last / checkpoint_record()
            if rec.exists():
                found[f"{arm}-s{seed}"] = checkpoint_model(rec)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=mx.ROOT / "runs" / "micro-experiment")
    ap.add_argument("--prompts", type=int, default=90, help="design prompts per model")
    ap.add_argument("--memory", choices=("final", "library"), default="final")
    ap.add_argument(
        "--agent",
        choices=("start", "final"),
        default="start",
        help="who plays both sides' designs: the micro model (start), or each run's own "
        "final model, the agent its designer was trained to challenge",
    )
    ap.add_argument("--seed", type=int, default=99, help="documents' and sampling seed")
    ap.add_argument("--reps", type=int, default=4000, help="bootstrap resamples")
    args = ap.parse_args()
    results = json.loads((args.out / "results.json").read_text())
    last = f"round-{results['rounds']:03d}"
    finals = final_models(args.out, results)
    names = list(finals)
    if not names:
        raise SystemExit(f"{args.out}: no finished run to probe")
    fixed_agent = str(args.out / "micro-model")
    pdir = args.out / "designer-probe"
    pdir.mkdir(exist_ok=True)
    docs = stage(
        ["sample-docs", str(args.out / names[0] / "demo-corpus.jsonl.zst")]
        + ["--num", str(args.prompts), "--seed", str(args.seed)],
        pdir / f"docs-{args.prompts}-{args.seed}.jsonl.zst",
        pdir / "stages.log",
    )
    t0 = time.time()
    runs = {}
    for name in names:
        run = args.out / name
        cfg = load_config(str(args.out / f"{name}.toml"))
        memory = run / (
            f"{last}/memory.jsonl.zst" if args.memory == "final" else "memory-000.jsonl.zst"
        )
        got = {}
        final = finals[name]
        agent, tag = (fixed_agent, "") if args.agent == "start" else (final, "-final-agent")
        for side, model in (("start", fixed_agent), ("final", final)):
            print(f"probe {name}: {side} model ...", file=sys.stderr, flush=True)
            where = pdir / f"{name}-{args.memory}-{args.prompts}-{args.seed}" / side
            got[side] = measures(probe(model, where, cfg, agent, tag, docs, memory, args.seed))
        runs[name] = compare(got["start"], got["final"], args.reps, args.seed)
    res = {
        "prompts": args.prompts,
        "memory": args.memory,
        "agent": args.agent,
        "seed": args.seed,
        "reps": args.reps,
        "commit": mx.commit(),
        "seconds": round(time.time() - t0, 1),
        "runs": runs,
    }
    path = args.out / f"designer-probe-{args.memory}-{args.agent}-agent.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    plot(res, args.out / f"micro-designer-probe-{args.memory}-{args.agent}-agent.png")
    print(table(res))
    print(f"results: {path} ({res['seconds']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
