"""Commands start without the heavy libraries: importing a command module, asking it for
--help, or giving a record command an empty input must not import torch, numpy,
gymnasium, transformers, pyarrow or matplotlib (they cost seconds; the commands are Unix
tools run in shell loops). Timings are in
bench/bench_startup.py; this checks what is imported, in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spade_cli.commands import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "numpy", "gymnasium", "transformers", "pyarrow", "matplotlib")
SHARED = [
    "spade_cli.cli",
    "spade_cli.declare",
    "spade_cli.stage_settings",
    "spade_cli.engines.base",
    "spade_cli.engines.settings",
    "spade_cli.sandbox.settings",
    "spade_cli.logs",
    "spade_cli.recordio",
    "spade_cli.records",
]

# Imports the modules one after another and reports, for each, the heavy modules that
# appeared with it: the first module named is the one that pulled them in.
PROBE = """
import contextlib, importlib, io, json, sys
heavy, found = {heavy!r}, {{}}
def check(what):
    new = [h for h in heavy if h in sys.modules and not any(h in v for v in found.values())]
    if new:
        found[what] = new
for name in {modules!r}:
    importlib.import_module(name)
    check(name)
for name in {commands!r}:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        importlib.import_module(name).main(["--help"])
    check(name + " --help")
for name, argv in {runs!r}:
    with contextlib.suppress(SystemExit):
        importlib.import_module(name).main(argv)  # stdin is empty
    check(name + " " + " ".join(argv) + " </dev/null")
print(json.dumps(found))
"""


def _probe(
    modules: list[str], commands: list[str], runs: list[tuple[str, list[str]]] = ()
) -> dict[str, list[str]]:
    code = PROBE.format(heavy=HEAVY, modules=modules, commands=commands, runs=list(runs))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_command_modules_and_help_import_no_heavy_library():
    modules = SHARED + sorted(COMMANDS.values())
    assert _probe(modules, sorted(COMMANDS.values())) == {}


def test_record_commands_on_empty_input_import_no_heavy_library():
    runs = [
        ("spade_cli.commands.cat", []),
        ("spade_cli.commands.sample_docs", ["-n", "3"]),
        ("spade_cli.commands.regret", []),
    ]
    assert _probe([], [], runs) == {}


def test_probe_sees_a_heavy_import():
    # The check itself can fail: a module that imports numpy is reported by name.
    assert _probe(["spade_cli.declare", "numpy"], []) == {"numpy": ["numpy"]}
