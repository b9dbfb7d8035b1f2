"""Settings declared once: every command's options, the loop config and the flags the loop
writes come from the same fields, so they cannot disagree."""

from __future__ import annotations

import dataclasses
import importlib

import click
import pytest
import typer

from spade_cli import declare as st
from spade_cli.commands import COMMANDS
from spade_cli.errors import UsageError
from spade_cli.loop.config import STAGE_TABLES, LoopConfig, load_config

from .helpers import run_cli

# The command each loop table configures (and the other tables it also reads).
STAGE_COMMANDS = {
    "spade-sample-docs": ["corpus"],
    "spade-design": ["design", "model"],
    "spade-validate": ["validate", "sandbox"],
    "spade-rollout": ["rollout", "model", "sandbox"],
    "spade-regret": ["regret"],
    "spade-train": ["train"],
    "spade-eval": ["eval", "model", "sandbox"],
}


def click_command(prog: str) -> click.Command:
    module = importlib.import_module(COMMANDS[prog])
    return typer.main.get_command(module.app)


@pytest.mark.parametrize("prog", sorted(STAGE_COMMANDS))
def test_every_option_default_is_the_loop_configs(prog):
    params = {p.name: p for p in click_command(prog).params}
    cfg = LoopConfig()
    checked = 0
    for table in STAGE_COMMANDS[prog]:
        for f in st.fields_of(STAGE_TABLES[table], getattr(cfg, table)):
            if not f.opt.cli:
                # Two share a name with a run-time option of their command, which the loop
                # fills from them: rollout.replay (the replayed environments spade-rollout
                # --replay reads) and eval.seed (spade-eval --seed).
                ok = f.name not in params or (table, f.name) in (
                    ("rollout", "replay"),
                    ("eval", "seed"),
                )
                assert ok, f"{prog}: {f.name} is loop-only"
                continue
            assert f.name in params, f"{prog} has no option for {table}.{f.name}"
            default = params[f.name].default
            if isinstance(f.default, list):  # click keeps a list option's default as given
                default = list(default or [])
            assert default == f.default, (
                f"{prog} {f.long_flag}: {default!r} != loop {table}.{f.name} {f.default!r}"
            )
            checked += 1
    assert checked >= 3


def _changed(obj):
    """A copy of a settings object with every command-line field set to a non-default."""
    values = {}
    for f in st.fields_of(type(obj), obj):
        if not f.opt.cli:
            continue
        tp, _ = st._base_type(f.type)
        if f.opt.choices:
            values[f.name] = next(c for c in f.opt.choices if c != f.default)
        elif tp is bool:
            if "/" in f.flags[0] or not f.default:
                values[f.name] = not bool(f.default)
        elif tp is int:
            values[f.name] = int(max(f.opt.min or 0, 1) + 2 + (f.default or 0))
            if f.opt.max is not None:
                values[f.name] = int(f.opt.max)
        elif tp is float:
            values[f.name] = f.opt.max if f.opt.max is not None else (f.default or 0.5) + 0.25
        elif tp is str:
            values[f.name] = "x,y" if f.name == "clip" else f"value-{f.name}"
        elif typing_list(tp):
            values[f.name] = ["a", "b"]
    return st.build(type(obj), values)


def typing_list(tp) -> bool:
    import typing

    return typing.get_origin(tp) is list


@pytest.mark.parametrize("prog", sorted(STAGE_COMMANDS))
def test_flags_the_loop_writes_parse_back_to_the_same_settings(prog):
    """to_argv(settings) given to the command yields exactly those settings."""
    cmd = click_command(prog)
    cfg = LoopConfig()
    argv: list[str] = []
    wanted = {}
    for table in STAGE_COMMANDS[prog]:
        obj = _changed(getattr(cfg, table))
        argv += st.to_argv(obj)
        wanted.update(
            {f.name: st.get(obj, f.path) for f in st.fields_of(type(obj), obj) if f.opt.cli}
        )
    ctx = cmd.make_context(prog, list(argv), resilient_parsing=True)
    for name, value in wanted.items():
        got = ctx.params[name]
        assert (list(got) if isinstance(got, tuple) else got) == value, (name, got, value)


def test_to_argv_writes_only_what_differs():
    cfg = LoopConfig()
    assert st.to_argv(cfg.design) == []
    changed = dataclasses.replace(
        cfg.design,
        designs_per_doc=8,
        no_doc=True,
        sampling=dataclasses.replace(cfg.design.sampling, temperature=0.6),
    )
    assert st.to_argv(changed) == ["--num-designs", "8", "--temperature", "0.6", "--no-doc"]
    assert st.to_argv(dataclasses.replace(cfg.regret, dedup=False)) == ["--no-dedup"]


def test_a_run_config_serves_a_single_stage(tmp_path, tiny_model):
    """`--config` reads the command's tables of a loop config and ignores the loop's own."""
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        'name = "x"\n[design]\ndesigns_per_doc = 3\nextra_args = ["-v"]\n'
        '[model]\nengine = "hf"\n[rollout]\nreplay = 9\nepisodes = 5\n'
    )
    cmd = click_command("spade-design")
    ctx = cmd.make_context("spade-design", ["--config", str(cfg)], resilient_parsing=False)
    assert ctx.params["designs_per_doc"] == 3 and ctx.params["engine"] == "hf"
    ctx = click_command("spade-rollout").make_context(
        "spade-rollout", ["--config", str(cfg), "-k", "7"]
    )
    assert (
        ctx.params["episodes"] == 7 and not ctx.params["replay"]
    )  # flags win; replay is the loop's
    bad = tmp_path / "bad.toml"
    bad.write_text("[design]\nnum_designz = 3\n")
    r = run_cli("design", "--config", bad, input=b"")
    assert r.returncode == 2 and b"unknown field 'design.num_designz'" in r.stderr, r.stderr


def test_bounds_and_choices_are_checked_in_the_loop_config_and_on_the_command_line(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[validate]\nseeds = 0\n")
    with pytest.raises(UsageError, match="'validate.seeds' must be at least 1"):
        load_config(str(path))
    r = run_cli("regret", "--estimator", "median", input=b"")
    assert r.returncode == 2 and b"--estimator must be one of" in r.stderr, r.stderr


def test_one_declaration_per_flag():
    """No two fields of one command share a flag (stage_command refuses duplicates too)."""
    for prog, tables in STAGE_COMMANDS.items():
        seen: dict[str, str] = {}
        for table in tables:
            for f in st.fields_of(STAGE_TABLES[table]):
                if not f.opt.cli:
                    continue
                for flag in f.flags:
                    for part in flag.split("/"):
                        assert part not in seen, (
                            f"{prog}: {part} is {seen[part]} and {table}.{f.name}"
                        )
                        seen[part] = f"{table}.{f.name}"
