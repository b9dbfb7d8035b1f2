"""AdamW's moments carried from one spade-train run to the next (`--optimizer-state carry`).

Each run of spade-train is a new trainer, so by default it starts a fresh AdamW: its
first steps, with bias correction on empty moments, move every weight by about the
learning rate whichever way the batch's noise points. The published trainer is one
long-lived process whose optimizer keeps its moments for the whole run. Under `carry`
a run saves its optimizer's state beside the checkpoint it writes (`optimizer.pt`) and
the next run, started from that checkpoint, resumes it; the learning rate and weight
decay are always this run's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import DataError

FILE = "optimizer.pt"
MODES = ("fresh", "carry")


def saved_in(model_dir: str | Path) -> Path | None:
    """The optimizer state a checkpoint directory carries, if any."""
    path = Path(model_dir) / FILE
    return path if path.is_file() else None


def save(optimizer: Any, out_dir: str | Path) -> None:
    import torch

    torch.save(optimizer.state_dict(), Path(out_dir) / FILE)


def load(optimizer: Any, path: str | Path) -> None:
    """Resume `optimizer` from `path`, keeping this run's hyperparameters (lr, weight
    decay, betas); a state saved for other parameters is bad input."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        saved_groups, moments = state["param_groups"], state["state"]
    except Exception as e:  # noqa: BLE001 - a torn or foreign file raises many types
        raise DataError(f"not an optimizer state: {type(e).__name__}: {e}", str(path)) from None
    groups = optimizer.param_groups
    sizes = [len(g["params"]) for g in groups]
    if [len(g["params"]) for g in saved_groups] != sizes:
        raise DataError(
            f"optimizer state for other parameters (groups of {[len(g['params']) for g in saved_groups]}"
            f" parameters, this model has {sizes}); delete it to start a fresh optimizer",
            str(path),
        )
    for saved, group in zip(saved_groups, groups, strict=True):
        for index, param in zip(saved["params"], group["params"], strict=True):
            avg = moments.get(index, {}).get("exp_avg")
            if avg is not None and tuple(avg.shape) != tuple(param.shape):
                raise DataError(
                    f"optimizer state for other parameters (a moment of shape {tuple(avg.shape)}"
                    f" where this model has {tuple(param.shape)}); delete it to start fresh",
                    str(path),
                )
    own = [{k: v for k, v in g.items() if k != "params"} for g in groups]
    optimizer.load_state_dict(state)
    for group, settings in zip(optimizer.param_groups, own, strict=True):
        # Also drop what the last run's scheduler added (initial_lr): ours sets its own.
        params = group["params"]
        group.clear()
        group.update(settings, params=params)
