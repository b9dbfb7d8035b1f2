"""Write every command's option table into its docs page, from the code's own declarations.

    python3 docs/gen_options.py           # rewrite the tables in docs/commands/*.md
    python3 docs/gen_options.py --check   # exit 1, naming the pages, when one is stale

The commands are pyproject's `[project.scripts]`; each one's options are read from its
Typer app (so run-time arguments are listed as well as the settings declared in
`spade_cli/options.py`, `engines/options.py` and `sandbox/options.py`), with the config
key of every option that a settings class declares. `spade-loop`'s page also gets every
field of the run config (`loop.config.describe_fields`, what `--show-config` prints).
A table sits between `<!-- options:begin -->` and `<!-- options:end -->` (the loop's config
between `<!-- config:begin -->` and `<!-- config:end -->`); the prose around it is written by
hand and left alone.
"""

from __future__ import annotations

import ast
import importlib
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "commands"
BLOCKS = {"options": "<!-- options:{} -->", "config": "<!-- config:{} -->"}


@dataclass(frozen=True)
class Row:
    flags: str
    default: str
    key: str
    help: str


def commands() -> dict[str, str]:
    """Command name -> entry point (`module:function`), from pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["project"]["scripts"])


def click_command(entry_point: str):
    import typer.main

    module = importlib.import_module(entry_point.partition(":")[0])
    return typer.main.get_command(module.app)


def page_path(name: str) -> Path:
    return PAGES / f"{name}.md"


def format_default(value) -> str:
    """A default as the tables show it: TOML's spelling in a code span, empty when unset."""
    if value is None or value == [] or value == ():
        return ""
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list | tuple):
        return "`" + ", ".join(map(str, value)) + "`"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def _cell(text: str) -> str:
    # Table cells: a `|` would split the cell, a `<` would open an HTML tag.
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _range(param) -> str:
    lo, hi = getattr(param.type, "min", None), getattr(param.type, "max", None)
    if lo is not None and hi is not None:
        return f" (from {lo:g} to {hi:g})"
    if lo is not None:
        return f" (at least {lo:g})"
    return f" (at most {hi:g})" if hi is not None else ""


def config_keys(command) -> dict[str, str]:
    """Option name -> `table.field`, its config key, for the options a settings class
    declares (the rest are run-time arguments, set on the command line only)."""
    from spade_cli import declare as st

    groups = getattr(command.callback, "_spade_groups", {})
    return {
        f.name: f"`{cls.TABLE}.{f.name}`"
        for cls in groups.values()
        for f in st.fields_of(cls)
        if f.opt.cli
    }


def rows(command) -> list[Row]:
    """One row per argument and option of a click command, `--help` left out."""
    keys = config_keys(command)
    out = []
    for p in command.params:
        if p.param_type_name == "argument":
            many = p.nargs == -1 or p.multiple
            flags = p.name.upper() + ("..." if many else "")
            # Optional input files read stdin when none are given.
            default = "stdin" if many and not p.required else format_default(p.default)
        else:
            if "--help" in p.opts:
                continue
            flags = ", ".join(p.opts) + "".join(f" / {o}" for o in p.secondary_opts)
            default = format_default(p.default)
            if p.is_flag and not p.secondary_opts and p.default in (None, False):
                default = "`false`"
        out.append(
            Row(f"`{flags}`", default, keys.get(p.name, ""), _cell((p.help or "") + _range(p)))
        )
    return out


def table(rs: list[Row], with_keys: bool) -> list[str]:
    if with_keys:
        head = ["| option | default | config key | meaning |", "|---|---|---|---|"]
        return head + [f"| {r.flags} | {r.default} | {r.key} | {r.help} |" for r in rs]
    head = ["| option | default | meaning |", "|---|---|---|"]
    return head + [f"| {r.flags} | {r.default} | {r.help} |" for r in rs]


def options_block(name: str, entry_point: str) -> str:
    """The generated option tables of one command (one per subcommand of a group)."""
    cmd = click_command(entry_point)
    parts = []
    # A command with subcommands (spade-memory) is a group: one table per subcommand.
    subs = cmd.commands.items() if hasattr(cmd, "commands") else [(None, cmd)]
    for sub, c in subs:
        rs = rows(c)
        if sub is not None:
            summary = (c.help or "").strip().split("\n")[0]
            parts += [f"### `{name} {sub}`", "", _cell(summary), ""]
        parts += table(rs, with_keys=any(r.key for r in rs)) + [""]
    note = (
        f"Generated by `docs/gen_options.py` from `{name} --help`'s declarations; "
        "an empty default means unset."
    )
    return "\n".join([note, "", *parts]).rstrip() + "\n"


def config_block() -> str:
    """Every field of spade-loop's run config, as `--show-config` prints it."""
    from spade_cli.loop.config import describe_fields

    out = ["| key | default | meaning |", "|---|---|---|"]
    for key, default, doc in describe_fields():
        try:  # the rows hold Python reprs; the page shows TOML's spelling
            value = format_default(ast.literal_eval(default))
        except (ValueError, SyntaxError):
            value = f"`{default}`"
        out.append(f"| `{key}` | {value} | {_cell(doc)} |")
    return "\n".join(out) + "\n"


def splice(text: str, block: str, content: str, where: str) -> str:
    """`text` with the part between the block's markers replaced by `content`."""
    begin, end = (BLOCKS[block].format(m) for m in ("begin", "end"))
    if begin not in text or end not in text:
        raise SystemExit(f"{where}: no {begin} ... {end} block")
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{content}{end}{tail}"


def render(name: str, entry_point: str, text: str) -> str:
    """A command page's text with its generated blocks brought up to date."""
    where = str(page_path(name).relative_to(ROOT))
    text = splice(text, "options", options_block(name, entry_point), where)
    if name == "spade-loop":
        text = splice(text, "config", config_block(), where)
    return text


def stale_pages() -> list[str]:
    """Pages whose generated tables differ from the code (or that are missing)."""
    stale = []
    for name, entry_point in commands().items():
        path = page_path(name)
        if not path.exists():
            stale.append(f"{path.relative_to(ROOT)}: missing (every command has a page)")
        elif render(name, entry_point, path.read_text()) != path.read_text():
            stale.append(f"{path.relative_to(ROOT)}: option table out of date")
    return stale


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    if "--check" in argv:
        stale = stale_pages()
        for line in stale:
            print(f"gen_options: {line} (run: just docs)", file=sys.stderr)
        return 1 if stale else 0
    for name, entry_point in commands().items():
        path = page_path(name)
        if not path.exists():
            print(
                f"gen_options: {path.relative_to(ROOT)}: missing; write its page first",
                file=sys.stderr,
            )
            return 1
        text = path.read_text()
        new = render(name, entry_point, text)
        if new != text:
            path.write_text(new)
            print(f"gen_options: updated {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
