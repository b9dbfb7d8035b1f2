"""Can the micro model's designer learn a level per family? The designer alone, on a
clean reward.

In the micro experiment the designer settles on one level for every family, while the
level that pays differs per family and moves as the agent learns. This asks whether one
shared model can tell the families apart at all when nothing else is in the way: no agent,
no noise, a reward that never moves. Each step the designer writes designs for the three
skills exactly as a micro loop's design stage does (spade-design: the micro prompt, skill
set, sampling and the micro library as memory), every design is paid from a fixed table
that peaks at a different level per family, and the designer takes one step on them
exactly as the loop's designer step does (spade-train --role designer: the skill-mean
baseline, examples/micro.toml's learning rate, epochs and weight decay). A design that
names no family and level is dropped, as published; one of another family than its
skill's is paid 0, so that the only way to the table's top is each family's own level.

Arms: `signal` (the table's rewards) and `shuffled` (the same rewards permuted within each
skill, spade-train --shuffle-designer-rewards: what the designer does without a signal).

    python bench/designer_bandit.py                       # 2 arms x 15 steps, a few minutes
    python bench/designer_bandit.py --steps 30 --designs 24 --out runs/bandit-24
    python bench/designer_bandit.py --optimizer sgd --lr 0.1 --out runs/bandit-sgd

Writes OUT/bandit.json (per arm and step, per family: designs, levels, mean level, and
the mean reward) and OUT/bandit-levels.png, and prints a line per arm: each family's
mean level and the reward, first third of the steps against the last, and that change
after 5, 10 and 15 steps (5 are a 5-round loop's designer steps). A rerun resumes at the
first step without its checkpoint. `--optimizer sgd` takes the designer's step with
plain gradient descent instead of a fresh AdamW (no weight decay).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spade_cli.loop import stage_process  # noqa: E402
from spade_cli.micro import LIBRARY  # noqa: E402
from spade_cli.micro.model import build_micro_model  # noqa: E402
from spade_cli.micro.site.spade_micro import FAMILIES, SKILLS  # noqa: E402
from spade_cli.recordio import RecordReader, write_records  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from micro_experiment import FAMILY, LEVEL  # noqa: E402

# Where each family's reward peaks: as far apart as the six levels allow.
TARGETS = {"corridor": 5, "code": 3, "switch": 1}
WIDTH = 3  # reward = max(0, 1 - |level - target| / WIDTH)
ARMS = ("signal", "shuffled")


def reward(family: str, level: int) -> float:
    return max(0.0, 1.0 - abs(level - TARGETS[family]) / WIDTH)


def parse(rec: dict) -> tuple[str, int] | None:
    text = (rec.get("design") or {}).get("text") or ""
    fam, lv = FAMILY.search(text), LEVEL.search(text)
    if not fam or not lv or fam[1].lower() not in FAMILIES or not 1 <= int(lv[1]) <= 6:
        return None
    return fam[1].lower(), int(lv[1])


def score(candidates: Path, scored: Path) -> list[tuple[str, int] | None]:
    """Pay each design from the table (0 for another family than its skill's); one that
    names no family and level is dropped."""
    recs, parsed = [], []
    for rec in RecordReader([str(candidates)]):
        p = parse(rec)
        parsed.append(p)
        own = getattr(SKILLS.get(rec.get("skill") or ""), "family", None)
        paid = reward(*p) if p and p[0] == own else 0.0
        rec["validation"] = {"valid": p is not None}
        rec["score"] = (
            {"valid": True, "reason": "ok", "reward": paid, "sample": True}
            if p
            else {"valid": False, "reason": "unparsed", "reward": None, "sample": False}
        )
        recs.append(rec)
    write_records(str(scored), recs)
    return parsed, [r["score"]["reward"] for r in recs if r["score"]["reward"] is not None]


def step_figures(parsed: list[tuple[str, int] | None], paid: list[float]) -> dict:
    found = [p for p in parsed if p]
    out = {
        "designs": len(parsed),
        "parsed": len(found),
        "reward": round(statistics.fmean(paid), 4) if paid else None,
        "families": {},
    }
    for fam in FAMILIES:
        levels = [lv for f, lv in found if f == fam]
        if levels:
            out["families"][fam] = {
                "designs": len(levels),
                "mean_level": round(statistics.fmean(levels), 3),
                "levels": {str(lv): levels.count(lv) for lv in range(1, 7) if lv in levels},
            }
    return out


def run(cmd: list[str], log: Path) -> None:
    with open(log, "a") as f:
        f.write(f"$ spade {' '.join(cmd)}\n")
    if stage_process.run_command([*cmd, "-q"]) != 0:
        sys.exit(f"designer_bandit: `spade {' '.join(cmd[:1])}` failed (see {log})")


def run_arm(arm: str, args, out: Path, recipe: dict) -> list[dict]:
    d = out / arm
    d.mkdir(parents=True, exist_ok=True)
    log = out / f"{arm}.log"
    model = d / "model-000"
    if not (model / "config.json").exists():
        build_micro_model(model)
    design, train = recipe["design"], recipe["train"]
    corpus, memory = out / "demo-corpus.jsonl.zst", out / "memory.jsonl.zst"
    steps = []
    for t in range(1, args.steps + 1):
        docs, cands, scored = (
            d / f"{name}-{t:03d}.jsonl.zst" for name in ("docs", "cands", "scored")
        )
        nxt = d / f"model-{t:03d}"
        seed = str(args.seed * 1000 + t)
        if not cands.exists():
            run(
                [
                    "sample-docs",
                    str(corpus),
                    "--num",
                    str(args.designs),
                    "--seed",
                    seed,
                    "-o",
                    str(docs),
                ],
                log,
            )
            run(
                [
                    "design", str(docs), "--engine", "hf", "--model", str(model),
                    "--num-designs", "1", "--temperature", str(design["temperature"]),
                    "--max-tokens", str(design["max_tokens"]), "--doc-tokens", str(design["doc_tokens"]),
                    "--prompt", "micro", "--skill-set", "micro", "--memory", str(memory),
                    "--round", str(t), "--seed", seed, "-o", str(cands),
                ],
                log,
            )  # fmt: skip
        parsed, paid = score(cands, scored)
        ckpt = d / f"checkpoint-{t:03d}.jsonl"
        if not ckpt.exists():
            run(
                [
                    "train", str(scored), "--model", str(model), "--output-dir", str(nxt),
                    "--role", "designer", "--lr", str(args.lr),
                    "--epochs", str(train["epochs"]), "--optimizer", args.optimizer,
                    "--weight-decay", str(train["weight_decay"] if args.optimizer == "adamw" else 0),
                    "--seed", seed, "-o", str(ckpt),
                    *(["--shuffle-designer-rewards"] if arm == "shuffled" else []),
                ],
                log,
            )  # fmt: skip
        steps.append({"step": t, **step_figures(parsed, paid)})
        # A step whose designs all earned the same trains nothing and keeps the model.
        model = Path(json.loads(ckpt.read_text())["path"])
    return steps


def plot(results: dict, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, paid) = plt.subplots(1, 2, figsize=(11, 4))
    for arm, style in zip(ARMS, ("-", ":"), strict=True):
        pts = [
            (s["step"], s["reward"])
            for s in results["arms"].get(arm, [])
            if s["reward"] is not None
        ]
        if pts:
            paid.plot(*zip(*pts, strict=True), style, color="k", label=arm)
    paid.set_xlabel("designer step")
    paid.set_ylabel("mean reward of the step's designs")
    paid.set_title("What the designer is paid")
    paid.legend(fontsize=7)
    for i, fam in enumerate(FAMILIES):
        for arm, style in zip(ARMS, ("-", ":"), strict=True):
            pts = [
                (s["step"], s["families"][fam]["mean_level"])
                for s in results["arms"].get(arm, [])
                if fam in s["families"]
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, color=f"C{i}", label=f"{fam} ({arm})")
        ax.axhline(TARGETS[fam], color=f"C{i}", alpha=0.3, lw=4)
    ax.set_xlabel("designer step")
    ax.set_ylabel("mean level chosen")
    ax.set_ylim(0.8, 6.2)
    ax.set_title("Designer alone, fixed reward (bands: each family's best)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    p = out / "bandit-levels.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def verdict(arm: str, steps: list[dict]) -> str:
    k = max(1, len(steps) // 3)
    line = f"{arm:8s}"
    for fam in FAMILIES:
        first = [s["families"][fam]["mean_level"] for s in steps[:k] if fam in s["families"]]
        last = [s["families"][fam]["mean_level"] for s in steps[-k:] if fam in s["families"]]
        if first and last:
            line += f"  {fam} {statistics.fmean(first):.2f} -> {statistics.fmean(last):.2f} (best {TARGETS[fam]})"
    rewards = [s["reward"] for s in steps if s["reward"] is not None]
    if rewards:
        line += (
            f"  reward {statistics.fmean(rewards[:k]):.2f} -> {statistics.fmean(rewards[-k:]):.2f}"
        )
        # The loop's criterion (last third of the steps against the first) after 5 steps,
        # a five-round loop's designer steps, after 10 and 15, and after them all.
        line += "  change after " + ", ".join(
            f"{n}: {rise(rewards[:n]):+.2f}"
            for n in sorted({5, 10, 15, len(rewards)})
            if n <= len(rewards)
        )
    return line


def rise(rewards: list[float]) -> float:
    k = max(1, len(rewards) // 3)
    return statistics.fmean(rewards[-k:]) - statistics.fmean(rewards[:k])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=15, help="designer steps per arm")
    ap.add_argument("--designs", type=int, default=12, help="designs per step (the loop's: 12)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument(
        "--optimizer", choices=("adamw", "sgd"), default="adamw", help="the designer step's"
    )
    ap.add_argument("--lr", type=float, help="its learning rate (default: the config's)")
    ap.add_argument("--config", default=str(ROOT / "examples" / "micro.toml"))
    ap.add_argument("--out", default=str(ROOT / "runs" / "designer-bandit"))
    args = ap.parse_args()
    arms = args.arms.split(",")
    if bad := [a for a in arms if a not in ARMS]:
        sys.exit(f"designer_bandit: unknown arm {', '.join(bad)} (have: {', '.join(ARMS)})")
    recipe = tomllib.loads(Path(args.config).read_text())
    args.lr = args.lr or recipe["train"]["learning_rate"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "setup.log"
    if not (out / "demo-corpus.jsonl.zst").exists():
        run(["sample-docs", "--build-demo-corpus", str(out / "demo-corpus.jsonl.zst")], log)
    if not (out / "memory.jsonl.zst").exists():
        run(["memory", "init", str(out / "memory.jsonl.zst"), "--library", str(LIBRARY)], log)
    results = {"targets": TARGETS, "width": WIDTH, "steps": args.steps, "designs": args.designs,
               "seed": args.seed, "optimizer": args.optimizer,
               "learning_rate": args.lr, "arms": {}}  # fmt: skip
    for arm in arms:
        results["arms"][arm] = run_arm(arm, args, out, recipe)
        print(verdict(arm, results["arms"][arm]), flush=True)
    tmp = out / "bandit.json.partial"
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(out / "bandit.json")
    print(f"plot: {plot(results, out)}", file=sys.stderr)


if __name__ == "__main__":
    main()
