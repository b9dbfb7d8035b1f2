"""Per-round metrics, the run's metrics.jsonl, PNG plots and the stderr table."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .. import SCHEMA_VERSION
from ..recordio import RecordReader, atomic_write_bytes
from ..records import make_id

if TYPE_CHECKING:
    from .config import LoopConfig
    from .runner import Round


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 4) if xs else None


def score_metrics(scored: list[dict]) -> dict[str, Any]:
    """Validity, rejection reasons, regret and success rates of one round's candidates."""
    designed = [c for c in scored if c.get("origin", "design") != "replay"]
    valid = [c for c in designed if (c.get("validation") or {}).get("valid")]
    reasons = Counter((c.get("validation") or {}).get("reason", "unvalidated") for c in designed)
    regrets = [c["score"]["regret"] for c in scored if (c.get("score") or {}).get("regret") is not None]
    rewards = [c["score"]["reward"] for c in designed if (c.get("score") or {}).get("reward") is not None]
    succ: dict[str, list[float]] = {"nohint": [], "hint": []}
    returns: dict[str, list[float]] = {"nohint": [], "hint": []}
    for c in scored:
        ro = c.get("rollouts") or {}
        for cond in ("nohint", "hint"):
            for ep in ro.get(cond) or []:
                succ[cond].append(1.0 if ep.get("success") else 0.0)
                returns[cond].append(float(ep.get("return", 0.0)))
    return {
        "designs": len(designed),
        "valid": len(valid),
        "valid_rate": round(len(valid) / len(designed), 4) if designed else None,
        "reasons": dict(sorted(reasons.items())),
        "environments_played": sum(1 for c in scored if c.get("rollouts")),
        "regret_mean": _mean(regrets),
        "regrets": regrets,
        "designer_reward_mean": _mean(rewards),
        "success_nohint": _mean(succ["nohint"]),
        "success_hint": _mean(succ["hint"]),
        "return_nohint": _mean(returns["nohint"]),
        "return_hint": _mean(returns["hint"]),
        "episodes": len(succ["nohint"]) + len(succ["hint"]),
    }


def train_metrics(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    losses = [r["losses/loss"] for r in rows if "losses/loss" in r]
    return {"train_steps": len(losses), "train_loss_last": losses[-1] if losses else None,
            "train_losses": losses}


def round_summary(cfg: LoopConfig, rnd: Round) -> dict[str, Any]:
    scored = list(RecordReader([str(rnd.path("scored.jsonl.zst"))]))
    stages = {k: v["seconds"] for k, v in rnd.manifest["stages"].items()}
    summary = {
        "kind": "round",
        "v": SCHEMA_VERSION,
        "id": make_id("round", cfg.name, rnd.r),
        "parents": [],
        "run": cfg.name,
        "round": rnd.r,
        "model": rnd.model,
        **score_metrics(scored),
        **train_metrics(rnd.path("train-metrics.jsonl")),
        "stage_seconds": stages,
        "dir": str(rnd.dir),
    }
    _write_metrics(cfg, summary)
    plot_run(cfg)
    return summary


def _write_metrics(cfg: LoopConfig, summary: dict[str, Any]) -> None:
    path = cfg.run_dir / "metrics.jsonl"
    rows = []
    if path.exists():
        rows = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("round") != summary["round"]] + [summary]
    rows.sort(key=lambda r: r["round"])
    atomic_write_bytes(str(path), b"".join(orjson.dumps(r) + b"\n" for r in rows))


def load_metrics(cfg: LoopConfig) -> list[dict[str, Any]]:
    path = cfg.run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def plot_run(cfg: LoopConfig) -> list[Path]:
    """Four PNGs under RUN/plots/, redrawn after every round across all rounds so far."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_metrics(cfg)
    out_dir = cfg.run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    rounds = [r["round"] for r in rows]
    paths = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        path = out_dir / name
        tmp = out_dir / f".{name}.partial.png"
        fig.savefig(tmp, dpi=90)
        plt.close(fig)
        tmp.replace(path)
        paths.append(path)

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(rounds, [r.get("valid_rate") or 0 for r in rows], marker="o")
    a.set(title="valid design rate", xlabel="round", ylim=(0, 1.05))
    reasons = sorted({k for r in rows for k in r.get("reasons", {})})
    bottom = [0] * len(rows)
    for reason in reasons:
        vals = [r.get("reasons", {}).get(reason, 0) for r in rows]
        b.bar(rounds, vals, bottom=bottom, label=reason)
        bottom = [x + y for x, y in zip(bottom, vals, strict=True)]
    b.set(title="validation verdicts", xlabel="round", ylabel="designs")
    if reasons:
        b.legend(fontsize=7)
    save(fig, "validity.png")

    fig, ax = plt.subplots(figsize=(6, 3.6))
    data = [r.get("regrets") or [0.0] for r in rows]
    ax.boxplot(data, positions=rounds or [1])
    ax.axhline(0, color="grey", lw=0.5)
    ax.set(title="regret per environment", xlabel="round", ylabel="regret")
    save(fig, "regret.png")

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(rounds, [r.get("success_nohint") or 0 for r in rows], marker="o", label="no hint")
    ax.plot(rounds, [r.get("success_hint") or 0 for r in rows], marker="s", label="with hint")
    ax.set(title="agent success rate", xlabel="round", ylim=(0, 1.05))
    ax.legend()
    save(fig, "success.png")

    fig, ax = plt.subplots(figsize=(6, 3.6))
    step = 0
    for r in rows:
        losses = r.get("train_losses") or []
        ax.plot(range(step, step + len(losses)), losses, label=f"round {r['round']}")
        step += len(losses)
    ax.set(title="training loss", xlabel="step", ylabel="loss")
    if rows:
        ax.legend(fontsize=7)
    save(fig, "training.png")
    return paths


def table(rows: list[dict[str, Any]]) -> str:
    """A short fixed-width table of the run so far, for stderr."""
    cols = [("round", "round", "{}"), ("designs", "designs", "{}"), ("valid", "valid_rate", "{:.2f}"),
            ("regret", "regret_mean", "{:+.3f}"), ("succ", "success_nohint", "{:.2f}"),
            ("succ+hint", "success_hint", "{:.2f}"), ("loss", "train_loss_last", "{:.4f}")]
    lines = ["  ".join(f"{h:>9}" for h, _, _ in cols)]
    for r in rows:
        cells = []
        for _, key, fmt in cols:
            v = r.get(key)
            cells.append(f"{(fmt.format(v) if v is not None else '-'):>9}")
        lines.append("  ".join(cells))
    return "\n".join(lines)

