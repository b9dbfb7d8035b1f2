"""Run rounds of the stage commands, resumably.

Each stage is the same command a user would type (`python -m spade_cli <stage> ...`), so
`spade-loop` and the `bin/` pipeline produce the same records; it runs in a process of
its own, forked from the loop or started fresh (stage_process.py). A stage's output is
written atomically by the stage itself; the round's `manifest.json` records each finished
stage (written atomically after it). A rerun skips every stage the manifest marks done
whose outputs exist, so a loop killed at any moment, SIGKILL included, continues from the
last completed stage. Stages are deterministic given the seed, so the resumed run equals
an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ..errors import SpadeError, UsageError
from ..logs import log, progress_bar, verbosity_args
from ..recordio import atomic_write_bytes, remove_dead_partials
from ..records import parse_shard
from .config import LoopConfig, to_dict
from .layout import Round, Shell, Stage, shell_line
from .recipe import round_stages
from .relocate import LOCATION, settle
from .report import round_summary
from .stage_process import keep_single_threaded, run_command


def run_in(rnd: Round, stage: Stage, shard: str | None = None, worker: bool = False) -> float:
    """Run a stage of round `rnd` (or one shard of it); a `worker` (a train node of
    rank > 0) writes no output of its own, so nothing is checked or recorded."""
    if shard is None and not worker and rnd.done(stage):
        log.debug("round %d: %s already done", rnd.r, stage.name)
        return 0.0
    if stage.copy is not None:
        _copy_atomic(*stage.copy)
    output = shard_output(stage, shard) if shard else None
    for path in [Path(output)] if output else stage.outputs:
        remove_dead_partials(path)  # a killed earlier try's leftovers
    argv = stage.argv(output=output, shard=shard)
    if any(isinstance(a, Shell) for a in argv):
        raise UsageError(
            f"round {rnd.r}: stage {stage.name} reads a checkpoint record that "
            f"does not exist yet ({next(a for a in argv if isinstance(a, Shell))}); "
            f"run the stages before it first"
        )
    log.info("round %d: %s", rnd.r, shell_line(argv))
    t = time.perf_counter()
    returncode = run_command([*argv, *verbosity_args()])
    seconds = time.perf_counter() - t
    if returncode != 0:
        err = SpadeError(
            f"round {rnd.r}: stage {stage.name} failed (exit {returncode}); "
            f"its message is above. Rerun to resume from this stage."
        )
        # The loop exits with the stage's own code (3 bad data, 4 missing resource...).
        err.exit_code = returncode if returncode > 0 else 1
        raise err
    if worker:
        return seconds
    outputs = [Path(output)] if output else stage.outputs
    missing = [str(p) for p in outputs if not p.exists()]
    if missing:
        raise SpadeError(f"round {rnd.r}: stage {stage.name} wrote no {', '.join(missing)}")
    for path in outputs:
        # Again: a killed earlier try's stage can outlive the loop for a moment (the
        # kernel kills it when the loop dies), and a done stage is never cleaned again.
        remove_dead_partials(path)
    if shard is None:
        rnd.mark_done(stage, seconds)
    return seconds


def merge_shards(rnd: Round, stage: Stage, shards: int) -> float:
    """Join the outputs of a stage's --shard jobs, in the order of its inputs."""
    t = time.perf_counter()
    parts = [shard_output(stage, f"{i}/{shards}") for i in range(shards)]
    missing = [p for p in parts if not Path(p).exists()]
    if missing:
        raise SpadeError(f"round {rnd.r}: {stage.name} shard outputs missing: {', '.join(missing)}")
    argv = [
        "cat",
        *parts,
        *[a for p in stage.order_inputs for a in ("--order-like", p)],
        "-o",
        str(stage.output),
    ]
    log.info("round %d: %s", rnd.r, shell_line(argv))
    returncode = run_command([*argv, *verbosity_args()], quiet_stdout=False)
    if returncode != 0:
        raise SpadeError(
            f"round {rnd.r}: merging the {stage.name} shards failed (exit {returncode})"
        )
    seconds = time.perf_counter() - t
    rnd.mark_done(stage, seconds)
    return seconds


def shard_output(stage: Stage, shard: str) -> str:
    i, n = shard.split("/")
    out = stage.output
    assert out is not None
    return str(out.with_name(out.name.replace(".jsonl", f".shard-{i}-of-{n}.jsonl")))


def _copy_atomic(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.partial-{os.getpid()}")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def without_newer_defaults(current: dict, old: dict, defaults: dict) -> dict:
    """`current` less the fields an older run's config lacks and that hold their default:
    a field added since the run started, at the default, is the behaviour the run had."""
    out = {}
    for key, value in current.items():
        if key not in old:
            if value != defaults.get(key):
                out[key] = value
        elif isinstance(value, dict) and isinstance(old[key], dict):
            out[key] = without_newer_defaults(value, old[key], defaults.get(key) or {})
        else:
            out[key] = value
    return out


def settings(config: dict) -> dict:
    """A run's config.json less what may change between its invocations: the rounds
    (a finished run is extended) and where the run lies."""
    return {k: v for k, v in config.items() if k not in ("rounds", "runs_dir", "name", LOCATION)}


class Loop:
    def __init__(self, cfg: LoopConfig):
        self.cfg = cfg
        self.run_dir = cfg.run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ run-level state

    def _lock(self) -> Any:
        fh = open(self.run_dir / ".lock", "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{self.run_dir}: another spade-loop is running on this run") from None
        return fh

    def check_config(self) -> None:
        """A run directory belongs to one config: resuming with another is an error. Where
        the run lies is not part of it: a run found elsewhere than it last ran follows its
        move (relocate.py) before anything reads its records."""
        current = {**to_dict(self.cfg), LOCATION: str(self.run_dir.resolve())}
        old = settle(self.run_dir)
        if old is not None:
            frozen = without_newer_defaults(settings(current), old, to_dict(LoopConfig()))
            if settings(old) != frozen:
                raise UsageError(
                    f"{self.run_dir}: holds a run with a different config; use another name "
                    "or delete the directory"
                )
        path = str(self.run_dir / "config.json")
        atomic_write_bytes(path, orjson.dumps(current, option=orjson.OPT_INDENT_2))

    # ------------------------------------------------------------------ driver

    def run(self, on_round: Callable[[Round, dict], None] | None = None) -> list[dict]:
        lock = self._lock()
        try:
            self.check_config()
            keep_single_threaded()
            summaries = []
            total = sum(len(round_stages(self.cfg, r)) for r in range(1, self.cfg.rounds + 1))
            bar = progress_bar("spade-loop", total=total, unit="stage")
            for r in range(1, self.cfg.rounds + 1):
                rnd = Round(self.cfg, r)
                for name in [s.name for s in round_stages(self.cfg, r)]:
                    # Built again before each stage: a later agent step's model is the
                    # checkpoint the step before it has just recorded.
                    stage = next(s for s in round_stages(self.cfg, r) if s.name == name)
                    bar.set_description(f"round {r}/{self.cfg.rounds} {stage.name}")
                    run_in(rnd, stage)
                    bar.update(1)
                summary = round_summary(self.cfg, rnd)
                summaries.append(summary)
                if on_round:
                    on_round(rnd, summary)
            bar.close()
            return summaries
        finally:
            lock.close()


def run_stage(
    cfg: LoopConfig,
    r: int,
    name: str,
    shard: str | None = None,
    merge: int | None = None,
    machine_rank: int | None = None,
    main_process_ip: str | None = None,
) -> None:
    """One stage of round r on its own (a Slurm job): the whole stage, one shard of a map
    stage, or the merge of its shards. Its inputs are the earlier stages' outputs. A
    multi-node train runs this on every node with its rank; rank 0 records the stage."""
    if machine_rank is not None or main_process_ip is not None:
        if name != "train" or cfg.train.num_machines < 2:
            raise UsageError(
                "--machine-rank and --main-process-ip go with --stage train "
                "and train.num_machines > 1"
            )
        cfg = dataclasses.replace(
            cfg,
            train=dataclasses.replace(
                cfg.train,
                machine_rank=machine_rank or 0,
                main_process_ip=main_process_ip or cfg.train.main_process_ip,
            ),
        )
    settle(cfg.run_dir)  # before anything reads a record: the run may have moved
    rnd = Round(cfg, r)
    stages = {s.name: s for s in round_stages(cfg, r)}
    if name not in stages:
        raise UsageError(f"round {r} has no stage {name!r}; it has {', '.join(stages)}")
    stage = stages[name]
    if (shard or merge) and not stage.shardable:
        raise UsageError(f"stage {name} is not a map stage; it cannot be sharded")
    if shard and merge:
        raise UsageError("--shard and --merge exclude each other")
    if r == 1 and name == next(iter(stages)):
        Loop(cfg).check_config()
    if merge:
        merge_shards(rnd, stage, merge)
    elif machine_rank:
        run_in(rnd, stage, worker=True)
        return
    else:
        parse_shard(shard)
        run_in(rnd, stage, shard=shard)
    if name == list(stages)[-1] or (name == "regret" and "train" not in stages):
        round_summary(cfg, rnd)
