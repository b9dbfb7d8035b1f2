"""Settings declared once: a dataclass field per option, carrying its default, type,
bounds, choices, help text and command-line flags.

    @dataclass
    class ValidateSettings:
        seeds: int = option(3, "--seeds", min=1, max=64, help="Reset seeds per environment.")

From that one declaration come the Typer option of the command (`cli.stage_command`),
the `[validate]` table of the loop's TOML config and of `--config FILE`, the
flags the loop writes when it runs the stage (`to_argv`), and the rows of
`spade-loop --show-config`. A settings class may nest another (a shared group such as
sampling) in a field: its fields are flattened into the same flags and the same table,
with the defaults of the nesting class's instance.

This module is the Typer-free half: declaring, checking and converting settings. It
also reads users' TOML files.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError


@dataclass(frozen=True)
class Opt:
    """What a field declares beyond its default and type."""

    flags: tuple[str, ...]
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    cli: bool = True
    """False: a field of the loop's config only (no command-line flag)."""
    metavar: str | None = None


def option(
    default: Any = dataclasses.MISSING,
    *flags: str,
    help: str,
    min: float | None = None,
    max: float | None = None,
    choices: tuple[str, ...] | None = None,
    cli: bool = True,
    metavar: str | None = None,
    factory: Any = dataclasses.MISSING,
) -> Any:
    """A settings field. `flags` default to `--field-name`; a list default needs `factory`."""
    meta = {"spade": Opt(tuple(flags), " ".join(help.split()), min, max, choices, cli, metavar)}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def group(cls: type, **defaults: Any) -> Any:
    """A nested settings group whose fields are flattened into the nesting class, with
    these defaults (for example the sampling settings of one stage)."""
    return dataclasses.field(default_factory=lambda: cls(**defaults))


@dataclass(frozen=True)
class Field:
    """One flattened option of a settings class."""

    path: tuple[str, ...]
    """Attribute path from the top class: ("sampling", "temperature")."""
    type: Any
    default: Any
    opt: Opt

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def flags(self) -> tuple[str, ...]:
        return self.opt.flags or ("--" + self.name.replace("_", "-"),)

    @property
    def long_flag(self) -> str:
        first = next((f for f in self.flags if f.startswith("--")), self.flags[0])
        return first.split("/")[0]


def fields_of(cls: type, instance: Any = None) -> list[Field]:
    """Every option of a settings class, nested groups flattened, in declaration order."""
    hints = typing.get_type_hints(cls)
    obj = instance if instance is not None else cls()
    out: list[Field] = []
    for f in dataclasses.fields(cls):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            out += [
                dataclasses.replace(sub, path=(f.name, *sub.path))
                for sub in fields_of(hints[f.name], value)
            ]
        elif "spade" in f.metadata:
            out.append(Field((f.name,), hints[f.name], value, f.metadata["spade"]))
    return out


def get(obj: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        obj = getattr(obj, name)
    return obj


def build(cls: type, values: dict[str, Any]) -> Any:
    """An instance of `cls` from flattened values by field name; missing ones keep the
    defaults."""
    base = cls()
    return _rebuild(cls, base, values)


def _rebuild(cls: type, base: Any, values: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        current = getattr(base, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            kwargs[f.name] = _rebuild(hints[f.name], current, values)
        elif f.name in values:
            kwargs[f.name] = values[f.name]
    return dataclasses.replace(base, **kwargs)


# --------------------------------------------------------------------------- checking


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(the type without `| None`, whether None is allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), True
    return tp, False


def coerce(where: str, value: Any, tp: Any) -> Any:
    """A TOML value checked against the field's type; ints are accepted for floats."""
    tp, nullable = _base_type(tp)
    if value is None and nullable:
        return None
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise UsageError(f"{where}: expected a list, got {type(value).__name__}")
        return [coerce(f"{where}[{i}]", v, item) for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool) and type(value) is not tp:
        raise UsageError(f"{where}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return value


def check(obj: Any, where: str = "", style: str = "flag") -> Any:
    """Bounds and choices of every field; errors name the flag (or `table.field`)."""
    for f in fields_of(type(obj), obj):
        value = get(obj, f.path)
        name = f.long_flag if style == "flag" else f"'{where}{f.name}'"
        if value is None or isinstance(value, bool):
            continue
        values = value if isinstance(value, list) else [value]
        for v in values:
            if f.opt.choices is not None and v not in f.opt.choices:
                raise UsageError(f"{name} must be one of {', '.join(f.opt.choices)}, got {v!r}")
            if isinstance(v, int | float) and f.opt.min is not None and v < f.opt.min:
                raise UsageError(f"{name} must be at least {f.opt.min:g}, got {v}")
            if isinstance(v, int | float) and f.opt.max is not None and v > f.opt.max:
                raise UsageError(f"{name} must be at most {f.opt.max:g}, got {v}")
    return obj


def table_values(
    cls: type,
    table: dict[str, Any],
    source: str,
    where: str,
    ignore: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The values one TOML table gives, by field name, checked. Keys are field names;
    the long flag's spelling (`num-designs`) is accepted too. Unknown keys (bar
    `ignore`) and bad values are errors that name the field."""
    by_key: dict[str, Field] = {}
    for f in fields_of(cls):
        by_key[f.name] = f
        by_key.setdefault(f.long_flag.removeprefix("--").replace("-", "_"), f)
    values: dict[str, Any] = {}
    spelt: dict[str, str] = {}  # field name -> the key as the file spells it
    for key, value in table.items():
        name = key.replace("-", "_")
        if name in ignore:
            continue
        f = by_key.get(name)
        if f is None:
            raise UsageError(
                f"{at(source, where + key)}: unknown field {where + key!r}"
                + did_you_mean(name, by_key)
            )
        spelt[f.name] = key
        try:
            values[f.name] = coerce(repr(where + key), value, f.type)
        except UsageError as e:
            raise UsageError(f"{at(source, where + key)}: {e}") from None
    try:
        check(build(cls, values), where, style="field")
    except UsageError as e:
        # The line of the field the message names.
        key = next((k for n, k in spelt.items() if f"'{where}{n}'" in str(e)), None)
        raise UsageError(f"{at(source, where + key) if key else source}: {e}") from None
    return values


def from_table(cls: type, table: dict[str, Any], source: str, where: str) -> Any:
    return build(cls, table_values(cls, table, source, where))


# --------------------------------------------------------------------------- argv


def to_argv(obj: Any) -> list[str]:
    """The command-line flags that give a command these settings: every field that
    differs from its declared default (loop-only fields have no flag and are skipped)."""
    cls = type(obj)
    defaults = {f.path: f.default for f in fields_of(cls)}
    argv: list[str] = []
    for f in fields_of(cls, obj):
        if not f.opt.cli:
            continue
        value = get(obj, f.path)
        if value == defaults[f.path]:
            continue
        flag = f.long_flag
        if isinstance(value, bool):
            pos, _, neg = f.flags[0].partition("/")
            if value:
                argv.append(pos)
            elif neg:
                argv.append(neg)
            else:
                raise ValueError(f"{flag}: cannot be turned off on the command line")
        elif isinstance(value, list):
            for v in value:
                argv += [flag, _text(v)]
        elif value is None:
            raise ValueError(
                f"{flag}: None differs from the default {defaults[f.path]!r} and has no flag"
            )
        else:
            argv += [flag, _text(value)]
    return argv


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def rows(obj: Any, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """(table.field, value, help) rows for `--show-config` and the docs."""
    for f in fields_of(type(obj), obj):
        yield prefix + f.name, repr(f.default), f.opt.help


# --------------------------------------------------------------------------- TOML


def did_you_mean(name: str, known: typing.Iterable[str]) -> str:
    """ " (did you mean 'x'?)" for the known name closest to a misspelt one, else ""."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def at(source: str, dotted: str) -> str:
    """`source:LINE` where the TOML file `source` sets `table.key` (or a top-level key),
    else `source`: tomllib's values carry no positions, so the line is found in the text."""
    try:
        lines = Path(source).read_text().splitlines()
    except (OSError, ValueError):
        return source
    table, _, key = dotted.rpartition(".")
    current = ""
    for number, line in enumerate(lines, 1):
        header = re.match(r"\s*\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1).strip('"')
        elif current == table and re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return f"{source}:{number}"
    return source


def read_toml(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """A user's TOML file; a missing file or bad TOML is a one-line usage error."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: {what} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: bad TOML ({e})") from None
