"""What every command shares: options, config files, logging, progress, errors.

A command module builds its Typer app with `make_app`, declares its options with the
`Annotated` aliases below (so `--seed` or `-o` mean the same everywhere), and exposes
`main = entry(app, "spade-<name>")`. `entry` turns every known failure into one line
`spade-<name>: error: <problem>` on stderr and a documented exit code (see errors.py);
the traceback is shown only with `-v` or `SPADE_DEBUG=1`.
"""

from __future__ import annotations

import logging
import os
import sys
import tomllib
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from . import timing
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, PipeClosed, SpadeError, UsageError
from .recordio import RecordWriter
from .records import in_shard, parse_shard

log = logging.getLogger("spade")
T = TypeVar("T")

_state = {"verbose": 0, "quiet": False, "prog": "spade"}


# --------------------------------------------------------------------------- options


def _set_verbose(value: int) -> int:
    _state["verbose"] = value or 0
    _apply_log_level()
    return value


def _set_quiet(value: bool) -> bool:
    _state["quiet"] = bool(value)
    _apply_log_level()
    return value


def read_toml(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """A user's TOML file; a missing file or bad TOML is a one-line usage error."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: {what} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: bad TOML ({e})") from None


def _load_config(ctx: typer.Context, param: Any, value: Path | None) -> Path | None:
    """Read option defaults from TOML. Keys are option names (`num-designs` or
    `num_designs`); a table named after the command (`[design]`) is used if present."""
    if value is None:
        return value
    data = read_toml(value)
    section = _state["prog"].removeprefix("spade-")
    table = data.get(section, data.get(section.replace("-", "_")))
    if not isinstance(table, dict):
        table = {k: v for k, v in data.items() if not isinstance(v, dict)}
    params = {p.name: p for p in ctx.command.params if p.name}
    defaults: dict[str, Any] = {}
    for key, val in table.items():
        name = key.replace("-", "_")
        if name not in params or name == "config":
            raise UsageError(f"{value}: unknown option {key!r} for {_state['prog']}")
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
Seed = Annotated[int, typer.Option("--seed", help="Random seed; per-record randomness derives from it.")]
Shard = Annotated[
    str | None,
    typer.Option("--shard", help="Process only shard i of n (`i/n`), split by a hash of record ids."),
]
Limit = Annotated[
    int | None, typer.Option("--limit", min=0, help="Process at most this many input records.")
]
Config = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML file of option defaults (keys are option names); command-line flags win.",
        is_eager=True,
        callback=_load_config,
    ),
]
Verbose = Annotated[
    int,
    typer.Option(
        "-v", "--verbose", count=True, is_eager=True, callback=_set_verbose,
        help="More detail on stderr; also shows tracebacks.",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option("-q", "--quiet", is_eager=True, callback=_set_quiet, help="Only errors on stderr; no progress bars."),
]


# --------------------------------------------------------------------------- app + entry


def make_app(help: str) -> typer.Typer:
    return typer.Typer(
        help=help,
        add_completion=False,
        pretty_exceptions_enable=False,
        no_args_is_help=False,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING:
            msg = f"{record.levelname.lower()}: {msg}"
        return f"{_state['prog']}: {msg}"


def _apply_log_level() -> None:
    if _state["quiet"]:
        log.setLevel(logging.ERROR)
    elif _state["verbose"] >= 1:
        log.setLevel(logging.DEBUG)
    else:
        log.setLevel(logging.INFO)


def setup_logging(prog: str) -> None:
    _state["prog"] = prog
    if not any(getattr(h, "_spade", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Formatter())
        handler._spade = True  # type: ignore[attr-defined]
        log.addHandler(handler)
        log.propagate = False
    _apply_log_level()


def verbosity_args() -> list[str]:
    """The -q / -v flags of this command, for the commands it starts."""
    if _state["quiet"]:
        return ["-q"]
    return ["-v"] * _state["verbose"]


def debug_enabled() -> bool:
    return _state["verbose"] > 0 or os.environ.get("SPADE_DEBUG", "") not in ("", "0")


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


def select(records: Iterable[dict], shard: str | None = None, limit: int | None = None) -> Iterator[dict]:
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


def progress(it: Iterable[T], desc: str, total: int | None = None, unit: str = "rec") -> Iterable[T]:
    """A tqdm bar on stderr, only when stderr is a terminal and not --quiet."""
    from tqdm import tqdm

    disable = _state["quiet"] or not sys.stderr.isatty()
    return tqdm(it, desc=desc, total=total, unit=unit, disable=disable, file=sys.stderr, leave=False)


def progress_bar(desc: str, total: int | None = None, unit: str = "it") -> Any:
    from tqdm import tqdm

    disable = _state["quiet"] or not sys.stderr.isatty()
    return tqdm(desc=desc, total=total, unit=unit, disable=disable, file=sys.stderr, leave=False)
