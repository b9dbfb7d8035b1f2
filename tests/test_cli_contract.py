"""Behaviour every command shares: --help, bad input, stdin, config files, exit codes."""

from __future__ import annotations

import importlib
import tomllib

import orjson
import pytest

from spade_cli.commands import COMMANDS

from .helpers import ROOT, run_cli

# Commands whose main input is a stream of records (stdin when no file is given).
RECORD_READERS = [
    "spade-cat",
    "spade-design",
    "spade-validate",
    "spade-rollout",
    "spade-regret",
    "spade-train",
]


def short(prog: str) -> str:
    return prog.removeprefix("spade-")


def require(prog: str) -> None:
    importlib.import_module(COMMANDS[prog])  # every registered command must exist


def test_registry_matches_pyproject():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {name: f"{mod}:main" for name, mod in COMMANDS.items()}


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_every_command_is_documented(prog):
    require(prog)
    assert f"`{prog}`" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_help_exits_zero(prog):
    require(prog)
    r = run_cli(short(prog), "--help")
    assert r.returncode == 0, r.stderr
    assert b"Usage" in r.stdout and len(r.stdout) > 200


@pytest.mark.parametrize("prog", RECORD_READERS)
def test_malformed_stdin_fails_with_one_line_and_empty_stdout(prog):
    require(prog)
    r = run_cli(short(prog), "-", input=b'{"kind": "candidate", "id": "c-1"\n')
    assert r.returncode == 3, r.stderr
    assert r.stdout == b""
    err = r.stderr.decode().strip().splitlines()
    assert err[-1].startswith(f"{prog}: error: <stdin>:1: bad JSON"), err


@pytest.mark.parametrize("prog", RECORD_READERS)
def test_wrong_record_kind_is_rejected(prog):
    require(prog)
    if prog == "spade-cat":
        pytest.skip("spade-cat accepts every kind")
    wrong = b'{"kind": "checkpoint", "v": 1, "id": "k-1", "parents": []}\n'
    r = run_cli(short(prog), "-", input=wrong)
    assert r.returncode == 3, r.stderr
    assert r.stdout == b""
    assert b"<stdin>:1: expected a" in r.stderr


def test_dash_reads_stdin_and_writes_stdout():
    recs = [{"kind": "doc", "id": f"d{i}"} for i in range(5)]
    data = b"".join(orjson.dumps(r) + b"\n" for r in recs)
    r = run_cli("cat", "-", "-o", "-", input=data)
    assert r.returncode == 0
    assert r.stdout == data


def test_usage_error_exit_2():
    r = run_cli("cat", "--no-such-flag")
    assert r.returncode == 2
    assert r.stderr.decode().strip() == (
        "spade-cat: error: No such option: --no-such-flag (try spade-cat --help)"
    )
    r = run_cli("cat", "--shard", "3/2", input=b"")
    assert r.returncode == 2
    assert r.stderr.decode().strip() == "spade-cat: error: --shard 3/2: need 0 <= i < n"


def test_config_file_sets_defaults_and_flags_win(tmp_path):
    recs = [{"kind": "doc", "id": f"d{i}"} for i in range(10)]
    data = b"".join(orjson.dumps(r) + b"\n" for r in recs)
    cfg = tmp_path / "c.toml"
    cfg.write_text("limit = 3\n")
    r = run_cli("cat", "--config", str(cfg), input=data)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 3
    r = run_cli("cat", "--config", str(cfg), "--limit", "5", input=data)
    assert len(r.stdout.splitlines()) == 5
    cfg.write_text("[cat]\nlimit = 4\n[design]\nlimit = 1\n")
    r = run_cli("cat", "--config", str(cfg), input=data)
    assert len(r.stdout.splitlines()) == 4
    cfg.write_text("limt = 3\n")
    r = run_cli("cat", "--config", str(cfg), input=data)
    assert r.returncode == 2
    assert (
        r.stderr.decode().strip() == f"spade-cat: error: {cfg}: unknown option 'limt' for spade-cat"
    )


def test_shards_partition_records():
    recs = [{"kind": "doc", "id": f"d{i}"} for i in range(200)]
    data = b"".join(orjson.dumps(r) + b"\n" for r in recs)
    seen = []
    for i in range(3):
        r = run_cli("cat", "--shard", f"{i}/3", input=data)
        seen += [orjson.loads(x)["id"] for x in r.stdout.splitlines()]
    assert sorted(seen) == sorted(r["id"] for r in recs)
    assert len(seen) == len(set(seen))


def test_internal_error_is_one_line_without_traceback_unless_asked(tmp_path):
    # A directory where a file is expected as output's parent is a data problem (exit 3),
    # which must not print a traceback.
    r = run_cli("cat", "-o", str(tmp_path / "missing-dir" / "x.jsonl"), input=b"")
    assert r.returncode == 3
    assert b"Traceback" not in r.stderr
    assert r.stderr.decode().strip().endswith("output directory does not exist")
