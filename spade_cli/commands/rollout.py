"""spade-rollout: K episodes with and K without the privileged hint per valid environment."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Annotated

import typer

from ..cli import (
    Inputs,
    Limit,
    Output,
    Seed,
    Shard,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    peek_until,
    progress_bar,
    select,
    stage_command,
)
from ..engines.settings import EngineSettings
from ..errors import UsageError
from ..recordio import RecordReader
from ..sandbox.settings import SandboxSettings
from ..stage_settings import RolloutSettings

app = make_app(
    "Play every valid candidate environment (validation.valid and env.code): K episodes "
    "without the privileged hint and K with it, on the same K environment seeds, by the "
    "model agent (or the replay agent, which plays each episode's solution). All episodes "
    "in flight advance together: one batched generation per turn, environment steps in "
    "parallel sandboxed workers. Each candidate gets `rollouts` (episodes with turns, "
    "return, stop reason and the token trajectory training needs, plus per-condition "
    "summaries); other candidates pass through untouched, in input order.\n\n"
    "Example: spade-rollout validated.zst --replay replay.zst --model M -k 4 -o rollouts.zst"
)


def _replay_records(paths: list[str]) -> Iterator[dict]:
    """Candidates from `--replay` files: candidate records (spade-memory replay) as they
    are; memory `env` entries become valid replay candidates."""
    from ..memory import replay_candidate

    if not paths:  # a reader of no paths would read stdin
        return
    reader = RecordReader(paths, kind=("candidate", "env"))
    for rec in reader:
        if rec.get("kind") == "env":
            if not isinstance(rec.get("code"), str):
                raise reader.error("memory entry without code")
            yield replay_candidate(rec, int(rec.get("last_round") or rec.get("round") or 0))
        else:
            yield rec


def _eligible(rec: dict) -> bool:
    return (rec.get("validation") or {}).get("valid") is True and isinstance(
        (rec.get("env") or {}).get("code"), str
    )


@stage_command(app, settings=RolloutSettings, engine=EngineSettings, sandbox=SandboxSettings)
def rollout(
    inputs: Inputs = None,
    output: Output = "-",
    replay: Annotated[
        list[str] | None,
        typer.Option(
            "--replay",
            help="More candidates, played after the inputs: spade-memory replay output, "
            "a memory file (env entries) or any candidate file. Repeatable.",
        ),
    ] = None,
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    *,
    settings: RolloutSettings,
    engine: EngineSettings,
    sandbox: SandboxSettings,
) -> None:
    from ..rollout import AgentPrompt, ModelAgent, ReplayAgent, RolloutStats, run_rollouts
    from ..sandbox import check_sandbox

    the_prompt = AgentPrompt(settings.prompt)
    reader = RecordReader(inputs or ["-"], kind="candidate")
    stream = itertools.chain(reader, _replay_records(replay or []))
    records, needed = peek_until(select(stream, shard, limit), _eligible)

    cfg = sandbox.config()
    if needed and not sandbox.unsafe_no_sandbox:
        check_sandbox()
    if settings.agent == "replay":
        the_agent = ReplayAgent.for_model(engine.path) if engine.path else ReplayAgent()
    elif not needed:
        the_agent = ReplayAgent()  # nothing will be played
    else:
        if not engine.path:
            raise UsageError("--model is required with --agent model (or use --agent replay)")

        def the_agent() -> ModelAgent:  # called by run_rollouts once the first workers start
            return ModelAgent(engine.load(seed=seed), settings.sampling, seed=seed)

    stats = RolloutStats()
    bar = progress_bar("rollout", unit="ep")

    conditions = ("nohint",) if settings.conditions == "nohint" else ("nohint", "hint")

    def tick(_ep) -> None:
        bar.total = len(conditions) * settings.episodes * stats.envs
        bar.update(1)

    with open_output(output, zstd) as out:
        out.write_all(
            run_rollouts(
                records,
                the_agent,
                k=settings.episodes,
                seed=seed,
                sandbox_cfg=cfg,
                max_turns=settings.max_turns,
                max_context=settings.max_context,
                episode_timeout=settings.episode_timeout,
                batch_size=settings.batch_size,
                workers=settings.workers,
                prompt=the_prompt,
                stats=stats,
                on_episode=tick,
                verify=settings.verify,
                episode_return=settings.episode_return,
                hint_source=settings.hint_source,
                contract=settings.contract,
                action_format=settings.action_format,
                conditions=conditions,
            )
        )
    bar.close()
    log.info("%s", stats.line())


main = entry(app, "spade-rollout")
