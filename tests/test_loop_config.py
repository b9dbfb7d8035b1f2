"""spade-loop configs: defaults, overrides, and a clear error for every bad field."""

from __future__ import annotations

import pytest

from spade_cli.errors import UsageError
from spade_cli.loop.config import describe_fields, load_config

from .helpers import ROOT, run_cli


def test_defaults_are_the_cpu_demo():
    cfg = load_config(None)
    assert cfg.name == "demo" and cfg.rounds == 1 and cfg.model.path == ""
    assert cfg.corpus.paths == [] and cfg.baseline.mode == "spade"


def test_every_field_is_documented():
    rows = describe_fields()
    assert len(rows) > 30
    assert all(doc for _, _, doc in rows), [k for k, _, d in rows if not d]


@pytest.mark.parametrize(
    "toml, message",
    [
        ("roundz = 2\n", "unknown field 'roundz'"),
        ("[design]\ndesigns_per_dok = 2\n", "unknown field 'design.designs_per_dok'"),
        ("[nope]\nx = 1\n", "unknown field 'nope'"),
        ("rounds = 'two'\n", "'rounds': expected int, got str 'two'"),
        ("rounds = 0\n", "'rounds' must be at least 1, got 0"),
        (
            "[regret]\nestimator = 'median'\n",
            "'regret.estimator' must be one of blend, regret, solve-rate, learning-potential, regret-var, mean-gap, max-gap, learnability",
        ),
        ("[corpus]\npaths = 'a.jsonl'\n", "'corpus.paths': expected a list"),
        ("design = 3\n", "'design' must be a table"),
        ("rounds = [\n", "bad TOML"),
    ],
)
def test_bad_fields_name_the_field(tmp_path, toml, message):
    path = tmp_path / "run.toml"
    path.write_text(toml)
    with pytest.raises(UsageError, match=None) as err:
        load_config(str(path))
    assert message in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    "toml, where, message",
    [
        ("roundz = 2\n", 1, "unknown field 'roundz' (did you mean 'rounds'?)"),
        ("name = 'a'\n\n[rollout]\nmax_turns = 2\nepisodez = 3\n", 5, "(did you mean 'episodes'?)"),
        (
            "[design]\nmax_tokens = 9\n[rollout]\n  max-turns = 0\n",
            4,
            "'rollout.max_turns' must be at least 1",
        ),
        ("[ \"rollout\" ]\n'episodes' = 'x'\n", 2, "'rollout.episodes': expected int"),
        ("[train]\nzzz = 1\n", 2, "unknown field 'train.zzz'"),
    ],
)
def test_bad_fields_name_their_line_and_the_field_meant(tmp_path, toml, where, message):
    path = tmp_path / "run.toml"
    path.write_text(toml)
    with pytest.raises(UsageError) as err:
        load_config(str(path))
    assert str(err.value).startswith(f"{path}:{where}: ") and message in str(err.value)
    assert "did you mean" not in str(err.value) or "(did you mean" in message


def test_cli_config_error_exit_2(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[train]\nlearning_rat = 1\n")
    r = run_cli("loop", str(path))
    assert r.returncode == 2
    assert (
        r.stderr.decode().strip()
        == f"spade-loop: error: {path}:2: unknown field 'train.learning_rat'"
        " (did you mean 'learning_rate'?)"
    )
    assert r.stdout == b""


def test_shipped_example_configs_load():
    configs = sorted((ROOT / "examples").glob("*.toml"))
    assert configs
    for path in configs:
        load_config(str(path))


def test_failed_stage_exit_code_is_the_loops(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'name = "x"\nruns_dir = "{tmp_path}/runs"\n[model]\npath = "{tmp_path}/model"\n'
        f'[corpus]\npaths = ["{tmp_path}/no-such-corpus.jsonl"]\n'
    )
    r = run_cli("loop", str(cfg))
    assert r.returncode == 3, r.stderr
    err = r.stderr.decode()
    assert "no-such-corpus.jsonl" in err
    assert err.strip().splitlines()[-1] == (
        "spade-loop: error: round 1: stage sample-docs failed (exit 3); its message is above. "
        "Rerun to resume from this stage."
    )
    assert r.stdout == b""
