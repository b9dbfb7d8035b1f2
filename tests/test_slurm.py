"""The Slurm recipe on a real Slurm: examples/slurm/local-cluster.sh stands up a one-node
slurmctld + slurmd for this module (installing slurm-wlm and munge when it can; without
them the tests skip, and fail when CI is set), and submit-round.sh runs demo rounds on it
that must give the records spade-loop gives."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from spade_cli.recordio import read_records

from .helpers import ROOT, assert_same, run_cli

SLURM = ROOT / "examples" / "slurm"
SUBMIT = SLURM / "submit-round.sh"
RECORDS = ["candidates", "validated", "rollouts", "scored", "memory"]


def _free_port_pair() -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000:
            with socket.socket() as s2:
                try:
                    s2.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free pair of ports")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Environment for Slurm commands talking to a fresh local cluster."""
    d = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SPADE_SLURM_DIR": str(d), "SPADE_SLURM_PORT": str(_free_port_pair())}
    script = str(SLURM / "local-cluster.sh")
    r = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode == 4:
        msg = f"no local Slurm: {r.stderr.strip().splitlines()[-1]}"
        if os.environ.get("CI"):
            pytest.fail(f"{msg} (CI is set, so this fails instead of skipping)", pytrace=False)
        pytest.skip(msg)
    assert r.returncode == 0, r.stderr
    # spade-loop as this checkout runs it, first on PATH for the driver and the jobs.
    bin_dir = d / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "spade-loop"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m spade_cli loop "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env.update(
        SLURM_CONF=str(d / "slurm.conf"),
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        SPADE_WAIT_POLL="0.5",
    )
    env.pop("VIRTUAL_ENV", None)
    env.pop("SPADE_VENV", None)
    yield env
    subprocess.run([script, "stop"], env=env, timeout=60)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, tiny_model):
    """A model and a corpus outside the run directories, so that runs of different names
    sample the same documents (keys derive from the corpus path as written)."""
    d = tmp_path_factory.mktemp("shared")
    corpus = d / "demo-corpus.jsonl.zst"
    r = run_cli("sample-docs", "--build-demo-corpus", corpus)
    assert r.returncode == 0, r.stderr.decode()
    return {"model": str(tiny_model), "corpus": str(corpus), "runs": d / "runs"}


def write_config(shared: dict, name: str, model: str | None = None, rounds: int = 1) -> Path:
    path = shared["runs"].parent / f"{name}.toml"
    path.write_text(f"""
name = "{name}"
rounds = {rounds}
seed = 0
runs_dir = "{shared["runs"]}"
[model]
path = "{model or shared["model"]}"
engine = "hf"
[corpus]
paths = ["{shared["corpus"]}"]
docs_per_round = 2
[design]
designs_per_doc = 2
max_tokens = 64
[rollout]
episodes = 2
max_turns = 3
max_tokens = 32
replay = 2
[train]
role = "both"
epochs = 1
""")
    return path


def round_dir(shared: dict, name: str, r: int = 1) -> Path:
    return shared["runs"] / name / f"round-{r:03d}"


@pytest.fixture(scope="module")
def reference(shared):
    """Two rounds as spade-loop runs them (round 1's directory)."""
    t = time.perf_counter()
    r = run_cli("loop", write_config(shared, "loop", rounds=2))
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    sys.stderr.write(f"\nspade-loop, 2 rounds: {time.perf_counter() - t:.1f} s\n")
    return round_dir(shared, "loop")


# Every Slurm job is a fresh interpreter importing torch and TRL (15 to 20 s on a slow
# 2-core machine): two rounds of 29 jobs came to 900 s there, where the loop forking its
# stages takes about 65. The tests check the records, not the speed.
SUBMIT_TIMEOUT = 1800


def submit(
    cluster: dict, *args, wait: bool = True, timeout: float = SUBMIT_TIMEOUT
) -> subprocess.CompletedProcess:
    cmd = [str(SUBMIT), *(["--wait"] if wait else []), *map(str, args)]
    return subprocess.run(cmd, env=cluster, capture_output=True, text=True, timeout=timeout)


def _untimed(x):
    """A record as two runs must agree on it: no wall times."""
    if isinstance(x, dict):
        return {
            k: _untimed(v)
            for k, v in x.items()
            if not any(t in k for t in ("seconds", "elapsed", "duration", "time"))
        }
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def records(rdir: Path, name: str) -> list[dict]:
    if name == "checkpoint":
        lines = (rdir / "checkpoint.jsonl").read_bytes().splitlines()
        return [_untimed(orjson.loads(line)) for line in lines]
    return [_untimed(r) for r in read_records([str(rdir / f"{name}.jsonl.zst")])]


def job_ids(stdout: str, r: int = 1) -> dict[str, str]:
    """`round R: NAME=ID ...` -> {NAME: ID}"""
    line = next(ln for ln in stdout.splitlines() if ln.startswith(f"round {r}: "))
    return dict(item.split("=") for item in line.split(": ", 1)[1].split())


def squeue(cluster: dict, ids) -> list[str]:
    r = subprocess.run(
        ["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T"],
        env=cluster,
        capture_output=True,
        text=True,
    )
    return r.stdout.splitlines()


@pytest.mark.slurm
@pytest.mark.slow
def test_one_shard_gives_the_loops_records(cluster, shared, reference):
    """Rounds 1 and 2 as one chain (--through 2): the loop's records, round by round."""
    t = time.perf_counter()
    r = submit(cluster, "--through", 2, write_config(shared, "slurm1", rounds=2), 1)
    assert r.returncode == 0, r.stderr
    sys.stderr.write(f"\nSlurm, 2 rounds (1 shard): {time.perf_counter() - t:.1f} s\n")
    assert "rounds 1-2 done" in r.stderr
    for rnd in (1, 2):
        ours, theirs = round_dir(shared, "slurm1", rnd), round_dir(shared, "loop", rnd)
        for name in [*RECORDS, "checkpoint"]:
            assert_same(records(ours, name), records(theirs, name), f"round {rnd} {name}")
        logs = sorted(p.name for p in (ours / "slurm-logs").iterdir())
        assert any(n.startswith(f"spade-r{rnd}-rollout-") for n in logs), logs
    # Round 2 started after round 1's last job, and played round 1's checkpoint.
    first, second = (job_ids(r.stdout, rnd) for rnd in (1, 2))

    def when(job: str, field: str) -> str:  # ISO times compare as strings
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", job], env=cluster, capture_output=True, text=True
        ).stdout
        return out.split(f" {field}=")[1].split()[0]

    assert list(first)[-1] == "train"
    assert when(next(iter(second.values())), "StartTime") >= when(first["train"], "EndTime")
    # The last stage wrote each round's summary, as the loop does.
    metrics = (shared["runs"] / "slurm1" / "metrics.jsonl").read_bytes().splitlines()
    assert [orjson.loads(m)["round"] for m in metrics] == [1, 2]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_failing_stage_stops_the_chain(cluster, shared, tmp_path):
    r = submit(cluster, write_config(shared, "broken", model=str(tmp_path / "no-such-model")), 1)
    ids = job_ids(r.stdout)
    assert r.returncode not in (0, 2), r.stderr
    assert "stage design ended FAILED (exit " in r.stderr, r.stderr
    code = r.stderr.split("stage design ended FAILED (exit ")[1].split(")")[0]
    assert r.returncode == int(code)
    not_run = r.stderr.split("not run: ")[1].split("\n")[0].split()
    assert (
        not_run[0] == "validate"
        and not_run[-1] == "train"
        and {"rollout", "regret"} <= set(not_run)
    )
    assert "--from design" in r.stderr
    assert squeue(cluster, ids.values()) == []  # nothing left pending
    assert not (round_dir(shared, "broken") / "candidates.jsonl.zst").exists()


@pytest.mark.slurm
@pytest.mark.slow
def test_two_shards_cancelled_and_resumed_give_the_loops_round(cluster, shared, reference):
    """Two shards per map stage, and scancel of a running rollout array task: Slurm
    cancels the rest of the chain, no file appears under a final name, and --from rollout
    completes the round with the records spade-loop gives. (One test, since every round
    on Slurm costs a chain of fresh interpreters.)"""
    config = write_config(shared, "cancel")
    r = submit(cluster, config, 1, 2, wait=False)
    assert r.returncode == 0, r.stderr
    ids = job_ids(r.stdout)
    assert {"design-merge", "validate-merge", "rollout-merge"} <= set(ids)
    deadline = time.monotonic() + 600

    def running() -> set[str]:
        return {
            line.split()[0]
            for line in squeue(cluster, [ids["rollout"]])
            if line.endswith(" RUNNING")
        }

    # A task still running 2 s after it started: one with environments to play.
    while not (busy := running()):
        assert time.monotonic() < deadline, "the rollout tasks never ran"
        time.sleep(0.3)
    time.sleep(2)
    busy &= running()
    assert busy, "every rollout task ended within 2 s; the test needs a longer rollout"
    task = sorted(busy)[0]
    subprocess.run(["scancel", task], env=cluster, check=True)
    while squeue(cluster, ids.values()):
        assert time.monotonic() < deadline, squeue(cluster, ids.values())
        time.sleep(0.3)
    rdir = round_dir(shared, "cancel")
    assert (rdir / "validated.jsonl.zst").exists()
    shard = task.split("_")[1]
    state = subprocess.run(
        ["scontrol", "show", "job", "-o", task], env=cluster, capture_output=True, text=True
    ).stdout
    assert "JobState=CANCELLED" in state, state
    for name in (
        f"rollouts.shard-{shard}-of-2.jsonl.zst",
        "rollouts.jsonl.zst",
        "scored.jsonl.zst",
    ):
        assert not (rdir / name).exists(), name

    r = submit(cluster, "--from", "rollout", config, 1, 2)
    assert r.returncode == 0, r.stderr
    assert list(job_ids(r.stdout)) == ["rollout", "rollout-merge", "regret", "train"]
    assert len(list(rdir.glob("rollouts.shard-*-of-2.jsonl.zst"))) == 2
    for name in ("candidates", "validated", "rollouts"):
        ours, theirs = ({x["id"] for x in records(d, name)} for d in (rdir, reference))
        assert ours == theirs, f"{name}: ids differ"
    scores = [[(x["id"], x["score"]) for x in records(d, "scored")] for d in (rdir, reference)]
    assert_same(*scores, "scores")
    assert_same(records(rdir, "memory"), records(reference, "memory"), "memory")


@pytest.mark.slurm
@pytest.mark.slow
def test_driver_rejects_bad_arguments(cluster, shared):
    config = write_config(shared, "args")
    r = submit(cluster, "--from", "nonesuch", config, 1)
    assert r.returncode == 2 and "has no stage 'nonesuch'" in r.stderr
    r = submit(cluster, config, 0)
    assert r.returncode == 2 and "ROUND must be a positive integer" in r.stderr
    r = submit(cluster, "--through", 1, config, 2)
    assert r.returncode == 2 and "--through must be a round at or after 2" in r.stderr


@pytest.mark.slurm
@pytest.mark.slow
def test_a_rejected_submission_cancels_what_was_submitted(cluster, shared):
    env = {**cluster, "SPADE_SBATCH_ROLLOUT": "--partition=nonesuch"}
    r = subprocess.run(
        [str(SUBMIT), str(write_config(shared, "rejected")), "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    assert "sbatch rejected stage rollout" in r.stderr
    assert "submitted before it: memory-init=" in r.stderr and "validate=" in r.stderr
    assert "cancelled the jobs already submitted" in r.stderr
    before = r.stderr.split("submitted before it: ")[1].splitlines()[0].split()
    assert squeue(cluster, [x.split("=")[1] for x in before]) == []


def test_list_stages_tells_the_driver_nodes_and_dir(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f'name = "x"\nruns_dir = "{tmp_path}"\n[train]\nnum_machines = 2\n')
    r = run_cli("loop", config, "--list-stages", "--round", "2")
    assert r.returncode == 0, r.stderr.decode()
    stages = {s["name"]: s for s in map(orjson.loads, r.stdout.splitlines())}
    assert stages["train"]["nodes"] == 2 and stages["rollout"]["nodes"] == 1
    assert {s["dir"] for s in stages.values()} == {str(tmp_path / "x" / "round-002")}


def test_machine_rank_goes_with_a_multi_node_train(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f'name = "x"\nruns_dir = "{tmp_path}"\n')
    r = run_cli("loop", config, "--stage", "train", "--round", "2", "--machine-rank", "1")
    assert r.returncode == 2 and b"train.num_machines > 1" in r.stderr
    r = run_cli("loop", config, "--machine-rank", "1")
    assert r.returncode == 2 and b"go with --stage train" in r.stderr


@pytest.mark.parametrize("script", ["stage.sbatch", "submit-round.sh", "local-cluster.sh"])
def test_scripts_parse(script):
    subprocess.run(["bash", "-n", str(SLURM / script)], check=True)
