"""The spade-loop run configuration: one TOML file, every field with a default.

Sections map to stages; each field's comment is its documentation (README "spade-loop"
prints the same table). Unknown sections or fields, and values of the wrong type, are an
error that names the field. `extra_args` in any stage section passes raw flags through to
that stage's command, for options the config does not model.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cli import read_toml
from ..errors import UsageError


@dataclass
class ModelConfig:
    path: str = ""
    """Model directory (HF format) or hub name. Empty: build the tiny offline model into
    the run directory (`spade-init-model`)."""
    engine: str = "auto"
    """Generation engine: auto, hf, vllm or openai."""
    base_url: str = ""
    """Endpoint of an OpenAI-compatible server (engine = "openai")."""
    tensor_parallel: int = 1
    """vLLM tensor-parallel size."""


@dataclass
class CorpusConfig:
    paths: list[str] = field(default_factory=list)
    """Corpus files, globs or directories. Empty: the bundled demo corpus."""
    docs_per_round: int = 2
    """Documents sampled per round (one GRPO group of designs each)."""
    text_field: str = "text"
    """Field holding the document text in JSONL/Parquet corpora."""
    mix: str = ""
    """Source weights, e.g. "web=0.7,code=0.3" (spade-sample-docs --mix)."""
    excerpt_chars: int = 4000
    """Longer documents are cut to a window of this many characters."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class DesignConfig:
    designs_per_doc: int = 2
    """G: designs sampled per document, the designer's GRPO group."""
    max_tokens: int = 256
    """Token budget of one design."""
    temperature: float = 1.0
    """Designer sampling temperature."""
    top_p: float = 1.0
    """Designer nucleus sampling."""
    no_doc: bool = False
    """Ablation: design without a grounding document."""
    no_memory: bool = False
    """Ablation: design without memory exemplars or listing."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class ValidateConfig:
    seeds: int = 2
    """Seeds each design is checked on."""
    workers: int = 4
    """Designs validated concurrently."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class RolloutConfig:
    episodes: int = 2
    """K: episodes per condition (with and without the hint) per environment."""
    max_turns: int = 4
    """Cap on an environment's own max_turns."""
    max_tokens: int = 48
    """Tokens per agent turn."""
    max_context: int = 2048
    """Context budget of one episode in tokens."""
    temperature: float = 1.0
    """Agent sampling temperature."""
    replay: int = 2
    """Environments replayed from memory into each round's agent episodes."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class RegretConfig:
    estimator: str = "mean-gap"
    """mean-gap, max-gap or learnability (README "spade-regret")."""
    invalid_penalty: float = -1.0
    """Designer reward of an invalid design."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class TrainConfig:
    enabled: bool = True
    """Train at the end of each round; false evaluates a fixed model."""
    role: str = "both"
    """designer, agent or both."""
    learning_rate: float = 1e-5
    """Optimizer learning rate."""
    epochs: int = 1
    """Passes over the round's samples."""
    batch_size: int = 4
    """Samples per device per optimizer step."""
    num_processes: int = 1
    """Processes for `accelerate launch` (GPUs, or CPU processes with gloo)."""
    lora_r: int = 0
    """LoRA rank; 0 trains all weights."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class BaselineConfig:
    mode: str = "spade"
    """spade (designer writes environments) or fixed-pool (no designer: the agent trains
    on a fixed pool of environments)."""
    pool: str = "library"
    """Fixed pool for mode = fixed-pool: "library" (the example library, `library_dir()`), "reasoning-gym" or
    "reasoning-gym:fam1,fam2" (its task families as environments; needs the eval extra),
    or a candidates file."""
    pool_size: int = 8
    """Environments drawn from the pool each round."""


@dataclass
class EvalConfig:
    suites: list[str] = field(default_factory=list)
    """Held-out suites run on each round's checkpoint (spade-eval --suite)."""
    items: int = 4
    """Items per suite."""
    extra_args: list[str] = field(default_factory=list)
    """Raw extra flags passed to this stage's command."""


@dataclass
class SandboxConfig:
    unsafe_no_sandbox: bool = False
    """Run designer code without bubblewrap. Only for machines without bwrap; unsafe."""
    packages: list[str] = field(default_factory=list)
    """Extra installed distributions environments may import in the sandbox."""


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
    model: ModelConfig = field(default_factory=ModelConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    design: DesignConfig = field(default_factory=DesignConfig)
    validate: ValidateConfig = field(default_factory=ValidateConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    regret: RegretConfig = field(default_factory=RegretConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name


CHOICES = {
    "model.engine": ("auto", "hf", "vllm", "openai"),
    "regret.estimator": ("mean-gap", "max-gap", "learnability"),
    "train.role": ("designer", "agent", "both"),
    "baseline.mode": ("spade", "fixed-pool"),
}


def _check_type(where: str, value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise UsageError(f"{where}: expected a list, got {type(value).__name__}")
        return [_check_type(f"{where}[{i}]", v, item) for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool) and (type(value) is not tp):
        raise UsageError(f"{where}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return value


def _build(cls: type, data: dict, where: str, source: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        path = f"{where}{key}"
        if name not in known:
            raise UsageError(f"{source}: unknown field {path!r}")
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise UsageError(f"{source}: {path!r} must be a table")
            kwargs[name] = _build(tp, value, f"{path}.", source)
        else:
            kwargs[name] = _check_type(f"{source}: {path!r}", value, tp)
            allowed = CHOICES.get(path)
            if allowed and kwargs[name] not in allowed:
                raise UsageError(f"{source}: {path!r} must be one of {', '.join(allowed)}, got {value!r}")
    return cls(**kwargs)


def load_config(path: str | None, overrides: dict[str, Any] | None = None) -> LoopConfig:
    data: dict[str, Any] = {}
    source = path or "<defaults>"
    if path:
        data = read_toml(path)
    for key, value in (overrides or {}).items():
        data[key] = value
    cfg = _build(LoopConfig, data, "", source)
    for where, value in (("rounds", cfg.rounds), ("corpus.docs_per_round", cfg.corpus.docs_per_round),
                         ("design.designs_per_doc", cfg.design.designs_per_doc),
                         ("rollout.episodes", cfg.rollout.episodes)):
        if value < 1:
            raise UsageError(f"{source}: {where!r} must be at least 1, got {value}")
    return cfg


def to_dict(cfg: LoopConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def describe_fields() -> list[tuple[str, str, str]]:
    """(field, default, documentation) rows for the README and `spade-loop --show-config`."""
    import ast
    import inspect

    rows: list[tuple[str, str, str]] = []

    def docs_of(cls: type) -> dict[str, str]:
        tree = ast.parse(inspect.getsource(cls))
        body = tree.body[0].body  # type: ignore[attr-defined]
        out: dict[str, str] = {}
        for a, b in zip(body, body[1:], strict=False):
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
                out[a.target.id] = " ".join(str(b.value.value).split())  # type: ignore[union-attr]
        return out

    def walk(cls: type, obj: Any, prefix: str) -> None:
        docs = docs_of(cls)
        for f in dataclasses.fields(cls):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(type(value), value, f"{prefix}{f.name}.")
            else:
                rows.append((f"{prefix}{f.name}", repr(value), docs.get(f.name, "")))

    walk(LoopConfig, LoopConfig(), "")
    return rows
