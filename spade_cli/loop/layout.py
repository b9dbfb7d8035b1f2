"""The layout of a run directory: where round r keeps its files, which model it plays,
a `Stage` (a command with the files it reads and leaves), and `Round`, the bookkeeping of
finished stages in `round-NNN/manifest.json`.

The recipe (recipe.py) names each stage's outputs, the runner (runner.py) records
finished stages in the manifest, and the report (report.py) reads the files back: a file
name more than one of them uses is written here, once. This module imports none of them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..recordio import atomic_write_bytes
from .config import LoopConfig

SCORED = "scored.jsonl.zst"
"""The regret stage's output: the round's candidates with their scores."""
SCORED_WINDOW = "scored-window.jsonl.zst"
"""With several agent steps, the designer's rewards over the window's no-hint plays."""
PICKED = "picked.jsonl.zst"
"""With baseline.pool_draw = reward, the pool environments the agent trains on."""
MEMORY = "memory.jsonl.zst"
"""The environment memory after the round."""


def checkpoint_record(tag: str = "") -> str:
    """The one-line record a train stage writes: the checkpoint's path and format
    (`tag` "-sS" for agent step S of a multi-step round, "" for the round's own)."""
    return f"checkpoint{tag}.jsonl"


def train_metrics_file(tag: str = "") -> str:
    return f"train-metrics{tag}.jsonl"


def step_rollouts(s: int) -> str:
    """The no-hint re-plays of agent step s > 1."""
    return f"rollouts-s{s}.jsonl.zst"


def round_dir(cfg: LoopConfig, r: int) -> Path:
    return cfg.run_dir / f"round-{r:03d}"


def uses_memory(cfg: LoopConfig) -> bool:
    return not (cfg.design.no_memory and cfg.rollout.replay == 0)


def first_memory(cfg: LoopConfig) -> Path:
    return cfg.run_dir / "memory-000.jsonl.zst"


def memory_in(cfg: LoopConfig, r: int) -> Path | None:
    """The memory round r reads: the example library at first, then each round's update."""
    if not uses_memory(cfg):
        return None
    return first_memory(cfg) if r == 1 else round_dir(cfg, r - 1) / MEMORY


def base_model(cfg: LoopConfig) -> str:
    return cfg.model.path or str(
        cfg.run_dir / ("micro-model" if cfg.loop.world == "micro" else "tiny-model")
    )


class Shell(str):
    """An argument printed as shell text, unquoted (a substitution the loop resolves
    itself before running)."""


def model_of(cfg: LoopConfig, r: int) -> str:
    """The model of round r: the checkpoint round r-1's train stage recorded (its path is
    the unchanged model when that round had nothing to learn from)."""
    if r == 1 or not cfg.train.enabled:
        return base_model(cfg)
    return checkpoint_model(round_dir(cfg, r - 1) / checkpoint_record())


def checkpoint_model(rec: Path) -> str:
    """The model a train stage's checkpoint record names; before that stage has run, the
    shell substitution that reads it (printed scripts), which the loop resolves itself
    once the record exists (it rebuilds the stages before each one runs)."""
    if rec.exists():
        return str(orjson.loads(rec.read_bytes().splitlines()[0]).get("path"))
    return Shell(f'"$(jq -r .path {shlex.quote(str(rec))})"')


def _quote(arg: str) -> str:
    return arg if isinstance(arg, Shell) else shlex.quote(arg)


def shell_line(argv: list[str]) -> str:
    return " ".join(["spade-" + argv[0], *(_quote(a) for a in argv[1:])])


@dataclass
class Stage:
    name: str
    cmd: str
    """The spade command without its `spade-` prefix."""
    inputs: list[str] = field(default_factory=list)
    """Positional record inputs."""
    args: list[str] = field(default_factory=list)
    output: Path | None = None
    """Written with -o."""
    outputs: list[Path] = field(default_factory=list)
    """Everything the stage leaves behind (output first); a stage is done when all exist."""
    copy: tuple[Path, Path] | None = None
    """Copied before the stage runs (the memory the regret stage updates in place)."""
    shardable: bool = False
    """A map stage: may run as --shard i/n jobs whose outputs `spade-cat --order-like`
    merges in the order of `order_inputs`."""
    order_inputs: list[str] = field(default_factory=list)
    keep: bool = False
    """Its output stays a file even in a pipe (the round's summary reads it)."""

    def argv(
        self, inputs: list[str] | None = None, output: str | None = None, shard: str | None = None
    ) -> list[str]:
        """The command line (without `spade-`), e.g. with other inputs for a pipe or
        another output for a shard."""
        out = output if output is not None else (str(self.output) if self.output else None)
        argv = [self.cmd, *(self.inputs if inputs is None else inputs), *self.args]
        if shard is not None:
            argv += ["--shard", shard]
        return argv + (["-o", out] if out is not None else [])


class Round:
    """Round `r`'s directory and its bookkeeping in `round-NNN/manifest.json`: which
    stages are done, in how many seconds, by which command line."""

    def __init__(self, cfg: LoopConfig, r: int):
        self.cfg, self.r = cfg, r
        self.model = model_of(cfg, r)
        self.dir = round_dir(cfg, r)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.dir / "manifest.json"
        self.manifest: dict[str, Any] = {"round": r, "model": self.model, "stages": {}}
        if self.manifest_path.exists():
            old = orjson.loads(self.manifest_path.read_bytes())
            if old.get("model") == self.model:
                self.manifest = old

    def path(self, name: str) -> Path:
        return self.dir / name

    def done(self, stage: Stage) -> bool:
        info = self.manifest["stages"].get(stage.name)
        return bool(
            info and info.get("status") == "done" and all(p.exists() for p in stage.outputs)
        )

    def mark_done(self, stage: Stage, seconds: float) -> None:
        # A fresh read: under Slurm, jobs of other stages may have written it meanwhile.
        if self.manifest_path.exists():
            old = orjson.loads(self.manifest_path.read_bytes())
            if old.get("model") == self.model:
                self.manifest["stages"] = {**old.get("stages", {}), **self.manifest["stages"]}
        self.manifest["stages"][stage.name] = {
            "status": "done",
            "seconds": round(seconds, 3),
            "argv": shell_line(stage.argv()),
            "outputs": [p.name for p in stage.outputs],
        }
        atomic_write_bytes(
            str(self.manifest_path), orjson.dumps(self.manifest, option=orjson.OPT_INDENT_2)
        )
