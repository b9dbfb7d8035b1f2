"""The summary of a batch of scores: counts, rates and regret quantiles, for stderr and
spade-regret's --summary-json."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any


def quantiles(values: list[float], qs: Iterable[float] = (0.0, 0.1, 0.5, 0.9, 1.0)) -> list[float]:
    """Linear-interpolation quantiles (numpy's default), without numpy."""
    v = sorted(values)
    out = []
    for q in qs:
        pos = q * (len(v) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(v) - 1)
        out.append(v[lo] + (v[hi] - v[lo]) * (pos - lo))
    return out


def summarize(scores: list[dict]) -> dict:
    """Counts and distributions of a batch of scores (for stderr and --summary-json)."""
    n = len(scores)
    valid = [s for s in scores if s["valid"]]
    reasons = Counter(s["reason"] for s in scores if s["reason"] != "ok")
    regrets = [s["regret"] for s in valid if s["regret"] is not None]
    rewards = [s["reward"] for s in scores if s["reward"] is not None]

    def rate(cond: str) -> float | None:
        eps = [
            (s[cond]["success_rate"], s[cond]["n"]) for s in valid if s.get(cond) and s[cond]["n"]
        ]
        total = sum(k for _, k in eps)
        return sum(p * k for p, k in eps) / total if total else None

    out: dict[str, Any] = {
        "candidates": n,
        "valid": len(valid),
        "valid_rate": len(valid) / n if n else None,
        "accepted": sum(bool(s["accepted"]) for s in scores),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "success_nohint": rate("nohint"),
        "success_hint": rate("hint"),
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "dropped": sum(1 for s in scores if s.get("sample") is False),
    }
    if regrets:
        q = quantiles(regrets)
        out["regret"] = {
            "n": len(regrets),
            "mean": sum(regrets) / len(regrets),
            "min": q[0],
            "p10": q[1],
            "median": q[2],
            "p90": q[3],
            "max": q[4],
        }
    return out


def summary_lines(s: dict, estimator: str) -> list[str]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    lines = [
        f"{s['candidates']} candidates, {s['valid']} valid ({pct(s['valid_rate'])}), "
        f"{s['accepted']} accepted into memory"
    ]
    if s["reasons"]:
        lines.append("not accepted: " + ", ".join(f"{k} {v}" for k, v in s["reasons"].items()))
    if "regret" in s:
        r = s["regret"]
        lines.append(
            f"regret ({estimator}) over {r['n']}: mean {r['mean']:.3f}  min {r['min']:.3f}  "
            f"p10 {r['p10']:.3f}  median {r['median']:.3f}  p90 {r['p90']:.3f}  max {r['max']:.3f}"
        )
    lines.append(
        f"success without hint {pct(s['success_nohint'])}, with hint {pct(s['success_hint'])}"
    )
    if s["reward_mean"] is not None:
        lines.append(f"designer reward mean {s['reward_mean']:.3f}")
    return lines
