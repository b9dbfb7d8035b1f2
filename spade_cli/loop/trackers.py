"""Round metrics and plots to experiment trackers: `[loop] report_to = ["wandb",
"tensorboard", "trackio"]`.

RUN/metrics.jsonl stays the source of truth; trackers get a copy after each round: every
numeric field of the round record (nested tables flattened as `stage_seconds/design`,
`skills/<skill>/valid_rate`, ...) at step = the round number, and every PNG of RUN/plots
as an image. Where each one writes:

    tensorboard  RUN/tensorboard/ (torch's SummaryWriter; `tensorboard --logdir RUN/tensorboard`)
    trackio      trackio's local store ($TRACKIO_DIR, else ~/.cache/huggingface/trackio),
                 project "spade", run = the run's name (`trackio show --project spade`)
    wandb        RUN/wandb/, project $WANDB_PROJECT or "spade", one run per spade run
                 (resumed by id); WANDB_MODE=offline keeps it local (`wandb sync` later)

A round goes to each tracker once: RUN/trackers.json lists the rounds each has been
given, so a resumed or rerun loop does not log a round twice. A tracker whose package is
missing is a resource error (exit 4) before the first round runs (`check_trackers`).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ResourceError

TRACKERS = ("wandb", "tensorboard", "trackio")
PROJECT = "spade"
_PACKAGES = {"wandb": "wandb", "tensorboard": "tensorboard", "trackio": "trackio"}


def check_trackers(names: list[str]) -> None:
    import importlib.util

    missing = [n for n in names if importlib.util.find_spec(_PACKAGES[n]) is None]
    if missing:
        raise ResourceError(
            f"[loop] report_to names {', '.join(missing)}, which is not installed "
            f"(pip install -e '.[trackers]')"
        )


def flat_metrics(summary: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a round record, keyed by their path."""
    out: dict[str, float] = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value)
        elif isinstance(value, dict):
            out.update(flat_metrics(value, f"{name}/"))
    out.pop("v", None)
    return out


def _tensorboard(
    run_dir: Path, step: int, metrics: dict[str, float], plots: list[Path], _name: str
) -> None:
    import matplotlib.image
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(log_dir=str(run_dir / "tensorboard")) as w:
        for k, v in metrics.items():
            w.add_scalar(k, v, global_step=step)
        for p in plots:
            img = matplotlib.image.imread(str(p))[..., :3]
            w.add_image(f"plots/{p.stem}", img, global_step=step, dataformats="HWC")


def _trackio(
    run_dir: Path, step: int, metrics: dict[str, float], plots: list[Path], name: str
) -> None:
    import trackio

    trackio.init(project=PROJECT, name=name, resume="allow", embed=False)
    try:
        trackio.log(
            {**metrics, **{f"plots/{p.stem}": trackio.Image(str(p)) for p in plots}}, step=step
        )
    finally:
        trackio.finish()


def _wandb(
    run_dir: Path, step: int, metrics: dict[str, float], plots: list[Path], name: str
) -> None:
    import os

    import wandb

    run_id = re.sub(r"[^A-Za-z0-9_-]", "-", name)[:64]
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT", PROJECT),
        name=name,
        id=run_id,
        resume="allow",
        dir=str(run_dir),
    )
    try:
        run.log({**metrics, **{f"plots/{p.stem}": wandb.Image(str(p)) for p in plots}}, step=step)
    finally:
        run.finish()


WRITERS: dict[str, Callable[..., None]] = {
    "tensorboard": _tensorboard,
    "trackio": _trackio,
    "wandb": _wandb,
}


def report_round(
    run_dir: Path, name: str, trackers: list[str], summary: dict[str, Any], plots: list[Path]
) -> None:
    """Give round `summary["round"]` (its metrics and `plots`) to each tracker that has
    not had it yet."""
    from ..recordio import atomic_write_bytes

    if not trackers:
        return
    ledger_path = run_dir / "trackers.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    step = int(summary["round"])
    metrics = flat_metrics(summary)
    for tracker in trackers:
        done = ledger.setdefault(tracker, [])
        if step in done:
            continue
        # What trackers print ("* Trackio metrics logged to ...") is for humans: stdout
        # carries spade-loop's round records.
        with contextlib.redirect_stdout(sys.stderr):
            WRITERS[tracker](run_dir, step, metrics, plots, name)
        done.append(step)
        atomic_write_bytes(str(ledger_path), (json.dumps(ledger, indent=1) + "\n").encode())
