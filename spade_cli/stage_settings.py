"""Every stage's settings, declared once (see `declare.py` for what a declaration gives).

Each class is one stage: its fields are the options of that stage's command and the
keys of its table in a loop config (`TABLE`). Fields marked `cli=False` exist only in
the loop's config (they shape the round, not the command). Run-time arguments that the
loop sets per round (inputs, outputs, --seed, --round, --memory, --shard) are not
settings: each command declares those itself. Shared groups live with their packages:
`engines.settings.EngineSettings` (`[model]`), `engines.Sampling` (nested in each
generating stage with its own defaults), `sandbox.settings.SandboxSettings` (`[sandbox]`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .declare import group, option
from .engines.base import Sampling
from .envs.contracts import ACTION_FORMATS, CONTRACT_CHOICES

ESTIMATORS = (
    "blend",
    "regret",
    "solve-rate",
    "learning-potential",
    "regret-var",
    "mean-gap",
    "max-gap",
    "learnability",
)
LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")


@dataclass
class SampleDocsSettings:
    TABLE: ClassVar[str] = "corpus"

    paths: list[str] = option(
        None,
        factory=list,
        cli=False,
        help="""Corpus files, globs or
        directories (the command's arguments). Empty: the bundled demo corpus.""",
    )
    docs_per_round: int = option(
        100,
        "-n",
        "--num",
        min=0,
        help="""How many documents to
        sample (split across --mix pools); in a loop, per round (one GRPO group of designs
        each).""",
    )
    text_field: str = option(
        "text",
        "--text-field",
        help="""JSON key or Parquet column of the
        text; `a.b` for nested JSON.""",
    )
    id_field: str | None = option(
        None,
        "--id-field",
        help="""JSON key or Parquet column of the
        corpus's own document id, kept as source.id.""",
    )
    format: str = option(
        "auto",
        "--format",
        choices=("auto", "jsonl", "parquet", "text"),
        help="Input format: auto (by file name), jsonl, parquet or text.",
    )
    mix: str | None = option(
        None,
        "--mix",
        help="""Weights of labelled inputs, e.g.
        web=0.7,code=0.3: the share of -n each pool gets.""",
    )
    min_chars: int = option(0, "--min-chars", min=0, help="Skip documents shorter than this.")
    max_chars: int | None = option(
        None, "--max-chars", min=1, help="Skip documents longer than this."
    )
    excerpt_chars: int = option(
        4000,
        "--excerpt-chars",
        min=0,
        help="""Cut longer documents to
        a window of at most this many characters (0: keep whole).""",
    )
    excerpt_at: str = option(
        "random",
        "--excerpt-at",
        choices=("random", "start"),
        help="Where a window starts: random (seeded per document) or start.",
    )
    skip_bad: bool = option(
        False,
        "--skip-bad",
        help="""Count and skip bad lines instead of
        failing; a summary goes to stderr.""",
    )
    jobs: int | None = option(
        None,
        "-j",
        "--jobs",
        min=1,
        help="""Processes reading files in
        parallel (default: one per core).""",
    )


@dataclass
class DesignSettings:
    TABLE: ClassVar[str] = "design"

    designs_per_doc: int = option(
        4,
        "--num-designs",
        "-G",
        min=1,
        help="""G: with
        --doc-per-group, the designs sampled from each document (one GRPO group sharing its
        prompt); with --doc-per-design (the default) each document gives one design, and
        spade-loop samples G times corpus.docs_per_round documents (a group is then the
        designs of one skill).""",
    )
    sampling: Sampling = group(Sampling, max_tokens=2048)
    no_doc: bool = option(
        False, "--no-doc", help="Ablation: design without the grounding document."
    )
    no_memory: bool = option(False, "--no-memory", help="Ablation: no exemplars, no listing.")
    exemplars: int = option(
        2, "--exemplars", "-k", min=0, help="Exemplars shown in full in the prompt."
    )
    listing_limit: int = option(
        50, "--listing", min=0, help="Most environments named in the listing."
    )
    doc_tokens: int = option(
        1024, "--doc-tokens", min=16, help="Token budget of the document excerpt."
    )
    max_prompt_tokens: int | None = option(
        None,
        "--max-prompt-tokens",
        min=64,
        help="""Budget of
        the whole prompt (default: context minus --max-tokens).""",
    )
    prompt: str | None = option(
        None,
        "--prompt",
        help="""Prompt template file replacing the
        packaged one (docs/commands/spade-design.md), or a shipped template's name: micro (the micro
        world's designs, prompts/design_micro.md).""",
    )
    batch_docs: int = option(
        8,
        "--batch-docs",
        min=1,
        help="""Documents whose designs are
        generated in one engine call.""",
    )
    attempts: int = option(
        3,
        cli=False,
        min=1,
        help="""Design passes per round: a document whose
        designs all failed validation is designed again (into the same group), up to this
        many times in all.""",
    )
    redesign_doc: str = option(
        "fresh",
        cli=False,
        choices=("fresh", "same"),
        help="""The document
        a design pass after the first shows: fresh (another one sampled for it, as released:
        a fresh document per attempt) or same (the one whose designs failed).""",
    )
    contract: str = option(
        "spade",
        "--contract",
        choices=("spade", "published"),
        help="""The
        contract designs are written in: spade (ours: gymnasium.Env, checked solution) or
        published (plain class, \\boxed{} commands, solution() text). Without --memory,
        published designs get no exemplars (the example library is of our contract).""",
    )
    # Skill curriculum and memory policy (skills.py, memory.py).
    skill_set: str = option(
        "games",
        "--skill-set",
        choices=("games", "tool-use", "micro", "none"),
        help="""Named
        skill list the designs target (none: no target skill).""",
    )
    skills: str | None = option(
        None,
        "--skills",
        help="""Comma-separated skill names replacing
        --skill-set's list.""",
    )
    skills_per_round: int = option(
        3,
        "--skills-per-round",
        min=0,
        help="""Skills active per round,
        round-robin over the list (0: all).""",
    )
    difficulty: str = option(
        "medium",
        "--difficulty",
        choices=("easy", "medium", "hard", "mixed", "none"),
        help="""Target difficulty (published: medium; mixed: one per design,
        by hash).""",
    )
    doc_per_design: bool = option(
        True,
        "--doc-per-design/--doc-per-group",
        help="""A fresh document
        per design (each input document gives one design) or one document for a group of -G.""",
    )
    memory_policy: str = option(
        "published",
        "--memory-policy",
        choices=("published", "diverse"),
        help="""Exemplars: published (same skill, win-rate band, cut code,
        an avoid line) or diverse (top-regret + random + diverse, a listing).""",
    )
    exemplar_chars: int = option(
        2000,
        "--exemplar-chars",
        min=0,
        help="""published policy: cut each
        exemplar's code to this many characters (0: whole).""",
    )


@dataclass
class ValidateSettings:
    TABLE: ClassVar[str] = "validate"

    seeds: int = option(
        3, "--seeds", min=1, max=64, help="Reset seeds each environment is checked on."
    )
    workers: int = option(
        2,
        "--workers",
        "-j",
        min=1,
        help="""Candidates validated concurrently
        (one sandboxed worker each).""",
    )
    copies: str = option(
        "reject",
        "--copies",
        choices=("reject", "allow"),
        help="""reject: a design whose code is a copy
        of an earlier candidate's or a memory entry's is invalid (`duplicate`); allow: copies
        are checked like any design, as the published validity check does (it only loads,
        resets and steps them). spade-regret's --dedup decides what a copy earns.""",
    )
    skill: str = option(
        "any",
        "--skill",
        choices=("any", "micro"),
        help="""any: a design may exercise any skill,
        as the published validity check lets it; micro: a micro-world design must subclass
        the family of its target skill and name no other (`off_skill`): else a designer
        earns more by writing the family that pays best than by writing its own well.""",
    )
    near: float | None = option(
        None,
        "--near",
        min=0.0,
        max=1.0,
        help="""Also reject
        near-duplicates: shingle Jaccard similarity at least this (e.g. 0.8). Default: exact
        duplicates only.""",
    )
    episode_timeout: float = option(
        60.0, "--episode-timeout", min=0.1, help="Wall seconds one validation episode may take."
    )
    candidate_timeout: float = option(
        120.0,
        "--candidate-timeout",
        min=1.0,
        help="""Wall seconds
        all checks of one candidate may take together (verdict `timeout`).""",
    )
    contract: str = option(
        "auto",
        "--contract",
        choices=CONTRACT_CHOICES,
        help="""Environment
        contract: spade (a gymnasium.Env with metadata and a checked solution), published (a
        plain class with reset, step and solution(), as released by the SPADE authors) or
        auto (from the code).""",
    )
    published_max_turns: int | None = option(
        None,
        "--published-max-turns",
        min=1,
        max=1000,
        help="""max_turns of published environments
        (default: 25, which the release's loader forces on every environment).""",
    )
    judge: bool = option(
        False,
        "--judge",
        help="""Also have the model under test (--model)
        judge each environment that passed the checks, from its code and one trajectory (a
        random policy's), as the release's optional LLM validator does: an environment it
        answers \\boxed{no} for is rejected as judged_invalid.""",
    )
    judge_sampling: Sampling = group(Sampling, temperature=0.3, max_tokens=4096)
    require_solution: bool = option(
        False,
        "--require-solution",
        help="""Reject published
        environments without solution() (no_env_class). Default: valid as the release has
        them, with validation.feasibility "unverified".""",
    )
    reject_single_shot: bool = option(
        False,
        "--reject-single-shot",
        help="""Reject environments
        whose observations never depend on the actions taken (single-shot quizzes) as
        single_shot.""",
    )


@dataclass
class HintSettings:
    TABLE: ClassVar[str] = "hint"

    sampling: Sampling = group(Sampling, temperature=0.3, max_tokens=256)
    attempts: int = option(
        3,
        "--attempts",
        min=1,
        help="""Generations per environment at most: a
        hint that contains the solution is regenerated, then the candidate is marked.""",
    )
    prompt: str | None = option(
        None,
        "--prompt",
        help="""Hint prompt file replacing the packaged
        one (placeholders {name}, {code}, {tool_note}, {tool_rules}).""",
    )
    max_code_chars: int = option(
        12000, "--max-code-chars", min=100, help="Environment source shown in the prompt, at most."
    )
    batch: int = option(16, "--batch", min=1, help="Environments hinted in one engine call.")


@dataclass
class RolloutSettings:
    TABLE: ClassVar[str] = "rollout"

    episodes: int = option(
        4,
        "-k",
        "--episodes",
        min=1,
        help="""K: plays per condition (no hint,
        hint) per environment; the agent's GRPO group (published: 16).""",
    )
    episode_return: str = option(
        "final",
        "--return",
        choices=("final", "sum"),
        help="""An
        episode's return: final (the last step's reward if the episode terminated, else 0,
        clipped to [-1, 1], as published) or sum (all step rewards). Both are recorded.""",
    )
    hint_source: str = option(
        "self",
        "--hint-source",
        choices=("self", "env"),
        help="""The hinted
        condition's hint: self (the candidate's `hint`, written by the model in spade-hint)
        or env (the environment's info['hint']).""",
    )
    agent: str = option(
        "model",
        "--agent",
        choices=("model", "replay"),
        help="""`model` (sample
        from --model) or `replay` (play each episode's info['solution']; --model then only
        lends its tokenizer and chat template).""",
    )
    sampling: Sampling = group(Sampling, max_tokens=256)
    max_turns: int | None = option(
        None,
        "--max-turns",
        min=1,
        help="""Cap on each environment's
        own max_turns (default: the environment's).""",
    )
    max_context: int | None = option(
        None,
        "--max-context",
        min=16,
        help="""Token budget of one
        episode, prompt and all turns (default: the model's context window). An episode that
        would exceed it stops with 'context'.""",
    )
    episode_timeout: float = option(
        300.0,
        "--episode-timeout",
        min=0.1,
        help="""Wall seconds per
        episode from its reset; then it stops with 'timeout'.""",
    )
    batch_size: int = option(
        64,
        "--batch-size",
        min=1,
        help="""Episodes in flight, generated for
        together each turn.""",
    )
    workers: int = option(
        8, "--workers", "-j", min=1, help="Threads starting and stepping sandboxed environments."
    )
    prompt: str | None = option(
        None,
        "--prompt",
        help="""TOML file overriding keys of the agent
        prompt (spade_cli/prompts/agent.toml), or a shipped one's name: micro (the micro
        world's short prompt, prompts/agent_micro.toml).""",
    )
    verify: float = option(
        1.0,
        "--verify",
        min=0.0,
        max=1.0,
        help="""Fraction of episodes whose
        action log is replayed on the same seed, alone and later (a candidate's replays share
        one worker, its module executed again before each); a replay that differs marks the
        environment 'nondeterministic' (scored invalid). With any verification, each
        environment is also probed without the model (its solution on a rollout seed, a
        nonsense policy on two others).""",
    )
    contract: str = option(
        "auto",
        "--contract",
        choices=CONTRACT_CHOICES,
        help="""Contract of
        environments whose record does not say (spade, published, auto: from the code).""",
    )
    action_format: str = option(
        "auto",
        "--action-format",
        choices=ACTION_FORMATS,
        help="""How
        replies become actions: plain (the reply is the action), boxed (the agent answers
        \\boxed{<action>} and the whole reply goes to step) or auto (boxed, or the
        <tool_call> protocol, for published environments; plain for ours).""",
    )
    conditions: str = option(
        "both",
        "--conditions",
        choices=("both", "nohint"),
        help="""Conditions
        played: both (no hint and hint) or nohint only (the re-plays of a round's later
        agent steps, which train the agent and need no regret).""",
    )
    replay: int = option(
        2,
        cli=False,
        help="""Environments replayed from memory into each
        round's agent episodes (spade-memory replay -n).""",
    )


@dataclass
class RewardShape:
    """The constants of the published designer rewards (nested in `RegretSettings`: their
    flags are spade-regret's, their keys the `[regret]` table's)."""

    plateau_lo: float = option(
        0.4, "--plateau-lo", help="Win rate where the solve-rate plateau starts."
    )
    plateau_hi: float = option(
        0.6, "--plateau-hi", help="Win rate where the solve-rate plateau ends."
    )
    plateau_ramp: float = option(
        0.25,
        "--plateau-ramp",
        min=1e-9,
        help="""Width over which the
        plateau falls from 1 to 0 on either side.""",
    )
    solve_weight: float = option(0.6, "--solve-weight", help="Weight of the plateau in blend.")
    regret_weight: float = option(
        0.4, "--regret-weight", help="Weight of the scaled regret in blend."
    )
    regret_scale: float = option(
        0.15,
        "--regret-scale",
        min=1e-9,
        help="""Regret at which blend's
        regret term saturates (clip(regret / scale, 0, 1)).""",
    )
    variance_target: float = option(
        0.25,
        "--variance-target",
        help="""regret-var: variance of the
        no-hint returns that earns the most (0.25: a win/loss coin flip).""",
    )
    variance_width: float = option(
        0.01,
        "--variance-width",
        min=1e-9,
        help="""regret-var: width
        (sigma squared) of the bell around the target: exp(-(var - target)^2 / (2 width)).""",
    )
    gamma_fast: float = option(
        0.98,
        "--gamma-fast",
        min=0.0,
        max=1.0,
        help="""learning-potential: weight of the new window in the
        fast mean of a skill's win rate (mu <- (1 - g) mu + g r, as released).""",
    )
    gamma_slow: float = option(
        0.85,
        "--gamma-slow",
        min=0.0,
        max=1.0,
        help="""learning-potential: weight of the new window in the
        slow mean, the baseline the reward |win rate - mu_slow| is measured from.""",
    )


@dataclass
class RegretSettings:
    TABLE: ClassVar[str] = "regret"

    estimator: str = option(
        "blend",
        "--estimator",
        "-e",
        choices=ESTIMATORS,
        help="""The
        designer's reward: blend, regret, solve-rate, learning-potential, regret-var (the
        published variants) or the raw estimators mean-gap, max-gap, learnability
        (docs/commands/spade-regret.md).""",
    )
    invalid: str = option(
        "drop",
        "--invalid",
        choices=("drop", "penalty"),
        help="""Invalid designs
        and duplicates: drop (no designer sample, as published) or penalty (trained with
        --invalid-penalty / --duplicate-penalty).""",
    )
    invalid_penalty: float = option(
        -1.0,
        "--invalid-penalty",
        help="""Designer reward of an invalid
        design with --invalid penalty.""",
    )
    duplicate_penalty: float | None = option(
        None,
        "--duplicate-penalty",
        help="""Designer reward
        of a duplicate with --invalid penalty (default: the invalid penalty).""",
    )
    clip: str = option(
        "0,1",
        "--clip",
        help="""Clip mean-gap, max-gap and learnability to LO,HI
        for the designer reward; `none` keeps them raw.""",
    )
    shape: RewardShape = group(RewardShape)
    dedup: bool = option(
        True, "--dedup/--no-dedup", help="Reject duplicates of memory and of the batch."
    )
    dedup_threshold: float = option(
        0.8,
        "--dedup-threshold",
        min=0.0,
        max=1.0,
        help="""Jaccard
        similarity of token shingles at which two environments are near-duplicates.""",
    )
    min_regret: float | None = option(
        None,
        "--min-regret",
        help="""Accept into memory only
        environments with at least this regret.""",
    )
    memory_capacity: int = option(
        200,
        "--memory-capacity",
        min=0,
        help="""Most environments memory
        keeps; the oldest go first (0: keep all).""",
    )
    shuffle_memory_scores: bool = option(
        False,
        "--shuffle-memory-scores",
        help="""Negative
        control: permute the scores of the environments this batch adds to memory among
        those of each skill, so the exemplars a designer is shown (chosen by score) carry
        no signal either (with train's --shuffle-designer-rewards).""",
    )


@dataclass
class TrainSettings:
    TABLE: ClassVar[str] = "train"

    enabled: bool = option(
        True,
        cli=False,
        help="""Train at the end of each round; false
        evaluates a fixed model.""",
    )
    role: str = option(
        "both",
        "--role",
        choices=("designer", "agent", "both"),
        help="Which role's samples to train on.",
    )
    designer_fraction: float | None = option(
        None,
        "--designer-fraction",
        min=0.0,
        max=1.0,
        help="""With --role both: share of designer groups
        among all groups; the more plentiful role is subsampled. Default: every group.""",
    )
    include_hinted: bool = option(
        False,
        "--include-hinted",
        help="""Also train the agent on
        hinted episodes (own groups).""",
    )
    group_size: int | None = option(
        None,
        "--group-size",
        min=1,
        help="""GRPO group size G
        (default: the largest group; smaller ones are padded with loss-free rows).""",
    )
    loss_type: str = option("dapo", "--loss-type", choices=LOSS_TYPES, help="TRL loss.")
    beta: float = option(
        0.0,
        "--beta",
        min=0.0,
        help="""KL coefficient against the reference
        model (0 = no reference model).""",
    )
    ref_model: str | None = option(
        None,
        "--ref-model",
        help="""Reference model for the KL term
        (default: the starting checkpoint).""",
    )
    epsilon: float = option(
        0.2,
        "--epsilon",
        min=0.0,
        help="""Clipping range of the policy ratio
        (low side; high side too unless --epsilon-high).""",
    )
    epsilon_high: float | None = option(
        None, "--epsilon-high", min=0.0, help="Upper clipping range (DAPO suggests 0.28)."
    )
    scale_rewards: str = option(
        "group", "--scale-rewards", choices=("group", "batch", "none"), help="Advantage scaling."
    )
    learning_rate: float = option(1e-6, "--lr", "--learning-rate", min=0.0, help="Learning rate.")
    lr_scheduler: str = option("constant", "--lr-scheduler", help="transformers scheduler name.")
    warmup_ratio: float = option(
        0.0,
        "--warmup-ratio",
        min=0.0,
        max=1.0,
        help="Share of steps spent warming up the learning rate.",
    )
    weight_decay: float = option(0.0, "--weight-decay", min=0.0, help="AdamW weight decay.")
    max_grad_norm: float = option(1.0, "--max-grad-norm", min=0.0, help="Gradient clipping.")
    temperature: float = option(
        1.0,
        "--temperature",
        min=0.01,
        help="""Policy temperature in the
        loss; match the round's sampling temperature.""",
    )
    off_policy_mask_threshold: float | None = option(
        None,
        "--off-policy-mask-threshold",
        min=0.0,
        help="""TRL's off-policy sequence
        mask against the stored logprobs (nats; default off).""",
    )
    epochs: int = option(
        1,
        "--epochs",
        min=1,
        help="""Optimisation passes over each batch of
        stored samples (GRPO's mu).""",
    )
    per_device_batch_size: int | None = option(
        None,
        "--per-device-batch-size",
        "--batch-size",
        min=1,
        help="""Sequences per process per
        micro-step (default: one group).""",
    )
    grad_accum: int = option(1, "--grad-accum", min=1, help="Micro-steps per optimizer step.")
    whole_batch: bool = option(
        False,
        "--whole-batch/--no-whole-batch",
        help="""One optimizer step over every
        trainable group of the run, accumulated a micro-step at a time (--grad-accum is then
        set from the data), as the published trainer takes one step per rollout; default:
        a step every --grad-accum micro-steps.""",
    )
    max_prompt_length: int | None = option(
        None, "--max-prompt-length", min=1, help="Keep the last N prompt tokens."
    )
    max_completion_length: int | None = option(
        None, "--max-completion-length", min=1, help="Keep the first N completion tokens."
    )
    gradient_checkpointing: bool = option(
        False, "--gradient-checkpointing", help="Trade compute for memory."
    )
    bf16: bool | None = option(
        None,
        "--bf16/--no-bf16",
        help="""bfloat16 training (default: on a
        GPU that supports it, off on CPU).""",
    )
    optimizer: str = option(
        "adamw",
        "--optimizer",
        choices=("adamw", "sgd"),
        help="""adamw: as
        published; sgd: plain gradient descent (no momentum, no weight decay), whose step
        follows the gradient's size where a fresh AdamW moves every weight by about the
        learning rate (bench/designer_bandit.py --optimizer).""",
    )
    optimizer_state: str = option(
        "fresh",
        "--optimizer-state",
        choices=("fresh", "carry"),
        help="""fresh: a new
        AdamW each run; carry: resume AdamW's moments from --model's optimizer.pt when it has
        one, and save them beside the new checkpoint, as one long-lived trainer would (full
        fine-tuning, one process or DDP).""",
    )
    design_replay: float = option(
        0.0,
        "--design-replay",
        min=0.0,
        help="""Add this times the cross-entropy of one
        valid design from the inputs (its answer given its prompt) to every optimizer step:
        rehearses the designer's format while the agent trains the shared model
        (train/design_replay.py; not in the published recipe; 0 = off). The loop gives it
        to the agent's steps only.""",
    )
    design_replay_from: list[str] = option(
        None,
        "--design-replay-from",
        factory=list,
        help="""Records whose valid designs
        --design-replay rehearses instead of the inputs' (repeatable), e.g. the first
        round's, which the starting model wrote before any training.""",
    )
    lora_r: int = option(0, "--lora-r", min=0, help="LoRA rank (0 = full fine-tuning).")
    lora_alpha: int = option(16, "--lora-alpha", min=1, help="LoRA alpha.")
    lora_dropout: float = option(0.0, "--lora-dropout", min=0.0, max=1.0, help="LoRA dropout.")
    lora_target_modules: str = option(
        "all-linear", "--lora-target-modules", help="Comma-separated module names, or all-linear."
    )
    lora_save: str = option(
        "merged",
        "--lora-save",
        choices=("merged", "adapter"),
        help="""merged:
        a full model in --output-dir (adapter in OUTPUT/adapter); adapter: only the peft
        adapter.""",
    )
    report_to: str = option(
        "none",
        "--report-to",
        choices=("none", "tensorboard", "wandb"),
        help="Live dashboards through TRL.",
    )
    logging_steps: int = option(
        1, "--logging-steps", min=1, help="Log metrics every N optimizer steps."
    )
    overwrite: bool = option(False, "--overwrite", help="Replace a non-empty --output-dir.")
    if_empty: str = option(
        "keep",
        "--if-empty",
        choices=("keep", "fail"),
        help="""When no group
        carries a learning signal: keep the model (a record with format `unchanged`, steps 0
        and path = --model) or fail (exit 3).""",
    )
    num_processes: int = option(
        1,
        "--num-processes",
        min=1,
        help="""Data-parallel processes (all
        machines); >1 starts `accelerate launch` (GPUs, or CPU processes with gloo).""",
    )
    threads: int | None = option(
        None,
        "--threads",
        min=1,
        help="""CPU threads for the
        model's work in each process (default: torch's, OMP_NUM_THREADS or every core; with
        --num-processes N on CPUs, cores / N).""",
    )
    accelerate_config: str | None = option(
        None,
        "--accelerate-config",
        help="""accelerate config
        file (DeepSpeed / FSDP; see examples/accelerate/).""",
    )
    num_machines: int = option(
        1, "--num-machines", min=1, help="Machines taking part (multi-node)."
    )
    machine_rank: int = option(
        0, "--machine-rank", min=0, help="This machine's rank (Slurm: $SLURM_NODEID)."
    )
    main_process_ip: str | None = option(
        None, "--main-process-ip", help="Address of the rank-0 machine."
    )
    main_process_port: int | None = option(
        None,
        "--main-process-port",
        min=1,
        help="""Port on
        the rank-0 machine (default: a free one; set it for multi-node).""",
    )
    # The designer's advantage (samples.py).
    designer_baseline: str = option(
        "skill-mean",
        "--designer-baseline",
        choices=("skill-mean", "group"),
        help="""skill-mean: reward minus its skill's mean over the round, no
        std division; group: z-score within the candidate group.""",
    )
    designer_scale: str = option(
        "none",
        "--designer-scale",
        choices=("none", "balance"),
        help="""balance:
        multiply designer advantages by min(cap, agent samples / designer samples x interval).""",
    )
    designer_scale_cap: float = option(
        50.0, "--designer-scale-cap", min=0.0, help="Cap of the balance scale."
    )
    designer_negatives: str = option(
        "keep",
        "--designer-negatives",
        choices=("keep", "zero"),
        help="""keep: as published, a
        design below its skill's mean is pushed down; zero: its advantage is 0, so only the
        designs above the mean are reinforced (a negative advantage pushes down every token
        of a design, the format every design shares as well).""",
    )
    designer_interval: int | None = option(
        None,
        "--designer-interval",
        min=1,
        help="""Agent steps per designer
        step (the regeneration interval) in the balance scale (default: 1; in a loop,
        loop.agent_steps).""",
    )
    # The designer's own step in a loop (recipe.agent_steps): loop-only, because spade-train
    # --role both trains both roles in one optimizer with one learning rate.
    designer_learning_rate: float | None = option(
        None,
        cli=False,
        min=0.0,
        help="""The learning rate of the
        designer's step when it trains on its own, at the end of a window of
        loop.agent_steps > 1 agent steps (default: learning_rate, as published).""",
    )
    designer_epochs: int | None = option(
        None,
        cli=False,
        min=1,
        help="""The designer's step's
        epochs, as designer_learning_rate (default: epochs).""",
    )
    designer_beta: float | None = option(
        None,
        cli=False,
        min=0.0,
        help="""The KL coefficient of the
        designer's step, as designer_learning_rate, against the loop's starting model
        (default: beta, against the step's own starting checkpoint). The agent's steps
        move the shared model away from the answers the designer was pretrained to write;
        an anchor on the designer's step alone pulls its designs back and leaves the
        agent's steps unanchored.""",
    )
    tis: bool = option(
        False,
        "--tis/--no-tis",
        help="""Truncated importance sampling of designer
        samples (the launchers' --use-tis): each token's loss is weighted by min(cap, pi/mu),
        pi the model being trained, mu the stored generation logprobs. Designs are trained at
        the end of the window, on the latest checkpoint, but were written by the first.""",
    )
    tis_cap: float = option(2.0, "--tis-cap", min=1.0, help="Upper bound C of the TIS weight.")
    compact_filter: bool = option(
        False,
        "--compact-filter",
        help="""No gradient on agent episodes
        the turn limit cut off (stop truncated or max_turns; the launchers'
        --spade-compact-filter): their return still counts in the group's baseline.""",
    )
    shuffle_designer_rewards: bool = option(
        False,
        "--shuffle-designer-rewards",
        help="""Negative
        control: permute the designer rewards among the valid designs of each skill (seeded by
        --seed) before the advantages, so the designer trains on noise of the same distribution;
        invalid designs (regret's --invalid penalty) keep their penalty.""",
    )


@dataclass
class EvalSettings:
    TABLE: ClassVar[str] = "eval"

    suites: list[str] = option(
        None,
        "--suite",
        "-s",
        factory=list,
        help="""Suites to run
        (repeatable): bfcl, reasoning-gym, textarena, library, micro, memory; NAME:a,b picks
        categories, families, games or environments. Default: bfcl, reasoning-gym,
        textarena, library. In a loop: run on each round's checkpoint (none: no eval).""",
    )
    num_items: int = option(
        20,
        "-n",
        "--num-items",
        min=0,
        help="""Tasks per suite; 0 = every
        item once where the set is finite (bfcl: all 800 entries; library, micro, memory: every
        environment).""",
    )
    samples: int = option(
        1, "--samples", "-k", min=1, help="Samples per task; pass@k is reported for k > 1."
    )
    sampling: Sampling = group(Sampling, temperature=0.0, max_tokens=512)
    max_turns: int | None = option(
        None,
        "--max-turns",
        min=1,
        help="""Cap on model turns per
        episode (default: the environment's).""",
    )
    batch: int = option(
        64,
        "--batch",
        min=1,
        help="""Episodes in flight together (one batched
        generation per turn).""",
    )
    # The loop's eval stage runs the suite on the loop's own seed unless told otherwise;
    # spade-eval itself takes --seed like every command.
    seed: int | None = option(
        None,
        cli=False,
        help="""The seed of the suite's items and samples
        on each round's checkpoint (default: the loop's seed). Another seed is another split
        of a suite that draws its items (micro: a validation split for choosing settings).""",
    )
