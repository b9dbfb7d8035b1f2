"""The spade-loop run configuration: one TOML file, every field with a default.

A table per stage, and each table is that stage's settings class (`stage_settings.py`,
`engines.settings`, `sandbox.settings`): the same declarations give the commands their
flags, so a field here and the flag of the command it configures cannot disagree (the
config table of docs/commands/spade-loop.md and `spade-loop --show-config` print them).
Unknown tables or fields, and values of the wrong type or out of bounds, are errors that
name the field. `extra_args` in any stage table passes raw flags through to that stage's
command, for options the config does not model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .. import declare as st
from ..declare import option, read_toml
from ..engines.settings import EngineSettings
from ..errors import UsageError
from ..sandbox.settings import SandboxSettings
from ..stage_settings import (
    DesignSettings,
    EvalSettings,
    HintSettings,
    RegretSettings,
    RolloutSettings,
    SampleDocsSettings,
    TrainSettings,
    ValidateSettings,
)
from .trackers import TRACKERS, check_trackers


@dataclass
class BaselineSettings:
    TABLE: ClassVar[str] = "baseline"

    mode: str = option(
        "spade",
        cli=False,
        choices=("spade", "fixed-pool"),
        help="""spade (designer
        writes environments) or fixed-pool (no designer: the agent trains on a fixed pool of
        environments).""",
    )
    pool: str = option(
        "library",
        cli=False,
        help="""Fixed pool for mode = fixed-pool: "library"
        (the example environments), "micro" (the micro world's families at every level),
        "reasoning-gym" or "reasoning-gym:fam1,fam2" (its task
        families as environments; needs the eval extra), or a candidates file.""",
    )
    pool_size: int = option(
        8, cli=False, min=1, help="Environments drawn from the pool each round."
    )
    # spade-memory pool --by's choices (memory.POOL_DRAWS), spelt out: importing the memory
    # package here would cost every command that reads a config 40 ms.
    pool_draw: str = option(
        "uniform",
        cli=False,
        choices=("uniform", "reward"),
        help="""How mode =
        fixed-pool picks the round's pool_size environments: uniform (at random) or reward
        (every pool environment is played, both conditions, and the agent trains on the
        pool_size with the highest designer reward under the current agent, the skills in
        turn: the choice a designer that maximised its reward over the pool would make;
        spade-memory pool --by reward).""",
    )


@dataclass
class LoopSettings:
    TABLE: ClassVar[str] = "loop"

    agent_steps: int = option(
        1,
        cli=False,
        min=1,
        help="""Agent GRPO steps per round, on the same
        environments (published: 4 for games, 8 for tool use). Step 1 plays with and without
        hints (the regret) and trains the agent; each further step re-plays the environments
        without hints on the previous step's checkpoint and trains the agent again; then the
        designer trains once, its win rate over all the round's no-hint plays. 1: one update
        on both roles' samples.""",
    )
    world: str = option(
        "spade",
        cli=False,
        choices=("spade", "micro"),
        help="""spade: the example
        library is the first memory and, without a model path, the tiny random model is built;
        micro: the micro world (spade_cli/micro/): the micro library is the first memory and
        the fixed pool, and the pretrained micro model (spade-init-model --kind micro, cached)
        is the base model.""",
    )
    replayed_designs: str = option(
        "round",
        cli=False,
        choices=("round", "first-round"),
        help="""The valid designs
        the agent's steps rehearse under train.design_replay: round (the round's own, those
        the step trains on) or first-round (round 1's, which the starting model wrote before
        any training: the designer's format without the trained model's choices).""",
    )
    report_to: list[str] = option(
        cli=False,
        factory=list,
        choices=TRACKERS,
        help="""Experiment
        trackers that get every round's metrics and plots, beside RUN/metrics.jsonl (which stays
        the source of truth): any of "wandb" (RUN/wandb/; WANDB_MODE=offline keeps it local),
        "tensorboard" (RUN/tensorboard/) and "trackio" (its local store, project "spade"). The
        packages are the `trackers` extra.""",
    )


STAGE_TABLES: dict[str, type] = {
    "loop": LoopSettings,
    "model": EngineSettings,
    "corpus": SampleDocsSettings,
    "design": DesignSettings,
    "validate": ValidateSettings,
    "hint": HintSettings,
    "rollout": RolloutSettings,
    "regret": RegretSettings,
    "train": TrainSettings,
    "baseline": BaselineSettings,
    "eval": EvalSettings,
    "sandbox": SandboxSettings,
}


@dataclass
class LoopConfig:
    name: str = "demo"
    """Run name: outputs go to RUNS_DIR/NAME/round-NNN/."""
    runs_dir: str = "runs"
    """Directory holding all runs."""
    rounds: int = 1
    """Rounds to run; rerunning with more rounds extends a finished run."""
    seed: int = 0
    """Master seed; round r's stages get seed * 1000 + r."""
    loop: LoopSettings = field(default_factory=LoopSettings)
    model: EngineSettings = field(default_factory=EngineSettings)
    corpus: SampleDocsSettings = field(default_factory=SampleDocsSettings)
    design: DesignSettings = field(default_factory=DesignSettings)
    validate: ValidateSettings = field(default_factory=ValidateSettings)
    hint: HintSettings = field(default_factory=HintSettings)
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    regret: RegretSettings = field(default_factory=RegretSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    baseline: BaselineSettings = field(default_factory=BaselineSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    extra_args: dict[str, list[str]] = field(default_factory=dict)
    """Raw extra flags per stage table (`extra_args = [...]` in that table)."""

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name


TOP = {"name": str, "runs_dir": str, "rounds": int, "seed": int}


def load_config(path: str | None, overrides: dict[str, Any] | None = None) -> LoopConfig:
    data: dict[str, Any] = {}
    source = path or "<defaults>"
    if path:
        data = read_toml(path)
    data.update(overrides or {})
    kwargs: dict[str, Any] = {}
    extra: dict[str, list[str]] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in TOP:
            try:
                kwargs[name] = st.coerce(repr(key), value, TOP[name])
            except UsageError as e:
                raise UsageError(f"{st.at(source, key)}: {e}") from None
        elif name in STAGE_TABLES:
            if not isinstance(value, dict):
                raise UsageError(f"{source}: {key!r} must be a table")
            table = dict(value)
            if "extra_args" in table:
                extra[name] = st.coerce(
                    f"{source}: '{key}.extra_args'", table.pop("extra_args"), list[str]
                )
            kwargs[name] = st.from_table(STAGE_TABLES[name], table, source, f"{key}.")
        else:
            raise UsageError(
                f"{st.at(source, key)}: unknown field {key!r}"
                + st.did_you_mean(name, [*TOP, *STAGE_TABLES])
            )
    cfg = LoopConfig(**kwargs, extra_args=extra)
    if cfg.train.designer_interval is None:
        # The balance scale's regeneration interval is the window the loop runs: the
        # published min(50, agent / designer samples x interval).
        train = dataclasses.replace(cfg.train, designer_interval=cfg.loop.agent_steps)
        cfg = dataclasses.replace(cfg, train=train)
    check_trackers(cfg.loop.report_to)
    if cfg.rounds < 1:
        raise UsageError(f"{source}: 'rounds' must be at least 1, got {cfg.rounds}")
    if cfg.loop.agent_steps > 1 and not (cfg.train.enabled and cfg.train.role in ("agent", "both")):
        raise UsageError(
            f"{source}: 'loop.agent_steps' above 1 needs [train] enabled with role "
            f"agent or both (the steps are agent updates)"
        )
    if cfg.loop.replayed_designs != "round" and cfg.train.design_replay <= 0:
        raise UsageError(
            f"{source}: 'loop.replayed_designs' chooses what train.design_replay rehearses; "
            f"set train.design_replay above 0 (it is off)"
        )
    if cfg.baseline.pool_draw != "uniform" and cfg.baseline.mode != "fixed-pool":
        raise UsageError(
            f"{source}: 'baseline.pool_draw' picks from the fixed pool; set baseline.mode = "
            f'"fixed-pool" (it is {cfg.baseline.mode!r})'
        )
    if cfg.train.optimizer == "sgd" and (
        cfg.train.weight_decay > 0 or cfg.train.optimizer_state == "carry"
    ):
        raise UsageError(
            f'{source}: train.optimizer = "sgd" takes no weight_decay (SGD\'s is an L2 term '
            f"at its learning rate) and no carried optimizer_state (that is AdamW's)"
        )
    own_step = (
        cfg.train.designer_learning_rate,
        cfg.train.designer_epochs,
        cfg.train.designer_beta,
    )
    if any(v is not None for v in own_step) and cfg.loop.agent_steps == 1:
        raise UsageError(
            f"{source}: 'train.designer_learning_rate', 'train.designer_epochs' and "
            f"'train.designer_beta' need loop.agent_steps above 1 (with one step both roles "
            f"train in one optimizer)"
        )
    if cfg.train.designer_beta and cfg.train.lora_r > 0:
        raise UsageError(
            f"{source}: 'train.designer_beta' anchors the designer to the starting model, "
            f"which LoRA cannot load as a reference (its reference is the adapter turned off)"
        )
    return cfg


def to_dict(cfg: LoopConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def describe_fields() -> list[tuple[str, str, str]]:
    """(field, default, documentation) rows for the docs and `spade-loop --show-config`."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(LoopConfig))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {
        a.target.id: " ".join(str(b.value.value).split())  # type: ignore[union-attr]
        for a, b in zip(body, body[1:], strict=False)
        if isinstance(a, ast.AnnAssign)
        and isinstance(b, ast.Expr)
        and isinstance(b.value, ast.Constant)
    }
    cfg = LoopConfig()
    rows = [(name, repr(getattr(cfg, name)), docs.get(name, "")) for name in TOP]
    for table in STAGE_TABLES:
        rows += list(st.rows(getattr(cfg, table), f"{table}."))
        if table not in ("baseline", "loop"):
            rows.append(
                (f"{table}.extra_args", "[]", "Raw extra flags passed to this stage's command.")
            )
    return rows
