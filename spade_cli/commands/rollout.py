"""spade-rollout: K episodes with and K without the privileged hint per valid environment."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Annotated

import typer

from ..cli import (
    Config,
    Inputs,
    Limit,
    Output,
    Quiet,
    Seed,
    Shard,
    Verbose,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    progress_bar,
    select,
)
from ..engines import options as eo
from ..errors import UsageError
from ..recordio import RecordReader
from ..sandbox import SandboxPackages

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

Agent = Annotated[str, typer.Option("--agent", help="`model` (sample from --model) or `replay` "
                                    "(play each episode's info['solution']; --model then only "
                                    "lends its tokenizer and chat template).")]


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
    return (rec.get("validation") or {}).get("valid") is True and isinstance((rec.get("env") or {}).get("code"), str)


@app.command()
def rollout(
    inputs: Inputs = None,
    output: Output = "-",
    replay: Annotated[list[str] | None, typer.Option(
        "--replay", help="More candidates, played after the inputs: spade-memory replay output, "
        "a memory file (env entries) or any candidate file. Repeatable.")] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Episodes per condition (no hint, hint) per environment.")] = 4,
    agent: Agent = "model",
    model: eo.Model = "",
    engine: eo.EngineName = "auto",
    base_url: eo.BaseUrl = None,
    tokenizer: eo.Tokenizer = None,
    api: eo.Api = "completions",
    tensor_parallel: eo.TensorParallel = 1,
    gpu_memory: eo.GpuMemory = 0.85,
    device: eo.Device = "auto",
    dtype: eo.Dtype = "auto",
    max_model_len: eo.MaxModelLen = None,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy).")] = 1.0,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0, help="Nucleus sampling mass.")] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per agent turn.")] = 256,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Cap on each environment's own max_turns (default: the environment's).")] = None,
    max_context: Annotated[int | None, typer.Option(
        "--max-context", min=16, help="Token budget of one episode, prompt and all turns (default: "
        "the model's context window). An episode that would exceed it stops with 'context'.")] = None,
    episode_timeout: Annotated[float, typer.Option(
        "--episode-timeout", min=0.1, help="Wall seconds per episode from its reset; then it stops "
        "with 'timeout'.")] = 300.0,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="Episodes in flight, generated for together each turn.")] = 64,
    workers: Annotated[int, typer.Option("--workers", "-j", min=1, help="Threads starting and stepping sandboxed environments.")] = 8,
    verify: Annotated[float, typer.Option(
        "--verify", min=0.0, max=1.0, help="Fraction of episodes whose action log is replayed in a "
        "fresh worker on the same seed; a replay that differs marks the environment "
        "'nondeterministic' (scored invalid).")] = 1.0,
    prompt: Annotated[str | None, typer.Option(
        "--prompt", help="TOML file overriding keys of the agent prompt (spade_cli/prompts/agent.toml).")] = None,
    unsafe_no_sandbox: Annotated[bool, typer.Option(
        "--unsafe-no-sandbox", help="Run environment code WITHOUT bubblewrap (resource limits only). "
        "Only for trusted code.")] = False,
    call_timeout: Annotated[float, typer.Option("--call-timeout", min=0.1, help="Wall seconds per env reset/step call.")] = 5.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", min=192, help="Address space per sandboxed environment, MiB.")] = 512,
    sandbox_package: SandboxPackages = None,
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    from ..rollout import ModelAgent, Prompt, ReplayAgent, RolloutStats, run_rollouts
    from ..sandbox import SandboxConfig, check_sandbox

    if agent not in ("model", "replay"):
        raise UsageError(f"--agent must be model or replay, got {agent!r}")
    the_prompt = Prompt(prompt)
    reader = RecordReader(inputs or ["-"], kind="candidate")
    stream = itertools.chain(reader, _replay_records(replay or []))
    records = select(stream, shard, limit)

    # Read up to the first environment to play before loading anything: bad input fails
    # fast, and a stream with nothing to play passes through without a model.
    head: list[dict] = []
    for rec in records:
        head.append(rec)
        if _eligible(rec):
            break
    records = itertools.chain(head, records)
    needed = bool(head) and _eligible(head[-1])

    cfg = SandboxConfig(unsafe=unsafe_no_sandbox, call_timeout=call_timeout, memory_mb=memory_mb,
                        packages=tuple(sandbox_package or ()))
    if needed and not unsafe_no_sandbox:
        check_sandbox()
    if agent == "replay":
        the_agent = ReplayAgent.for_model(model) if model else ReplayAgent()
    elif not needed:
        the_agent = ReplayAgent()  # nothing will be played
    else:
        if not model:
            raise UsageError("--model is required with --agent model (or use --agent replay)")
        from ..engines import Sampling

        def the_agent() -> ModelAgent:  # called by run_rollouts once the first workers start
            eng = eo.engine_from_options(
                model, engine, base_url=base_url, tokenizer=tokenizer, api=api,
                tensor_parallel=tensor_parallel, gpu_memory=gpu_memory, device=device, dtype=dtype,
                max_batch_size=batch_size, max_model_len=max_model_len, seed=seed)
            sampling = Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
            return ModelAgent(eng, sampling, seed=seed)

    stats = RolloutStats()
    bar = progress_bar("rollout", unit="ep")

    def tick(_ep) -> None:
        bar.total = 2 * k * stats.envs
        bar.update(1)

    with open_output(output, zstd) as out:
        out.write_all(run_rollouts(
            records, the_agent, k=k, seed=seed, sandbox_cfg=cfg, max_turns=max_turns,
            max_context=max_context, episode_timeout=episode_timeout, batch_size=batch_size,
            workers=workers, prompt=the_prompt, stats=stats, on_episode=tick, verify=verify))
    bar.close()
    log.info("%s", stats.line())


main = entry(app, "spade-rollout")
