"""How the loop starts a stage: forked from the loop or fresh, with the same exit codes,
messages and stdout; a forked stage never returns into the loop's code."""

from __future__ import annotations

import pytest

from spade_cli.loop import stage_process


@pytest.fixture
def mode(monkeypatch):
    """Sets the mode; "fork" must really fork, though earlier tests in this process may
    have left threads running (which would make run_command start the stage fresh)."""

    def use(how):
        stage_process.use(how)
        if how == "fork":
            monkeypatch.setattr(stage_process.threading, "active_count", lambda: 1)
            monkeypatch.setattr(stage_process.subprocess, "run", _no_fresh_interpreter)

    yield use
    stage_process.use("auto")


def _no_fresh_interpreter(*args, **kwargs):
    raise AssertionError("mode fork started the stage as a fresh interpreter")


@pytest.mark.parametrize("how", ["fork", "exec"])
def test_a_failing_stage_gives_its_exit_code_and_message(how, mode, tmp_path, capfd):
    mode(how)
    missing = tmp_path / "missing.jsonl"
    assert stage_process.run_command(["cat", str(missing)]) == 3  # bad data (errors.py)
    err = capfd.readouterr().err
    assert err.startswith("spade-cat: error: ") and str(missing) in err


@pytest.mark.parametrize("how", ["fork", "exec"])
def test_stdout_is_quiet_unless_asked_for(how, mode, tmp_path, capfd):
    mode(how)
    src = tmp_path / "in.jsonl"
    src.write_text('{"kind": "doc", "id": "d1", "text": "x"}\n')
    assert stage_process.run_command(["cat", str(src)]) == 0
    assert capfd.readouterr().out == ""
    assert stage_process.run_command(["cat", str(src)], quiet_stdout=False) == 0
    assert '"d1"' in capfd.readouterr().out


def test_a_forked_stage_that_crashes_exits_with_1_in_the_child(mode, monkeypatch, tmp_path):
    from spade_cli import __main__ as spade_main

    def crash():
        raise RuntimeError("boom")

    monkeypatch.setattr(spade_main, "main", crash)
    mode("fork")
    marker = tmp_path / "after"
    assert stage_process.run_command(["cat", "-"]) == 1
    # Had the child returned into this test, it would write the marker too.
    with open(marker, "a") as fh:
        fh.write("x")
    assert marker.read_text() == "x"


def test_a_forked_stage_inherits_the_loops_heap_frozen(mode, monkeypatch, tmp_path):
    """The stage's garbage collections skip what the loop imported before forking it."""
    import gc

    from spade_cli import __main__ as spade_main

    seen = tmp_path / "frozen"
    monkeypatch.setattr(spade_main, "main", lambda: seen.write_text(str(gc.get_freeze_count())))
    monkeypatch.setitem(stage_process._state, "warm", False)
    monkeypatch.setattr(stage_process, "WARM_MODULES", ("json",))
    mode("fork")
    try:
        assert stage_process.run_command(["cat", "-"]) == 0
    finally:
        gc.unfreeze()  # this test process goes on as it was
    assert int(seen.read_text()) > 10_000


def test_auto_forks_only_where_no_gpu_is_visible(mode, monkeypatch, tmp_path):
    mode("auto")
    monkeypatch.setattr(stage_process, "_GPU_DEVICES", (str(tmp_path / "nvidia[0-9]*"),))
    assert stage_process.forks()
    (tmp_path / "nvidia0").touch()
    assert not stage_process.forks()
    mode("fork")
    assert stage_process.forks()
    mode("exec")
    assert not stage_process.forks()


def test_an_unknown_mode_is_a_usage_error(mode):
    from spade_cli.errors import UsageError

    with pytest.raises(UsageError, match="auto, fork, exec"):
        mode("thread")


def test_a_process_running_other_threads_starts_the_stage_fresh(monkeypatch, tmp_path):
    # A fork copies only the calling thread: with another one running, fork mode execs.
    stage_process.use("fork")
    monkeypatch.setattr(stage_process.threading, "active_count", lambda: 2)
    monkeypatch.setattr(stage_process, "_fork", lambda *a: pytest.fail("forked"))
    src = tmp_path / "in.jsonl"
    src.write_text('{"kind": "doc", "id": "d1", "text": "x"}\n')
    try:
        assert stage_process.run_command(["cat", str(src)]) == 0
    finally:
        stage_process.use("auto")
