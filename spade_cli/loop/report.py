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
from .layout import (
    SCORED,
    SCORED_WINDOW,
    Round,
    checkpoint_record,
    step_rollouts,
    train_metrics_file,
)
from .recipe import round_stages
from .trackers import report_round

if TYPE_CHECKING:
    from .config import LoopConfig


COMPONENTS = ("regret", "win_rate", "plateau", "scaled_regret", "variance_reward")
"""The parts of the designer's reward (score.components), averaged per round."""


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 4) if xs else None


def score_metrics(scored: list[dict]) -> dict[str, Any]:
    """Validity, rejection reasons, regret and success rates of one round's candidates."""
    designed = [c for c in scored if c.get("origin", "design") != "replay"]
    valid = [c for c in designed if (c.get("validation") or {}).get("valid")]
    reasons = Counter((c.get("validation") or {}).get("reason", "unvalidated") for c in designed)
    # Genuinely multi-turn: observations depend on the actions (spade-validate measures it).
    measured = [
        c["validation"]["multi_turn"]
        for c in valid
        if c["validation"].get("multi_turn") is not None
    ]
    regrets = [
        c["score"]["regret"] for c in scored if (c.get("score") or {}).get("regret") is not None
    ]
    rewards = [
        c["score"]["reward"] for c in designed if (c.get("score") or {}).get("reward") is not None
    ]
    comps: dict[str, list[float]] = {k: [] for k in COMPONENTS}
    for c in scored:
        for k, v in ((c.get("score") or {}).get("components") or {}).items():
            if k in comps and v is not None:
                comps[k].append(v)
    attempts = Counter(
        str((c.get("design") or {}).get("attempt", 1)) for c in designed if c.get("design")
    )
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
        "multi_turn_rate": round(sum(measured) / len(measured), 4) if measured else None,
        "environments_played": sum(1 for c in scored if c.get("rollouts")),
        "regret_mean": _mean(regrets),
        "regrets": regrets,
        "designer_reward_mean": _mean(rewards),
        "designer_samples": len(rewards),
        "design_attempts": dict(sorted(attempts.items())),
        **{f"{k}_mean": _mean(v) for k, v in comps.items()},
        "success_nohint": _mean(succ["nohint"]),
        "success_hint": _mean(succ["hint"]),
        "return_nohint": _mean(returns["nohint"]),
        "return_hint": _mean(returns["hint"]),
        "episodes": len(succ["nohint"]) + len(succ["hint"]),
        "skills": skill_metrics(designed),
    }


def skill_metrics(designed: list[dict]) -> dict[str, dict[str, Any]]:
    """Per target skill: designs, valid rate, no-hint win rate (success over its plays)
    and mean regret of the round's designs; designs without a skill are left out."""
    out: dict[str, dict[str, Any]] = {}
    for skill in sorted({c["skill"] for c in designed if c.get("skill")}):
        mine = [c for c in designed if c.get("skill") == skill]
        valid = [c for c in mine if (c.get("validation") or {}).get("valid")]
        wins = [
            1.0 if ep.get("success") else 0.0
            for c in mine
            for ep in (c.get("rollouts") or {}).get("nohint") or []
        ]
        regrets = [
            c["score"]["regret"] for c in mine if (c.get("score") or {}).get("regret") is not None
        ]
        out[skill] = {
            "designs": len(mine),
            "valid_rate": round(len(valid) / len(mine), 4),
            "win_rate": _mean(wins),
            "regret_mean": _mean(regrets),
        }
    return out


def train_metrics(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    losses = [r["losses/loss"] for r in rows if "losses/loss" in r]
    return {
        "train_steps": len(losses),
        "train_loss_last": losses[-1] if losses else None,
        "train_losses": losses,
    }


def step_metrics(cfg: LoopConfig, rnd: Round, scored: list[dict]) -> list[dict[str, Any]]:
    """One row per agent step of the round: its no-hint plays (win rate = mean return, as
    the designer's reward reads it, and success rate), its optimizer steps and loss, and
    its stages' seconds; then the designer's step."""
    seconds = {k: v["seconds"] for k, v in rnd.manifest["stages"].items()}
    names = {stage.name for stage in round_stages(cfg, rnd.r)}
    rows = []
    for s in range(1, cfg.loop.agent_steps + 1):
        plays = scored if s == 1 else _records(rnd.path(step_rollouts(s)))
        eps = [ep for c in plays for ep in (c.get("rollouts") or {}).get("nohint") or []]
        name = f"train-s{s}" if f"train-s{s}" in names else "train"
        tm = _step_train(rnd, "" if name == "train" else f"-s{s}")
        rows.append(
            {
                "step": s,
                "role": "agent",
                "episodes": len(eps),
                "win_rate": _mean([float(ep.get("return", 0.0)) for ep in eps]),
                "success_nohint": _mean([1.0 if ep.get("success") else 0.0 for ep in eps]),
                **tm,
                "seconds": round(sum(seconds.get(k, 0.0) for k in (f"rollout-s{s}", name)), 3),
            }
        )
    if "regret-window" in names:
        tm = _step_train(rnd, "")
        rows.append(
            {
                "step": cfg.loop.agent_steps,
                "role": "designer",
                **tm,
                "seconds": round(seconds.get("regret-window", 0.0) + seconds.get("train", 0.0), 3),
            }
        )
    return rows


def _step_train(rnd: Round, tag: str) -> dict[str, Any]:
    """A train stage's optimizer steps and losses (its metrics file) and its checkpoint's
    format (`unchanged` when no group had a reward spread)."""
    tm = train_metrics(rnd.path(train_metrics_file(tag)))
    rec = rnd.path(checkpoint_record(tag))
    ckpt = orjson.loads(rec.read_bytes().splitlines()[0]) if rec.exists() else {}
    return {
        "train_steps": tm.get("train_steps", ckpt.get("steps")),
        "train_loss_last": tm.get("train_loss_last"),
        "train_losses": tm.get("train_losses", []),
        "checkpoint_format": ckpt.get("format"),
    }


def _records(path: Path) -> list[dict]:
    return list(RecordReader([str(path)])) if path.exists() else []


def round_summary(cfg: LoopConfig, rnd: Round) -> dict[str, Any]:
    scored = list(RecordReader([str(rnd.path(SCORED))]))
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
        **train_metrics(rnd.path(train_metrics_file())),
        "stage_seconds": stages,
        "dir": str(rnd.dir),
    }
    if cfg.loop.agent_steps > 1:
        summary["steps"] = step_metrics(cfg, rnd, scored)
        window = rnd.path(SCORED_WINDOW)
        if window.exists():
            # What the designer trained on: its rewards with the window's win rate.
            rescored = score_metrics(list(RecordReader([str(window)])))
            summary.update(
                {
                    k: rescored[k]
                    for k in (
                        "designer_reward_mean",
                        "designer_samples",
                        *(f"{c}_mean" for c in COMPONENTS),
                    )
                }
            )
    _write_metrics(cfg, summary)
    plots = plot_run(cfg)
    report_round(cfg.run_dir, cfg.name, cfg.loop.report_to, summary, plots)
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
    """PNGs under RUN/plots/, redrawn after every round across all rounds so far:
    validity.png, regret.png, reward.png, success.png, training.png, and skills.png (valid
    rate, win rate and regret per target skill) once designs carry skills."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_metrics(cfg)
    out_dir = cfg.run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    rounds = [r["round"] for r in rows]
    paths = []

    def new(title: str, ylabel: str, xlabel: str = "round") -> tuple[Any, Any]:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        return fig, ax

    def legend(ax: Any, **kw: Any) -> None:
        # Only over labelled artists: matplotlib warns on stderr when there are none.
        if ax.get_legend_handles_labels()[0]:
            ax.legend(**kw)

    def save(fig: Any, name: str) -> None:
        for ax in fig.axes:
            if ax.get_xlabel() == "round" and rounds:
                ax.set_xticks(rounds)
                ax.set_xlim(min(rounds) - 0.7, max(rounds) + 0.7)
        fig.tight_layout()
        path = out_dir / name
        tmp = out_dir / f".{name}.partial.png"
        fig.savefig(tmp, dpi=90)
        plt.close(fig)
        tmp.replace(path)
        paths.append(path)

    # Verdicts per round, stacked; the valid rate written above each bar.
    fig, ax = new("designs by validation verdict", "designs")
    reasons = sorted({k for r in rows for k in r.get("reasons", {})}, key=lambda k: (k != "ok", k))
    bottom = [0] * len(rows)
    for reason in reasons:
        vals = [r.get("reasons", {}).get(reason, 0) for r in rows]
        ax.bar(rounds, vals, bottom=bottom, label="valid" if reason == "ok" else reason, width=0.6)
        bottom = [x + y for x, y in zip(bottom, vals, strict=True)]
    for x, top, r in zip(rounds, bottom, rows, strict=True):
        if r.get("valid_rate") is not None:
            ax.annotate(
                f"{r['valid_rate']:.0%} valid", (x, top), ha="center", va="bottom", fontsize=8
            )
    legend(ax, fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    save(fig, "validity.png")

    # Regret of every environment played, per round: box plus the points themselves.
    fig, ax = new("regret per environment played", "regret")
    data = [r.get("regrets") or [] for r in rows]
    if any(data):
        ax.boxplot([d or [float("nan")] for d in data], positions=rounds, widths=0.5)
        for x, d in zip(rounds, data, strict=True):
            ax.scatter([x] * len(d), d, s=12, alpha=0.6, color="tab:blue")
    ax.axhline(0, color="grey", lw=0.5)
    save(fig, "regret.png")

    # The designer reward and its components, round means.
    fig, ax = new("designer reward and its components (round means)", "value")
    for key, label in (
        ("designer_reward_mean", "reward"),
        *((f"{k}_mean", k.replace("_", " ")) for k in COMPONENTS),
    ):
        vals = [r.get(key) for r in rows]
        if any(v is not None for v in vals):
            ax.plot(
                rounds, [float("nan") if v is None else v for v in vals], marker="o", label=label
            )
    ax.axhline(0, color="grey", lw=0.5)
    legend(ax, fontsize=7)
    save(fig, "reward.png")

    # Success with and without the hint, side by side per round.
    fig, ax = new("agent success rate", "success rate")
    w = 0.35
    for dx, key, label in (
        (-w / 2, "success_nohint", "no hint"),
        (w / 2, "success_hint", "with hint"),
    ):
        bars = ax.bar([x + dx for x in rounds], [r.get(key) or 0 for r in rows], w, label=label)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_ylim(0, 1.05)
    legend(ax, fontsize=8)
    save(fig, "success.png")

    # Training loss over the optimizer steps of all rounds, one colour per round.
    fig, ax = new("training loss", "loss", xlabel="optimizer step (all rounds)")
    step = 0
    for r in rows:
        # A round of several agent steps: every step's optimizer steps, in order.
        losses = (
            [x for s in r["steps"] for x in s.get("train_losses") or []]
            if r.get("steps")
            else r.get("train_losses") or []
        )
        if losses:
            ax.plot(
                range(step, step + len(losses)), losses, marker=".", label=f"round {r['round']}"
            )
        step += len(losses)
    legend(ax, fontsize=7)
    if not step:
        ax.text(
            0.5,
            0.5,
            "no optimizer steps yet\n(no group had a reward spread)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="grey",
        )
    save(fig, "training.png")

    skills = sorted({k for r in rows for k in r.get("skills") or {}})
    if skills:
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        for ax, key, label in zip(
            axes,
            ("valid_rate", "win_rate", "regret_mean"),
            ("valid rate", "no-hint win rate", "mean regret"),
            strict=True,
        ):
            ax.set(title=f"{label} per skill", xlabel="round", ylabel=label)
            for skill in skills:
                pts = [(r["round"], (r.get("skills") or {}).get(skill, {}).get(key)) for r in rows]
                pts = [(x, y) for x, y in pts if y is not None]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=skill)
        legend(axes[-1], fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
        save(fig, "skills.png")
    return paths


def step_line(step: dict[str, Any]) -> str:
    """One agent or designer step of a round, for stderr."""

    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else fmt.format(v)

    plays = (
        f"{step['episodes']} no-hint plays, win rate {f(step.get('win_rate'), '{:.3f}')}, "
        if step["role"] == "agent"
        else ""
    )
    return (
        f"{plays}{f(step.get('train_steps'), '{}')} optimizer steps, loss "
        f"{f(step.get('train_loss_last'), '{:.4f}')}, {step.get('seconds', 0):.1f} s"
    )


def table(rows: list[dict[str, Any]]) -> str:
    """A short fixed-width table of the run so far, for stderr."""
    cols = [
        ("round", "round", "{}"),
        ("designs", "designs", "{}"),
        ("valid", "valid_rate", "{:.2f}"),
        ("multiturn", "multi_turn_rate", "{:.2f}"),
        ("regret", "regret_mean", "{:+.3f}"),
        ("succ", "success_nohint", "{:.2f}"),
        ("succ+hint", "success_hint", "{:.2f}"),
        ("loss", "train_loss_last", "{:.4f}"),
    ]
    lines = ["  ".join(f"{h:>9}" for h, _, _ in cols)]
    for r in rows:
        cells = []
        for _, key, fmt in cols:
            v = r.get(key)
            cells.append(f"{(fmt.format(v) if v is not None else '-'):>9}")
        lines.append("  ".join(cells))
    return "\n".join(lines)
