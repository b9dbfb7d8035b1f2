"""spade-export: write validated environments as OpenEnv servers, a verifiers module or
Harbor tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..cli import Config, Inputs, Limit, Quiet, Shard, Verbose, entry, log, make_app, select
from ..errors import UsageError
from ..recordio import RecordReader

app = make_app(
    "Export every valid environment of the input (candidate records, or a memory file's env "
    "records), or those the selection keeps, into the directory -o in another ecosystem's "
    "format:\n\n"
    "openenv: one OpenEnv server directory per environment (openenv.yaml, server/app.py, "
    "pyproject.toml); TRL and TorchRL train on it.\n\n"
    "verifiers: one Python package (pyproject.toml, load_environment()) holding the whole "
    "pool as a verifiers taskset; prime-rl trains on it, `vf-eval` / `prime eval` evaluate it.\n\n"
    "harbor: one Harbor task directory per environment (task.toml, instruction.md, "
    "environment/Dockerfile, tests/test.sh, solution/solve.sh: the episode's own solution "
    "as the oracle).\n\n"
    "Every exported environment runs its code in spade's bubblewrap sandbox, never in the "
    "process that serves or scores it, and keeps the candidate's id, skill, hint, solutions "
    "and scores in spade/spade.json; its rewards add up to the return spade's replay gives. "
    "Both contracts (ours and --contract published) export. The directory's records read "
    "back with spade-cat --from DIR. The paths written go to stdout, one a line.\n\n"
    "Example: spade-export memory.jsonl.zst --format openenv --min-regret 0.2 -o pool-openenv/"
)

Format = Annotated[str, typer.Option("--format", "-f", help="openenv, verifiers or harbor.")]


@app.command()
def export(
    inputs: Inputs = None,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="The directory to write (created; existing exports in it are replaced).",
        ),
    ] = "",
    fmt: Format = "",
    skill: Annotated[
        list[str] | None,
        typer.Option("--skill", help="Keep environments of this skill (repeatable)."),
    ] = None,
    min_regret: Annotated[
        float | None, typer.Option("--min-regret", help="Keep regret >= this.")
    ] = None,
    max_regret: Annotated[
        float | None, typer.Option("--max-regret", help="Keep regret <= this.")
    ] = None,
    win_rate: Annotated[
        str | None,
        typer.Option(
            "--win-rate",
            help="Keep a no-hint success rate in LO:HI (score.nohint, else the "
            "rollouts' summary), e.g. 0.2:0.8.",
        ),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            min=1,
            help="Seeds recorded per environment (the validation seeds by default; "
            "Harbor's task plays the first).",
        ),
    ] = None,
    shard: Shard = None,
    limit: Limit = None,
    config: Config = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    from ..export import FORMATS, Selection, export_pool

    if fmt not in FORMATS:
        raise UsageError(
            f"--format must be one of {', '.join(FORMATS)}" + (f", got {fmt!r}" if fmt else "")
        )
    if not output or output == "-":
        raise UsageError("-o DIR is required (an export is a directory)")
    selection = Selection(
        skills=skill,
        min_regret=min_regret,
        max_regret=max_regret,
        win_rate=Selection.parse_band(win_rate),
    )
    reader = RecordReader(inputs or ["-"], kind=("candidate", "env"))
    written = export_pool(
        select(reader, shard, limit), fmt, Path(output), selection, seeds, log=log
    )
    for path in written:
        typer.echo(str(path))
    log.info("exported %d environments as %s to %s", len(written), fmt, output)


main = entry(app, "spade-export")
