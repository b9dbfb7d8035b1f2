"""An episode's return from its per-step rewards: `final` (published) or `sum`.

`final`: the last step's reward if the episode terminated (the environment said it is
over), else 0, clipped to [-1, 1]. Per-step rewards may shape play, but an episode cut
off by the turn limit, the context or an error earns nothing. `sum`: the total of all
step rewards, unclipped. Both are recorded on every episode (`return_final`,
`return_sum`) so a reward can be recomputed either way; `return` is the chosen one.
"""

from __future__ import annotations

RETURNS = ("final", "sum")


def final_return(rewards: list[float], stop: str | None) -> float:
    if stop != "terminated" or not rewards:
        return 0.0
    return min(1.0, max(-1.0, float(rewards[-1])))


def sum_return(rewards: list[float]) -> float:
    return float(sum(rewards))


def episode_returns(turns: list[dict], stop: str | None, mode: str) -> dict:
    """{"return", "return_final", "return_sum"} of an episode's turns."""
    if mode not in RETURNS:
        raise ValueError(f"return must be one of {', '.join(RETURNS)}, got {mode!r}")
    rewards = [float(t.get("reward") or 0.0) for t in turns]
    final, total = final_return(rewards, stop), sum_return(rewards)
    return {
        "return": final if mode == "final" else total,
        "return_final": final,
        "return_sum": total,
    }
