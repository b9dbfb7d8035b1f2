"""spade-loop: run rounds of the whole pipeline from one TOML config, resumably."""

from __future__ import annotations

import sys
from typing import Annotated

import orjson
import typer

from ..cli import Quiet, Verbose, entry, log, make_app
from ..errors import UsageError
from ..loop import Loop, load_config
from ..loop.config import describe_fields
from ..loop.layout import round_dir
from ..loop.recipe import as_script, round_stages
from ..loop.relocate import settle
from ..loop.report import load_metrics, step_line, table
from ..loop.runner import run_stage
from ..loop.stage_process import use as use_stage_process

app = make_app(
    "Run rounds of the SPADE pipeline (sample-docs → design → validate → rollout → regret → "
    "train) from a TOML config. Each round writes runs/NAME/round-NNN/ with one output file "
    "per stage and a manifest; the checkpoint of round r is the model of round r+1 and the "
    "environment memory carries over. Killed at any moment, a rerun resumes from the last "
    "completed stage. One JSON summary per round goes to stdout; metrics.jsonl and plots/*.png "
    "go to the run directory.\n\n"
    "Without a config: the CPU demo (tiny offline model, bundled demo corpus, example "
    "environments).\n\n"
    "Example: spade-loop examples/demo.toml | jq '{round, valid_rate, regret_mean}'"
)


@app.command()
def loop(
    config: Annotated[
        str | None, typer.Argument(help="Run config (TOML). Omit for every stage's defaults.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Override the run name.")] = None,
    rounds: Annotated[
        int | None, typer.Option("--rounds", min=1, help="Override the number of rounds.")
    ] = None,
    runs_dir: Annotated[
        str | None, typer.Option("--runs-dir", help="Override where runs are written.")
    ] = None,
    show_config: Annotated[
        bool,
        typer.Option(
            "--show-config",
            help="Print every config field with its default and meaning, then exit.",
        ),
    ] = False,
    print_commands: Annotated[
        bool,
        typer.Option(
            "--print-commands",
            help="Print round --round as the bash script of its stage commands (what the loop runs), then exit.",
        ),
    ] = False,
    pipe: Annotated[
        bool, typer.Option("--pipe", help="With --print-commands: join the map stages with pipes.")
    ] = False,
    list_stages: Annotated[
        bool,
        typer.Option(
            "--list-stages",
            help="Print round --round's stages as JSON lines (name, command, shardable, nodes, outputs, dir; for job schedulers), then exit.",
        ),
    ] = False,
    round_: Annotated[
        int,
        typer.Option(
            "--round", min=1, help="The round --print-commands, --list-stages and --stage refer to."
        ),
    ] = 1,
    stage: Annotated[
        str | None,
        typer.Option(
            "--stage",
            help="Run only this stage of round --round (a Slurm job); with --shard, one shard of a map stage.",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard", help="With --stage: run shard i/n of a map stage, written beside its output."
        ),
    ] = None,
    merge: Annotated[
        int | None,
        typer.Option(
            "--merge",
            min=1,
            help="With --stage: merge the outputs of its N shards into the stage's output.",
        ),
    ] = None,
    machine_rank: Annotated[
        int | None,
        typer.Option(
            "--machine-rank",
            min=0,
            help="With --stage train on several nodes: this node's rank (Slurm: $SLURM_NODEID); only rank 0 records the checkpoint.",
        ),
    ] = None,
    main_process_ip: Annotated[
        str | None,
        typer.Option(
            "--main-process-ip",
            help="With --stage train on several nodes: the rank-0 node's address.",
        ),
    ] = None,
    stage_process: Annotated[
        str,
        typer.Option(
            "--stage-process",
            metavar="auto|fork|exec",
            help="How each stage starts: fork (a child of the loop, which imports torch, transformers and TRL once), exec (a fresh `python -m spade_cli`, the printed command) or auto (fork unless a GPU is visible: a CUDA driver does not survive fork). The records are the same.",
        ),
    ] = "auto",
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    use_stage_process(stage_process)
    if show_config:
        for key, default, doc in describe_fields():
            sys.stdout.write(f"{key:32} {default:24} {doc}\n")
        return
    overrides = {
        k: v
        for k, v in (("name", name), ("rounds", rounds), ("runs_dir", runs_dir))
        if v is not None
    }
    cfg = load_config(config, overrides)
    if print_commands or list_stages:
        settle(cfg.run_dir)  # a run that moved: its commands name where it lies now
    if print_commands:
        sys.stdout.write(as_script(cfg, round_, pipe=pipe))
        return
    if list_stages:
        for s in round_stages(cfg, round_):
            sys.stdout.buffer.write(
                orjson.dumps(
                    {
                        "name": s.name,
                        "command": "spade-" + s.cmd,
                        "shardable": s.shardable,
                        "nodes": cfg.train.num_machines if s.name == "train" else 1,
                        "outputs": [str(p) for p in s.outputs],
                        "dir": str(round_dir(cfg, round_)),
                    }
                )
                + b"\n"
            )
        return
    if stage is not None:
        run_stage(cfg, round_, stage, shard, merge, machine_rank, main_process_ip)
        return
    if machine_rank is not None or main_process_ip is not None:
        raise UsageError("--machine-rank and --main-process-ip go with --stage train")
    if shard is not None or merge is not None:
        raise UsageError("--shard and --merge go with --stage")

    def on_round(rnd, summary):
        sys.stdout.buffer.write(
            orjson.dumps({k: v for k, v in summary.items() if k not in ("regrets", "train_losses")})
            + b"\n"
        )
        sys.stdout.flush()
        log.info("round %d done:\n%s", rnd.r, table(load_metrics(cfg)))
        for step in summary.get("steps") or []:
            log.info("  step %d %-8s %s", step["step"], step["role"], step_line(step))

    Loop(cfg).run(on_round)
    log.info("results: %s (metrics.jsonl, plots/*.png, round-NNN/)", cfg.run_dir)


main = entry(app, "spade-loop")
