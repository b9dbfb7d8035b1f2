"""The round recipe: the stages of round r as data, the one place it is written.

`round_stages(cfg, r)` lists the commands of a round with their inputs, flags and
outputs. `spade-loop` runs them (runner.py), `spade-loop --print-commands` prints them
as a shell script or a pipe (`bin/spade-round` runs that), and the Slurm driver submits
them as jobs (`spade-loop --stage NAME`, shards for the map stages). Each stage's flags
come from its settings (`settings.to_argv`), so no flag is written here twice.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from .. import declare as st
from ..micro import LIBRARY as MICRO_LIBRARY
from ..stage_settings import TrainSettings
from .config import LoopConfig
from .layout import (
    MEMORY,
    PICKED,
    SCORED,
    SCORED_WINDOW,
    Stage,
    base_model,
    checkpoint_model,
    checkpoint_record,
    memory_in,
    model_of,
    round_dir,
    shell_line,
    step_rollouts,
    train_metrics_file,
)


def sandbox_args(cfg: LoopConfig) -> list[str]:
    """The sandbox flags of the stages that run designed code."""
    packages = list(cfg.sandbox.packages)
    if cfg.baseline.mode == "fixed-pool" and cfg.baseline.pool.startswith("reasoning-gym"):
        packages.append("reasoning-gym")
    packages = list(dict.fromkeys(packages))
    return st.to_argv(dataclasses.replace(cfg.sandbox, packages=packages))


def engine_args(cfg: LoopConfig, model: str) -> list[str]:
    """The engine flags of a stage that runs MODEL (the config's engine, another model)."""
    return [*st.to_argv(dataclasses.replace(cfg.model, path="")), "--model", model]


def round_stages(cfg: LoopConfig, r: int) -> list[Stage]:
    d = round_dir(cfg, r)
    seed = str(cfg.seed * 1000 + r)
    model = model_of(cfg, r)
    engine = engine_args(cfg, model)
    sandbox = sandbox_args(cfg)
    extra = cfg.extra_args.get
    mem = memory_in(cfg, r)
    docs, cands = d / "docs.jsonl.zst", d / "candidates.jsonl.zst"
    validated, replay = d / "validated.jsonl.zst", d / "replay.jsonl.zst"
    rollouts, scored, memory_out = d / "rollouts.jsonl.zst", d / SCORED, d / MEMORY
    out: list[Stage] = []

    micro = cfg.loop.world == "micro"
    library_args = ["--library", str(MICRO_LIBRARY)] if micro else []
    if r == 1 and not cfg.model.path:
        tiny = Path(base_model(cfg))
        out.append(
            Stage(
                "init-model",
                "init-model",
                [str(tiny)],
                ["--kind", "micro" if micro else "tiny", "--seed", str(cfg.seed), "--force"],
                outputs=[tiny / "config.json"],
            )
        )
    if r == 1 and mem is not None:
        out.append(Stage("memory-init", "memory", ["init", str(mem), *library_args], outputs=[mem]))

    rollout_order = [str(validated)]
    replay_args: list[str] = []
    if cfg.rollout.replay > 0 and mem is not None and cfg.baseline.mode == "spade":
        # Environments from memory for the agent; only the memory comes before it.
        out.append(
            Stage(
                "replay",
                "memory",
                ["replay", str(mem)],
                ["-n", str(cfg.rollout.replay), "--round", str(r), "--seed", seed],
                replay,
                [replay],
            )
        )
        replay_args = ["--replay", str(replay)]
        rollout_order.append(str(replay))

    # The pool picked by the designer's reward: every environment plays, the best train.
    by_reward = cfg.baseline.mode == "fixed-pool" and cfg.baseline.pool_draw == "reward"
    if cfg.baseline.mode == "fixed-pool":
        from ..envs.library import library_dir

        pool = (
            str(library_dir())
            if cfg.baseline.pool == "library"
            else str(MICRO_LIBRARY)
            if cfg.baseline.pool == "micro"
            else cfg.baseline.pool
        )
        if pool.startswith("reasoning-gym"):
            # The task families as contract environments, then drawn like any pool.
            source = d / "pool-source.jsonl.zst"
            out.append(
                Stage("pool-source", "eval", [], ["--emit-pool", "--suite", pool], source, [source])
            )
            pool = str(source)
        out.append(
            Stage(
                "pool",
                "memory",
                ["pool", pool],
                ["-n", str(0 if by_reward else cfg.baseline.pool_size), "--round", str(r)]
                + ["--seed", seed],
                cands,
                [cands],
            )
        )
    else:
        corpus = cfg.corpus.paths
        if not corpus:
            demo = cfg.run_dir / "demo-corpus.jsonl.zst"
            corpus = [str(demo)]
            if r == 1:
                out.append(
                    Stage(
                        "demo-corpus",
                        "sample-docs",
                        [],
                        ["--build-demo-corpus", str(demo)],
                        outputs=[demo],
                    )
                )
        # A fresh document per design: as many documents as the round has designs.
        per_design = cfg.design.doc_per_design and not cfg.design.no_doc
        corpus_cfg = dataclasses.replace(
            cfg.corpus,
            docs_per_round=cfg.corpus.docs_per_round
            * (cfg.design.designs_per_doc if per_design else 1),
        )
        out.append(
            Stage(
                "sample-docs",
                "sample-docs",
                list(corpus),
                [*st.to_argv(corpus_cfg), "--seed", seed, *extra("corpus", [])],
                docs,
                [docs],
            )
        )
        memory_args = ["--memory", str(mem)] if mem is not None and not cfg.design.no_memory else []
        out.append(
            Stage(
                "design",
                "design",
                [str(docs)],
                [
                    *engine,
                    *st.to_argv(cfg.design),
                    *memory_args,
                    "--round",
                    str(r),
                    "--seed",
                    seed,
                    *extra("design", []),
                ],
                cands,
                [cands],
                shardable=True,
                order_inputs=[str(docs)],
            )
        )

    judge = engine if cfg.validate.judge else []  # the model under test judges (--judge)
    out.append(
        Stage(
            "validate",
            "validate",
            [str(cands)],
            [*st.to_argv(cfg.validate), *judge, *sandbox, "--seed", seed, *extra("validate", [])],
            validated,
            [validated],
            shardable=True,
            order_inputs=[str(cands)],
        )
    )
    played = [str(validated)]
    if cfg.baseline.mode == "spade":
        # Documents whose designs all failed are designed again, into the same groups.
        for a in range(2, cfg.design.attempts + 1):
            c_a, v_a = d / f"candidates-{a}.jsonl.zst", d / f"validated-{a}.jsonl.zst"
            retry = [x for p in played for x in ("--retry-failed", p)]
            if cfg.design.redesign_doc == "fresh" and not cfg.design.no_doc:
                # Other documents for this pass, as the release samples one per attempt.
                docs_a = d / f"docs-{a}.jsonl.zst"
                out.append(
                    Stage(
                        f"sample-docs-{a}",
                        "sample-docs",
                        list(corpus),
                        [
                            *st.to_argv(corpus_cfg),
                            "--seed",
                            str(int(seed) + 10_000 * a),
                            *extra("corpus", []),
                        ],
                        docs_a,
                        [docs_a],
                    )
                )
                retry += ["--fresh-docs", str(docs_a)]
            out.append(
                Stage(
                    f"design-{a}",
                    "design",
                    [str(docs)],
                    [
                        *engine,
                        *st.to_argv(cfg.design),
                        *memory_args,
                        "--round",
                        str(r),
                        "--seed",
                        seed,
                        "--attempt",
                        str(a),
                        *retry,
                        *extra("design", []),
                    ],
                    c_a,
                    [c_a],
                )
            )
            out.append(
                Stage(
                    f"validate-{a}",
                    "validate",
                    [str(c_a)],
                    [
                        *st.to_argv(cfg.validate),
                        *judge,
                        *sandbox,
                        "--seed",
                        seed,
                        *extra("validate", []),
                    ],
                    v_a,
                    [v_a],
                    shardable=True,
                    order_inputs=[str(c_a)],
                )
            )
            played.append(str(v_a))
    rollout_in = played
    rollout_order = [*played, *rollout_order[1:]]
    if cfg.rollout.hint_source == "self":
        # The model writes the hints of this round's and the replayed environments.
        hinted = d / "hinted.jsonl.zst"
        hint_in = played + rollout_order[len(played) :]
        out.append(
            Stage(
                "hint",
                "hint",
                hint_in,
                [*engine, *st.to_argv(cfg.hint), *sandbox, "--seed", seed, *extra("hint", [])],
                hinted,
                [hinted],
                shardable=True,
                order_inputs=hint_in,
            )
        )
        rollout_in = rollout_order = [str(hinted)]
        replay_args = []
    out.append(
        Stage(
            "rollout",
            "rollout",
            rollout_in,
            [
                *replay_args,
                *engine,
                *st.to_argv(cfg.rollout),
                *sandbox,
                "--seed",
                seed,
                *extra("rollout", []),
            ],
            rollouts,
            [rollouts],
            shardable=True,
            order_inputs=rollout_order,
        )
    )

    regret_args = [*st.to_argv(cfg.regret), "--round", str(r)]
    lp_state = d / "lp-state.json"
    lp_here = cfg.regret.estimator == "learning-potential" and not windowed(cfg)
    regret_args += lp_args(cfg, r, write=lp_here)
    if mem is not None:
        regret_args += ["--memory", str(memory_out)]
    # The stage owns a fresh copy of the previous memory, so a rerun after a kill in
    # mid-stage starts again from the same memory.
    out.append(
        Stage(
            "regret",
            "regret",
            [str(rollouts)],
            [*regret_args, *extra("regret", [])],
            scored,
            [scored] + ([memory_out] if mem is not None else []) + ([lp_state] if lp_here else []),
            copy=(mem, memory_out) if mem is not None else None,
            keep=True,
        )
    )
    trained = scored
    if by_reward:
        # The agent trains on the pool_size best by the designer's reward (their scored
        # plays), and its further steps re-play those.
        trained = d / PICKED
        out.append(
            Stage(
                "pick",
                "memory",
                ["pool", str(scored)],
                ["-n", str(cfg.baseline.pool_size), "--by", "reward", "--round", str(r)]
                + ["--seed", seed],
                trained,
                [trained],
            )
        )
        rollout_in = rollout_order = [str(trained)]

    if cfg.train.enabled:
        ckpt, ckpt_rec = d / "checkpoint", d / checkpoint_record()
        train = cfg.train
        if cfg.baseline.mode != "spade":
            train = dataclasses.replace(train, role="agent")
        if cfg.loop.agent_steps == 1:
            out.append(
                Stage(
                    "train",
                    "train",
                    [str(trained)],
                    [
                        "--model",
                        model,
                        "--output-dir",
                        str(ckpt),
                        *st.to_argv(train),
                        "--seed",
                        seed,
                        "--metrics",
                        str(d / train_metrics_file()),
                        *extra("train", []),
                    ],
                    ckpt_rec,
                    [ckpt_rec],
                )
            )
        else:
            out += agent_steps(
                cfg, r, train, model, seed, trained, rollout_in, rollout_order, replay_args, sandbox
            )

    if cfg.eval.suites:
        evals = d / "eval.jsonl.zst"
        eval_model = model_of(cfg, r + 1) if cfg.train.enabled else model
        # The same items every round (the master seed, or [eval] seed), so checkpoints are
        # comparable.
        out.append(
            Stage(
                "eval",
                "eval",
                [],
                [
                    *st.to_argv(dataclasses.replace(cfg.model, path="")),
                    "--model",
                    eval_model,
                    *st.to_argv(cfg.eval),
                    "--seed",
                    str(cfg.seed if cfg.eval.seed is None else cfg.eval.seed),
                    *extra("eval", []),
                ],
                evals,
                [evals],
            )
        )
    return out


def windowed(cfg: LoopConfig) -> bool:
    """The designer trains at the end of a window of agent steps (regret-window)."""
    return (
        cfg.loop.agent_steps > 1
        and cfg.train.enabled
        and cfg.baseline.mode == "spade"
        and cfg.train.role == "both"
    )


def lp_args(cfg: LoopConfig, r: int, write: bool) -> list[str]:
    """learning-potential: the skills' trackers, read from the previous round's file (a
    rerun starts from the same state) and, where the window's rewards are computed,
    updated into this round's."""
    if cfg.regret.estimator != "learning-potential":
        return []
    out = ["--state", str(round_dir(cfg, r) / "lp-state.json")] if write else []
    if r > 1:
        out += ["--state-from", str(round_dir(cfg, r - 1) / "lp-state.json")]
    return out


def designer_step(train: TrainSettings, start_model: str) -> TrainSettings:
    """The settings of the designer's own step: its learning rate, epochs and KL anchor
    (against START_MODEL, the loop's starting model) where set, and no design replay (the
    step trains on the designs' rewards themselves)."""
    lr, epochs, beta = train.designer_learning_rate, train.designer_epochs, train.designer_beta
    anchor = {} if beta is None else {"beta": beta, "ref_model": start_model if beta else None}
    return dataclasses.replace(
        train,
        role="designer",
        design_replay=0.0,
        design_replay_from=[],
        learning_rate=train.learning_rate if lr is None else lr,
        epochs=train.epochs if epochs is None else epochs,
        **anchor,
    )


def step_seed(seed: str, s: int) -> str:
    """Agent step s's seed: fresh environment seeds and samples for each re-play."""
    return seed if s == 1 else str(int(seed) + 1_000_000 * (s - 1))


def agent_steps(
    cfg: LoopConfig,
    r: int,
    train: TrainSettings,
    model: str,
    seed: str,
    trained: Path,
    rollout_in: list[str],
    rollout_order: list[str],
    replay_args: list[str],
    sandbox: list[str],
) -> list[Stage]:
    """The training of a round of `loop.agent_steps` steps on the same environments.

    Step 1 trains the agent on the round's scored plays (`train-s1`; TRAINED: the scored
    file, or the pool's best picked from it). Step s > 1 re-plays
    the environments without hints on step s-1's checkpoint (`rollout-sS`) and trains
    the agent on those plays (`train-sS`). Then the designer: its rewards recomputed with
    the win rate over all the window's no-hint plays, the regret kept from step 1
    (`regret-window`), and one designer step from the last agent checkpoint (`train`,
    the round's checkpoint). Without designer training the last agent step is the round's
    `train`. Each step's files are its own, so a killed loop resumes at the step."""
    d = round_dir(cfg, r)
    extra = cfg.extra_args.get
    n = cfg.loop.agent_steps
    designer = cfg.baseline.mode == "spade" and train.role == "both"
    agent = dataclasses.replace(train, role="agent")
    if train.design_replay > 0 and cfg.loop.replayed_designs == "first-round":
        agent = dataclasses.replace(agent, design_replay_from=[str(round_dir(cfg, 1) / SCORED)])
    replays = dataclasses.replace(cfg.rollout, conditions="nohint")
    out: list[Stage] = []
    window: list[str] = []
    step_model = model
    for s in range(1, n + 1):
        train_in = str(trained)
        if s > 1:
            plays = d / step_rollouts(s)
            out.append(
                Stage(
                    f"rollout-s{s}",
                    "rollout",
                    rollout_in,
                    [
                        *replay_args,
                        *engine_args(cfg, step_model),
                        *st.to_argv(replays),
                        *sandbox,
                        "--seed",
                        step_seed(seed, s),
                        *extra("rollout", []),
                    ],
                    plays,
                    [plays],
                    shardable=True,
                    order_inputs=rollout_order,
                    keep=True,
                )
            )
            train_in = str(plays)
            window.append(str(plays))
        last = s == n and not designer
        tag = "" if last else f"-s{s}"
        rec = d / checkpoint_record(tag)
        out.append(
            Stage(
                "train" if last else f"train-s{s}",
                "train",
                [train_in],
                [
                    "--model",
                    step_model,
                    "--output-dir",
                    str(d / f"checkpoint{tag}"),
                    *st.to_argv(agent),
                    "--seed",
                    step_seed(seed, s),
                    "--metrics",
                    str(d / train_metrics_file(tag)),
                    *extra("train", []),
                ],
                rec,
                [rec],
            )
        )
        step_model = checkpoint_model(rec)
    if designer:
        rescored, ckpt_rec = d / SCORED_WINDOW, d / checkpoint_record()
        lp = lp_args(cfg, r, write=True)
        out.append(
            Stage(
                "regret-window",
                "regret",
                [str(d / SCORED)],
                [
                    *st.to_argv(cfg.regret),
                    "--round",
                    str(r),
                    *lp,
                    *[a for w in window for a in ("--window", w)],
                    *extra("regret", []),
                ],
                rescored,
                [rescored] + ([d / "lp-state.json"] if lp else []),
                keep=True,
            )
        )
        out.append(
            Stage(
                "train",
                "train",
                [str(rescored)],
                [
                    "--model",
                    step_model,
                    "--output-dir",
                    str(d / "checkpoint"),
                    *st.to_argv(designer_step(train, base_model(cfg))),
                    "--seed",
                    seed,
                    "--metrics",
                    str(d / train_metrics_file()),
                    *extra("train", []),
                ],
                ckpt_rec,
                [ckpt_rec],
            )
        )
    return out


# --------------------------------------------------------------------------- printing


def as_script(cfg: LoopConfig, r: int, pipe: bool = False) -> str:
    """Round r as a bash script. With `pipe`, a stage whose only input is the previous
    stage's output, which nothing else reads, reads it from the pipe (`-`)."""
    stages = round_stages(cfg, r)
    lines = [
        "#!/usr/bin/env bash",
        f"# Round {r} of run {cfg.name!r}, as spade-loop runs it.",
        "set -euo pipefail",
        f"mkdir -p {shlex.quote(str(round_dir(cfg, r)))}",
    ]
    i = 0
    while i < len(stages):
        chain = [stages[i]]
        while (
            pipe and i + 1 < len(stages) and _pipes_into(chain[-1], stages[i + 1], stages[i + 2 :])
        ):
            i += 1
            chain.append(stages[i])
        for s in chain:
            if s.copy is not None:
                lines.append(f"cp {shlex.quote(str(s.copy[0]))} {shlex.quote(str(s.copy[1]))}")
        parts = []
        for j, s in enumerate(chain):
            argv = s.argv(
                inputs=["-"] if j > 0 else None, output="-" if j < len(chain) - 1 else None
            )
            if j < len(chain) - 1:
                argv = argv[:-2]  # stdout
            parts.append(shell_line(argv))
        lines.append(" \\\n  | ".join(parts))
        i += 1
    return "\n".join(lines) + "\n"


def _pipes_into(a: Stage, b: Stage, later: list[Stage]) -> bool:
    if a.output is None or a.keep or b.inputs != [str(a.output)]:
        return False
    path = str(a.output)
    return not any(path in s.inputs or path in s.args for s in later)
