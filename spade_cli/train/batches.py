"""How a training run's groups become optimizer steps: the batch plan TRL is given.

TRL's GRPOTrainer normalises rewards over a generation batch and steps the optimizer
every per-device x processes x grad-accum rows; this module picks those numbers for the
stored groups of one `spade-train` run, or says in one line why none fit.
"""

from __future__ import annotations

import math

from ..errors import DataError, UsageError
from .config import TrainJob
from .samples import Sample


def plan_batches(cfg: TrainJob, groups: list[list[Sample]], num_processes: int) -> dict[str, int]:
    """Group size G, per-device batch, generation batch and optimizer steps, or a clear error.

    TRL needs every generation batch (the rows whose rewards are normalised together) to
    hold whole groups. One optimizer step holds per-device x processes x grad-accum rows,
    where --whole-batch makes grad-accum the most micro-steps that hold whole groups; when
    that is not a multiple of G, a generation batch spans the fewest optimizer steps
    that make it one (TRL then recomputes the old logprobs for the later steps, as it does
    for any batch reused across steps)."""
    g = cfg.group_size or max(len(x) for x in groups)
    if g < 2:
        raise UsageError("--group-size must be at least 2")
    too_big = [len(x) for x in groups if len(x) > g]
    if too_big:
        raise DataError(
            f"{len(too_big)} groups have more than --group-size {g} samples (largest {max(too_big)})"
        )
    per_device = cfg.per_device_batch_size or g
    if per_device < 1:
        raise UsageError("--per-device-batch-size must be at least 1")
    accum = cfg.grad_accum
    if cfg.whole_batch:  # the most micro-steps whose rows are whole groups: one step
        most = len(groups) * g // (per_device * num_processes)
        fits = [a for a in range(most, 0, -1) if per_device * num_processes * a % g == 0]
        if not fits:
            raise DataError(
                f"{len(groups)} trainable groups of {g} rows do not fill one step of whole "
                f"groups at --per-device-batch-size {per_device} x {num_processes} processes "
                "(--whole-batch): lower --per-device-batch-size"
            )
        accum = fits[0]
    step_rows = per_device * num_processes * accum
    spans = g // math.gcd(step_rows, g)  # optimizer steps per generation batch
    gen_rows = step_rows * spans
    groups_per_gen = gen_rows // g
    gens = len(groups) // groups_per_gen
    if gens == 0:
        raise DataError(
            f"{len(groups)} trainable groups but one batch of whole groups needs {groups_per_gen} "
            f"({gen_rows} rows of group size {g}): lower --per-device-batch-size or --grad-accum"
        )
    return {
        "group_size": g,
        "per_device": per_device,
        "grad_accum": accum,
        "steps_per_generation": accum * spans,
        "groups_per_step": groups_per_gen,
        "steps": gens * spans * cfg.epochs,
        "left_out_groups": len(groups) - gens * groups_per_gen,
    }
