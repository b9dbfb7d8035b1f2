"""What every command shares: options, config files, errors; the Typer layer.

A command module builds its Typer app with `make_app`, declares its run-time arguments
with the `Annotated` aliases below (so `--seed` or `-o` mean the same everywhere), takes
its settings groups through `stage_command` (their options come from the settings
dataclasses, `declare.py`), and exposes `main = entry(app, "spade-<name>")`. `entry`
turns every known failure into one line `spade-<name>: error: <problem>` on stderr and a
documented exit code (see errors.py); the traceback is shown only with `-v` or
`SPADE_DEBUG=1`. Logging and progress bars live in `logs.py` (Typer-free).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from . import declare as st
from . import timing
from .declare import read_toml
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, PipeClosed, SpadeError, UsageError
from .logs import debug_enabled, log, prog, progress, progress_bar, set_verbosity, setup_logging
from .recordio import RecordWriter
from .records import in_shard, parse_shard

__all__ = ["log", "progress", "progress_bar", "read_toml", "setup_logging"]

# --------------------------------------------------------------------------- options


def _set_verbose(value: int) -> int:
    set_verbosity(verbose=value)
    return value


def _set_quiet(value: bool) -> bool:
    set_verbosity(quiet=value)
    return value


def _load_config(ctx: typer.Context, param: Any, value: Path | None) -> Path | None:
    """Option defaults from TOML: the tables of the command's settings groups (`[design]`,
    `[model]`, `[sandbox]`: the layout of spade-loop's config, so a run's config file
    serves a single stage too); for a command without groups, its own table (`[cat]`) or
    top-level keys."""
    if value is None:
        return value
    data = read_toml(value)
    params = {p.name for p in ctx.command.params if p.name and p.name != "config"}
    groups: dict[str, type] = getattr(ctx.command.callback, "_spade_groups", {})
    defaults: dict[str, Any] = {}
    tables = {cls.TABLE: cls for cls in groups.values() if isinstance(data.get(cls.TABLE), dict)}
    for table, cls in tables.items():
        # A loop config's table also holds the loop's own fields (extra_args, cli=False).
        values = st.table_values(cls, data[table], str(value), f"{table}.", ignore={"extra_args"})
        cli_names = {f.name for f in st.fields_of(cls) if f.opt.cli}
        defaults.update({k: v for k, v in values.items() if k in cli_names})
    if not tables:
        # A command without settings groups: its own table (`[cat]`), else top-level keys.
        own = data.get(prog().removeprefix("spade-"))
        plain = own if isinstance(own, dict) else data
        for key, val in plain.items():
            if isinstance(val, dict):
                continue
            name = key.replace("-", "_")
            if name not in params:
                raise UsageError(f"{value}: unknown option {key!r} for {prog()}")
            defaults[name] = val
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


Inputs = Annotated[
    list[str] | None,
    typer.Argument(
        help="Input record files (JSONL, plain/gzip/zstd, detected from content). "
        "None or `-` reads stdin.",
        show_default=False,
    ),
]
Output = Annotated[
    str,
    typer.Option(
        "-o",
        "--output",
        help="Output file, written atomically; `.zst` is zstd, `.gz` gzip. `-` is stdout "
        "(plain JSONL unless --zstd).",
    ),
]
Zstd = Annotated[bool, typer.Option("--zstd", help="Compress records written to stdout with zstd.")]
Seed = Annotated[
    int, typer.Option("--seed", help="Random seed; per-record randomness derives from it.")
]
Shard = Annotated[
    str | None,
    typer.Option(
        "--shard", help="Process only shard i of n (`i/n`), split by a hash of record ids."
    ),
]
Limit = Annotated[
    int | None, typer.Option("--limit", min=0, help="Process at most this many input records.")
]
Config = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML file of option defaults: the command's tables of a spade-loop config "
        "(e.g. [design], [model], [sandbox]), or top-level keys named after options. "
        "Command-line flags win.",
        is_eager=True,
        callback=_load_config,
    ),
]
Verbose = Annotated[
    int,
    typer.Option(
        "-v",
        "--verbose",
        count=True,
        is_eager=True,
        callback=_set_verbose,
        help="More detail on stderr; also shows tracebacks.",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option(
        "-q",
        "--quiet",
        is_eager=True,
        callback=_set_quiet,
        help="Only errors on stderr; no progress bars.",
    ),
]


# --------------------------------------------------------------------------- app + entry


def make_app(help: str) -> typer.Typer:
    return typer.Typer(
        help=help,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain help: rendering it with rich would cost more start-up than the command.
        rich_markup_mode=None,
        no_args_is_help=False,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )


def _typer_option(f: st.Field) -> Any:
    kwargs: dict[str, Any] = {"help": f.opt.help}
    if f.opt.min is not None:
        kwargs["min"] = f.opt.min
    if f.opt.max is not None:
        kwargs["max"] = f.opt.max
    if f.opt.metavar is not None:
        kwargs["metavar"] = f.opt.metavar
    if f.opt.choices is not None:
        kwargs["help"] = f"{f.opt.help} One of: {', '.join(f.opt.choices)}."
    return Annotated[f.type, typer.Option(*f.flags, **kwargs)]


def stage_command(app: typer.Typer, **groups: type) -> Callable[[Callable], Callable]:
    """Register a command whose options come from settings classes.

    `fn` declares its run-time arguments (inputs, -o, --seed, ...) as usual and one
    keyword parameter per group (`settings=DesignSettings, engine=EngineSettings`): the
    command gets every command-line field of each group as an option, `--config`, `-v`
    and `-q`, and `fn` receives checked instances of the groups."""

    def register(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name not in groups]
        taken = {p.name for p in own}
        fields: dict[str, list[st.Field]] = {}
        params = list(own)
        for key, cls in groups.items():
            fields[key] = [f for f in st.fields_of(cls) if f.opt.cli]
            for f in fields[key]:
                if f.name in taken:
                    raise TypeError(f"{fn.__name__}: option {f.name!r} declared twice")
                taken.add(f.name)
                params.append(
                    inspect.Parameter(
                        f.name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=f.default,
                        annotation=_typer_option(f),
                    )
                )
        for name, alias in (("config", Config), ("verbose", Verbose), ("quiet", Quiet)):
            if name not in taken:
                default = None if name == "config" else (0 if name == "verbose" else False)
                params.append(
                    inspect.Parameter(
                        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=alias
                    )
                )
        own_names = {p.name for p in own}

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            built = {}
            for key, cls in groups.items():
                values = {f.name: kwargs[f.name] for f in fields[key]}
                built[key] = st.check(st.build(cls, values))
            return fn(**{k: v for k, v in kwargs.items() if k in own_names}, **built)

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # Typer must see the new signature, not fn's
        command._spade_groups = groups  # type: ignore[attr-defined]
        app.command()(command)
        return fn

    return register


def _fail(prog: str, message: str, code: int) -> None:
    sys.stderr.write(f"{prog}: error: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def _silence_stdout() -> None:
    # The reader left; point stdout at /dev/null so interpreter shutdown cannot
    # raise BrokenPipeError again while flushing.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def entry(app: typer.Typer, prog: str) -> Callable[[], None]:
    """The console-script function of a command."""

    def main(argv: list[str] | None = None) -> None:
        setup_logging(prog)
        try:
            _run(argv)
        finally:
            timing.report(prog)

    def _run(argv: list[str] | None) -> None:
        try:
            app(args=argv, prog_name=prog, standalone_mode=False)
        except PipeClosed:
            _silence_stdout()
            sys.exit(0)
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(0)
        except typer.Exit as e:
            sys.exit(e.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            _fail(prog, "interrupted", EXIT_INTERRUPTED)
        except SpadeError as e:
            if debug_enabled():
                traceback.print_exc()
            _fail(prog, str(e), e.exit_code)
        except Exception as e:  # noqa: BLE001 - last resort: one line, not a wall of text
            if hasattr(e, "format_message") and hasattr(e, "exit_code"):  # click usage errors
                _fail(prog, f"{e.format_message()} (try {prog} --help)", e.exit_code)
            if debug_enabled():
                traceback.print_exc()
                _fail(prog, f"internal error: {type(e).__name__}: {e}", EXIT_INTERNAL)
            _fail(
                prog,
                f"internal error: {type(e).__name__}: {e} (set SPADE_DEBUG=1 for the traceback)",
                EXIT_INTERNAL,
            )

    return main


# --------------------------------------------------------------------------- helpers


def open_output(output: str, zstd: bool = False) -> RecordWriter:
    return RecordWriter(output, compress=True if zstd else None)


def peek_until(
    records: Iterable[dict], wanted: Callable[[dict], bool]
) -> tuple[Iterator[dict], bool]:
    """Read records up to the first `wanted` one before loading anything: bad input fails
    fast, and a stream without one passes through without a model. Returns every record
    (those read and the rest) and whether one was found."""
    records = iter(records)
    head: list[dict] = []
    for rec in records:
        head.append(rec)
        if wanted(rec):
            return itertools.chain(head, records), True
    return iter(head), False


def select(
    records: Iterable[dict], shard: str | None = None, limit: int | None = None
) -> Iterator[dict]:
    """Keep this shard's records (by id hash), then at most `limit` of them."""
    part = parse_shard(shard)
    n = 0
    for rec in records:
        if limit is not None and n >= limit:
            return
        if part is not None and not in_shard(str(rec.get("id", "")), part):
            continue
        n += 1
        yield rec
