"""spade-export against the real libraries, offline: an OpenEnv server on 127.0.0.1 driven by
openenv-core's client, a Harbor task read by harbor's own task model and scored by its
oracle and a no-op, and spade-cat --from reading each export back to the same records.

Harbor needs Python >= 3.12, so it lives in a venv of its own (`just harbor-venv`:
.venv-harbor/, or $SPADE_HARBOR_PYTHON). Harbor runs trials only in a container
runtime (Docker, Podman, a cloud sandbox), none of which this machine has: its oracle
and no-op are run here as Harbor runs them, solution/solve.sh (or nothing) and then
tests/test.sh, with the container's paths (/opt/spade-env, /logs/verifier) pointed at
temporary folders through the scripts' variables.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from spade_cli.export.build import kept
from spade_cli.export.spec import load_spec

from .conftest import ROOT, run_cli

DATA = ROOT / "tests" / "data"
ENVS = [
    ROOT / "spade_cli" / "envs" / "examples" / "nim.py",  # ours, text actions
    ROOT / "spade_cli" / "envs" / "examples" / "bank_api.py",  # ours, tool calls
    DATA / "published" / "games" / "vault_code.py",
]  # the published contract


def load_records(data: bytes) -> list[dict]:
    return [orjson.loads(x) for x in data.splitlines() if x.strip()]


@pytest.fixture(scope="module")
def validated(tmp_path_factory) -> Path:
    """The three environments as validated candidates, with a skill and scores each."""
    d = tmp_path_factory.mktemp("pool")
    for p in ENVS:
        (d / p.name).write_text(p.read_text())
    r = run_cli("cat", "--from-dir", str(d), "-o", "-")
    assert r.returncode == 0, r.stderr
    r = run_cli("validate", "-", "-o", "-", input=r.stdout)
    assert r.returncode == 0, r.stderr
    recs = load_records(r.stdout)
    assert all(c["validation"]["valid"] for c in recs), [c["validation"] for c in recs]
    for i, c in enumerate(sorted(recs, key=lambda c: c["env"]["name"])):
        c["skill"] = ["games", "tools", "games"][i]
        c["score"] = {
            "regret": 0.1 * (i + 1),
            "reward": 0.5,
            "nohint": {"success_rate": 0.25 * i},
            "hint": {"success_rate": 1.0},
        }
    path = d / "validated.jsonl"
    path.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in recs))
    return path


def as_exported(validated: Path) -> list[dict]:
    """The input records as an export keeps them (by id): what spade-cat --from gives back."""
    out = []
    for c in sorted(load_records(validated.read_bytes()), key=lambda c: c["id"]):
        k = kept(c)
        k["env"]["code"] = c["env"]["code"]
        out.append(k)
    return out


def export(validated: Path, tmp_path_factory, fmt: str, *args: str) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp(f"export-{fmt}") / "out"
    r = run_cli("export", str(validated), "--format", fmt, "-o", str(out), *args)
    assert r.returncode == 0, r.stderr.decode()
    return out, [Path(p) for p in r.stdout.decode().split()]


@pytest.fixture(scope="module")
def openenv_export(validated, tmp_path_factory):
    return export(validated, tmp_path_factory, "openenv", "--seeds", "2")


@pytest.fixture(scope="module")
def harbor_export(validated, tmp_path_factory):
    return export(validated, tmp_path_factory, "harbor")


def spade_replay(code: str, seed: int) -> float:
    """spade's own replay of an episode's solution, as validation plays it."""
    from spade_cli.envs.contracts import resolve_contract, solution_actions
    from spade_cli.envs.shared_checks import check_reset_reply, run_episode
    from spade_cli.sandbox import EnvSession

    def reset_check(out):
        obs, info = check_reset_reply(out)
        sol = info.get("solution")
        return (
            obs,
            "",
            sol if isinstance(sol, list) else solution_actions(info.get("solution_text")),
        )

    with EnvSession(code) as env:
        sol = run_episode(env, seed, [], 0, "probe", reset_check=reset_check).solution
        env.renew()
        ep = run_episode(env, seed, sol, 1000, "solution", reset_check=reset_check)
    return ep.final_reward if resolve_contract(code, "auto") == "published" else ep.ret


def test_every_valid_environment_exports_with_its_metadata(openenv_export, validated):
    _out, dirs = openenv_export
    inputs = {c["id"]: c for c in load_records(validated.read_bytes())}
    assert len(dirs) == 3
    for d in dirs:
        spec = load_spec(d / "spade")
        rec = inputs[spec.id]
        assert (d / "spade" / "env.py").read_text() == rec["env"]["code"]
        assert spec.record["skill"] == rec["skill"] and spec.record["score"] == rec["score"]
        assert spec.seeds == rec["validation"]["seeds"][:2]
        assert spec.contract == ("published" if "vault" in d.name else "spade")
        for seed in spec.seeds:
            assert spec.solutions[str(seed)] and spec.hints[str(seed)]
            assert spec.replay_returns[str(seed)] == 1.0
        assert "app: server.app:app" in (d / "openenv.yaml").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(d: Path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "server.app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=d,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode()[-3000:]) from None
            time.sleep(0.3)
    proc.kill()
    raise AssertionError("the OpenEnv server did not start in 120 s")


@pytest.mark.slow
@pytest.mark.requires_module("openenv", "uvicorn")
def test_openenv_server_played_by_openenv_client_earns_spades_replay(openenv_export):
    from openenv.core.generic_client import GenericEnvClient

    _out, dirs = openenv_export
    for d in dirs:
        spec = load_spec(d / "spade")
        proc, url = serve(d)
        try:
            with GenericEnvClient(base_url=url).sync() as env:
                for seed in spec.seeds:
                    first = env.reset(seed=seed)
                    assert first.observation["text"] and not first.done
                    assert "solution" not in json.dumps(first.observation)
                    total, result = 0.0, first
                    for action in spec.solutions[str(seed)]:
                        result = env.step({"message": action})
                        total += result.reward or 0.0
                        if result.done:
                            break
                    assert result.done, d.name
                    assert total == spade_replay(spec.code, seed) == 1.0, d.name
                    state = env.state()
                    assert state["seed"] == seed and state["episode_return"] == total
                # A reply that is not the solution does not solve it.
                env.reset(seed=spec.seeds[0])
                assert (env.step({"message": "no such action"}).reward or 0.0) < 1.0
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def harbor_python() -> str:
    py = os.environ.get("SPADE_HARBOR_PYTHON") or str(ROOT / ".venv-harbor" / "bin" / "python")
    ok = (
        Path(py).exists()
        and subprocess.run([py, "-c", "import harbor"], capture_output=True).returncode == 0
    )
    if not ok:
        msg = f"harbor is not importable by {py} (Python >= 3.12): run `just harbor-venv`"
        if os.environ.get("CI"):
            pytest.fail(f"{msg} (CI is set, so this fails instead of skipping)", pytrace=False)
        pytest.skip(msg)
    return py


HARBOR_CHECK = """
import json, sys
from harbor.models.task.task import Task
out = []
for d in sys.argv[1:]:
    t = Task(d)
    out.append({"valid": Task.is_valid_dir(d), "name": t.name, "metadata": t.config.metadata,
                "instruction": t.instruction, "test": str(t.paths.discovered_test_path_for(t.config.environment.os)),
                "solve": str(t.paths.solve_path),
                "dockerfile": (t.paths.environment_dir / "Dockerfile").is_file()})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_harbor_tasks_pass_harbors_task_model(harbor_export, validated):
    _out, dirs = harbor_export
    r = subprocess.run(
        [harbor_python(), "-c", HARBOR_CHECK, *map(str, dirs)], capture_output=True, timeout=300
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    inputs = {c["id"]: c for c in load_records(validated.read_bytes())}
    for d, task in zip(dirs, orjson.loads(r.stdout.splitlines()[-1]), strict=True):
        rec = inputs[task["metadata"]["spade_id"]]
        assert task["valid"] and task["dockerfile"], task
        assert task["metadata"]["skill"] == rec["skill"]
        assert task["metadata"]["regret"] == rec["score"]["regret"]
        assert task["metadata"]["seed"] == rec["validation"]["seeds"][0]
        assert task["test"] == str(d / "tests" / "test.sh") and task["solve"] == str(
            d / "solution" / "solve.sh"
        )
        first = load_spec(d / "tests" / "spade")
        assert first.solutions and load_spec(d / "environment" / "spade").solutions == {}, (
            "the agent's container must not hold the solution"
        )


def harbor_trial(task: Path, tmp: Path, oracle: bool) -> str:
    """What Harbor does in a trial, on the host: the agent (the oracle's solve.sh, or a
    no-op) acts, then tests/test.sh writes the reward."""
    env = {
        **os.environ,
        "SPADE_ENV_DIR": str(task / "environment" / "spade"),
        "SPADE_EPISODE": str(tmp / "episode.json"),
        "SPADE_REWARD_FILE": str(tmp / "reward.txt"),
    }
    if oracle:
        r = subprocess.run(
            ["bash", str(task / "solution" / "solve.sh")], env=env, capture_output=True, timeout=600
        )
        assert r.returncode == 0, r.stderr.decode()[-3000:]
    r = subprocess.run(
        ["bash", str(task / "tests" / "test.sh")], env=env, capture_output=True, timeout=600
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return (tmp / "reward.txt").read_text().strip()


@pytest.mark.slow
def test_harbor_oracle_scores_1_and_a_no_op_0(harbor_export, tmp_path):
    _out, dirs = harbor_export
    for i, d in enumerate(dirs):
        spec = load_spec(d / "tests" / "spade")
        (tmp_path / f"o{i}").mkdir()
        (tmp_path / f"n{i}").mkdir()
        assert harbor_trial(d, tmp_path / f"o{i}", oracle=True) == "1", d.name
        assert float(spade_replay(spec.code, spec.seeds[0])) == 1.0
        assert harbor_trial(d, tmp_path / f"n{i}", oracle=False) == "0", d.name


@pytest.mark.parametrize("fmt", ["openenv", "harbor"])
def test_spade_cat_from_reads_an_export_back_to_the_same_environments(fmt, validated, request):
    out, _dirs = request.getfixturevalue(f"{fmt}_export")
    r = run_cli("cat", "--from", str(out), "-o", "-")
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(load_records(r.stdout), key=lambda c: c["id"]) == as_exported(validated)


def test_selection_by_skill_regret_and_win_rate(validated, tmp_path):
    def ids(*args):
        out = tmp_path / f"sel{len(list(tmp_path.iterdir()))}"
        r = run_cli("export", str(validated), "--format", "openenv", "-o", str(out), *args)
        assert r.returncode == 0, r.stderr.decode()
        return sorted(
            load_spec(Path(p) / "spade").record["skill"] for p in r.stdout.decode().split()
        )

    assert ids("--skill", "tools") == ["tools"]
    assert ids("--min-regret", "0.15") == ["games", "tools"]
    assert ids("--win-rate", "0:0.3") == ["games", "tools"]
    assert ids("--skill", "games", "--max-regret", "0.15") == ["games"]


def test_bad_options_are_usage_errors(validated, tmp_path):
    r = run_cli("export", str(validated), "--format", "gym", "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and b"--format must be one of openenv, verifiers, harbor" in r.stderr
    r = run_cli("export", str(validated), "--format", "harbor")
    assert r.returncode == 2 and b"-o DIR is required" in r.stderr
    r = run_cli(
        "export",
        str(validated),
        "--format",
        "harbor",
        "-o",
        str(tmp_path / "y"),
        "--win-rate",
        "0.9:0.1",
    )
    assert r.returncode == 2 and b"--win-rate 0.9:0.1: need 0 <= LO <= HI <= 1" in r.stderr
    r = run_cli("cat", "--from", str(tmp_path))
    assert r.returncode == 3 and b"no exported environments" in r.stderr
