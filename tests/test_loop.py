"""spade-loop end to end on the tiny model: a round completes, a killed run resumes to the
same records, and the bin/ pipeline produces what the loop produces."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from spade_cli.recordio import load_all

from .helpers import ROOT, assert_same, require_module

pytestmark = pytest.mark.slow

# Small enough for CI on 2 cores; every stage still runs for real.
SETTINGS = {
    "DOCS": 1,
    "DESIGNS": 2,
    "DESIGN_TOKENS": 24,
    "SEEDS": 1,
    "WORKERS": 2,
    "K": 1,
    "MAX_TURNS": 2,
    "AGENT_TOKENS": 12,
    "MAX_CONTEXT": 2048,
    "REPLAY": 2,
}


def config_text(model: str, corpus: str) -> str:
    s = SETTINGS
    return f"""
name = "t"
seed = 0
[model]
path = "{model}"
engine = "hf"
[corpus]
paths = ["{corpus}"]
docs_per_round = {s["DOCS"]}
[design]
designs_per_doc = {s["DESIGNS"]}
max_tokens = {s["DESIGN_TOKENS"]}
[validate]
seeds = {s["SEEDS"]}
workers = {s["WORKERS"]}
[rollout]
episodes = {s["K"]}
max_turns = {s["MAX_TURNS"]}
max_tokens = {s["AGENT_TOKENS"]}
max_context = {s["MAX_CONTEXT"]}
replay = {s["REPLAY"]}
[train]
per_device_batch_size = 2
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from spade_cli.corpus.demo import build_demo_corpus

    path = tmp_path_factory.mktemp("corpus") / "demo.jsonl.zst"
    build_demo_corpus(str(path))
    return str(path)


@pytest.fixture(scope="module")
def config(tmp_path_factory, tiny_model, corpus):
    path = tmp_path_factory.mktemp("cfg") / "t.toml"
    path.write_text(config_text(str(tiny_model), corpus))
    return path


def loop_cmd(config: Path, runs: Path) -> list[str]:
    return [sys.executable, "-m", "spade_cli", "loop", str(config), "--runs-dir", str(runs)]


@pytest.fixture(scope="module")
def finished_run(config, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs-a")
    r = subprocess.run(loop_cmd(config, runs), capture_output=True, timeout=1200)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return runs / "t", r


# Fields that legitimately differ between two runs of the same seed.
VOLATILE = re.compile(r"seconds|elapsed|wall|duration|time|tokens_per_second|^path$|^dir$")


def normalise(obj, run_dir: str):
    if isinstance(obj, dict):
        return {
            k: normalise(v, run_dir) for k, v in obj.items() if not VOLATILE.search(k)
        }  # floats are compared to 1e-3 (helpers.assert_same)
    if isinstance(obj, list):
        return [normalise(v, run_dir) for v in obj]
    if isinstance(obj, str):
        return obj.replace(run_dir, "RUN")
    return obj


def records(path: Path, run_dir: Path):
    return [normalise(r, str(run_dir)) for r in load_all(str(path))]


def test_round_completes_with_every_stage_metrics_and_plots(finished_run):
    run, proc = finished_run
    manifest = orjson.loads((run / "round-001" / "manifest.json").read_bytes())
    stages = manifest["stages"]
    for stage in ("sample-docs", "design", "validate", "replay", "rollout", "regret", "train"):
        assert stages[stage]["status"] == "done", stage
    scored = load_all(str(run / "round-001" / "scored.jsonl.zst"))
    # later design attempts re-design exactly the documents whose designs all failed, each
    # shown a fresh document (one document per design: a failed design is a failed doc)
    first = [c for c in scored if (c.get("design") or {}).get("attempt", 1) == 1]
    assert len(first) == SETTINGS["DOCS"] * SETTINGS["DESIGNS"] + SETTINGS["REPLAY"]
    by_attempt = {
        a: [c for c in scored if (c.get("design") or {}).get("attempt") == a] for a in (1, 2, 3)
    }
    for a in (2, 3):
        failed = {c["parents"][0] for c in by_attempt[a - 1] if not c["validation"]["valid"]}
        again = by_attempt[a]
        assert sorted(c["parents"][0] for c in again) == sorted(failed)
        assert all(c["doc"]["stands_in_for"] == c["parents"][0] != c["doc"]["id"] for c in again)
    assert by_attempt[2], "the tiny model's first designs all fail: attempt 2 must run"
    assert all("score" in c for c in scored)
    played = [c for c in scored if c.get("rollouts")]
    assert len(played) >= SETTINGS["REPLAY"]
    summary = orjson.loads(proc.stdout.splitlines()[0])
    assert summary["kind"] == "round" and summary["round"] == 1
    first_pass = list(summary["design_attempts"].values())[0]
    assert first_pass == SETTINGS["DOCS"] * SETTINGS["DESIGNS"]
    assert sum(summary["design_attempts"].values()) == summary["designs"]
    assert (run / "metrics.jsonl").exists()
    for png in ("validity.png", "regret.png", "reward.png", "success.png", "training.png"):
        data = (run / "plots" / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 2000
    ckpt = orjson.loads((run / "round-001" / "checkpoint.jsonl").read_bytes().splitlines()[0])
    assert ckpt["kind"] == "checkpoint"
    assert b"round 1 done" in proc.stderr


def test_rerun_of_finished_run_does_nothing(finished_run, config):
    run, _ = finished_run
    before = (run / "round-001" / "manifest.json").read_bytes()
    r = subprocess.run(loop_cmd(config, run.parent), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert (run / "round-001" / "manifest.json").read_bytes() == before
    assert b"spade-design" not in r.stderr  # no stage ran again


def test_killed_run_resumes_to_the_same_records(finished_run, config, tmp_path):
    run_a, _ = finished_run
    runs_b = tmp_path / "runs-b"
    proc = subprocess.Popen(
        loop_cmd(config, runs_b), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    manifest = runs_b / "t" / "round-001" / "manifest.json"
    deadline = time.time() + 900
    # Kill once the run is inside the rollout stage (hints done, rollout not yet).
    while time.time() < deadline:
        if manifest.exists() and b'"hint"' in manifest.read_bytes():
            break
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stages = orjson.loads(manifest.read_bytes())["stages"]
    assert "hint" in stages and "regret" not in stages
    assert not (runs_b / "t" / "round-001" / "scored.jsonl.zst").exists()
    # What a rollout killed mid-write leaves (SIGKILL gives it no chance to clean up).
    gone = subprocess.Popen(["true"])
    gone.wait()
    (runs_b / "t" / "round-001" / f".rollouts.jsonl.zst.partial-{gone.pid}").write_bytes(b"{\n")

    r = subprocess.run(loop_cmd(config, runs_b), capture_output=True, timeout=1200)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    # finished stages are not run again
    assert b"spade-design" not in r.stderr and b"spade-validate" not in r.stderr
    run_b = runs_b / "t"
    for name in ("scored.jsonl.zst", "memory.jsonl.zst", "rollouts.jsonl.zst"):
        assert_same(
            records(run_b / "round-001" / name, run_b),
            records(run_a / "round-001" / name, run_a),
            name,
        )
    assert not list(run_b.rglob(".*partial*"))


def _same_round(run_a: Path, run_b: Path) -> None:
    """Both runs' round 1 has the same candidates, verdicts, scores and memory."""

    def key(path: Path, run: Path):
        return [(c["id"], c["validation"], c.get("score")) for c in records(path, run)]

    for name in ("scored.jsonl.zst", "rollouts.jsonl.zst", "validated.jsonl.zst"):
        assert_same(
            key(run_b / "round-001" / name, run_b), key(run_a / "round-001" / name, run_a), name
        )
    memory = "round-001/memory.jsonl.zst"
    assert_same(records(run_b / memory, run_b), records(run_a / memory, run_a), "memory")
    ckpt_a, ckpt_b = (
        orjson.loads((r / "round-001" / "checkpoint.jsonl").read_bytes()) for r in (run_a, run_b)
    )
    assert_same(normalise(ckpt_b, str(run_b)), normalise(ckpt_a, str(run_a)), "checkpoint")


def test_stages_started_fresh_write_what_forked_stages_write(finished_run, config, tmp_path):
    """`--stage-process exec` (a fresh interpreter per stage) against the default, which
    forks the stages from the loop on a machine without a GPU: one round, same records."""
    run_a, proc_a = finished_run
    runs_b = tmp_path / "runs-exec"
    r = subprocess.run(
        [*loop_cmd(config, runs_b), "--stage-process", "exec"], capture_output=True, timeout=1200
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    _same_round(run_a, runs_b / "t")
    assert r.stdout.splitlines()[0].startswith(b'{"kind":"round"')


def _env() -> dict[str, str]:
    # The console scripts beside this interpreter (the printed commands call spade-*).
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _config_in(config: Path, runs: Path) -> Path:
    """The same config, writing its run under `runs`."""
    path = runs.parent / f"{runs.name}.toml"
    path.write_text(f'runs_dir = "{runs}"\n' + config.read_text())
    return path


def test_printed_pipe_matches_the_loop(finished_run, config, tmp_path):
    """The round as `spade-loop --print-commands --pipe` prints it (bin/spade-round),
    run by bash, gives the loop's records: one recipe, no copy to drift."""
    run_a, _ = finished_run
    cfg = _config_in(config, tmp_path / "runs")
    r = subprocess.run(
        ["bash", str(ROOT / "bin" / "spade-round"), str(cfg), "1"],
        env=_env(),
        capture_output=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    run_b = tmp_path / "runs" / "t"

    def key(run: Path):
        return [
            (c["id"], c["validation"], c.get("score"))
            for c in records(run / "round-001" / "scored.jsonl.zst", run)
        ]

    # The same candidate ids, verdicts and scores, and the same memory.
    assert_same(key(run_b), key(run_a), "scored")
    memory = "round-001/memory.jsonl.zst"
    assert_same(records(run_b / memory, run_b), records(run_a / memory, run_a), "memory")
    # Piped stages leave no file behind (design's output went straight to validate).
    assert not (run_b / "round-001" / "candidates.jsonl.zst").exists()


def test_slurm_job_scripts_as_bash_with_two_shards_match_the_loop(finished_run, config, tmp_path):
    """Every stage through examples/slurm/stage.sbatch, run by bash as Slurm would run
    its array tasks (SLURM_ARRAY_TASK_ID 0 and 1 of 2, then the merge job)."""
    run_a, _ = finished_run
    cfg = _config_in(config, tmp_path / "runs")
    env = {**_env(), "SPADE_CONFIG": str(cfg), "SPADE_ROUND": "1"}
    listed = subprocess.run(
        [sys.executable, "-m", "spade_cli", "loop", str(cfg), "--list-stages"],
        capture_output=True,
        check=True,
    ).stdout.splitlines()
    script = str(ROOT / "examples" / "slurm" / "stage.sbatch")
    sharded = []
    for line in listed:
        stage = orjson.loads(line)
        jobs = [{"SPADE_STAGE": stage["name"]}]
        if stage["shardable"]:
            sharded.append(Path(stage["outputs"][0]).name.removesuffix(".jsonl.zst"))
            jobs = [
                {"SPADE_STAGE": stage["name"], "SPADE_SHARDS": "2", "SLURM_ARRAY_TASK_ID": str(i)}
                for i in range(2)
            ] + [{"SPADE_STAGE": stage["name"], "SPADE_MERGE": "2"}]
        for job in jobs:
            r = subprocess.run(
                ["bash", script], env={**env, **job}, capture_output=True, timeout=1200
            )
            assert r.returncode == 0, (job, r.stderr.decode()[-3000:])
    _same_round(run_a, tmp_path / "runs" / "t")
    shards = sorted(p.name for p in (tmp_path / "runs" / "t" / "round-001").glob("*.shard-*"))
    assert "rollouts" in sharded and "validated" in sharded
    assert shards == sorted(f"{s}.shard-{i}-of-2.jsonl.zst" for s in sharded for i in range(2))


def test_fixed_pool_baseline_on_reasoning_gym(tiny_model, tmp_path):
    """The fixed-environment baseline: no designer, reasoning-gym families as the pool,
    played in the sandbox with the package allowed in."""
    require_module("reasoning_gym")
    cfg = tmp_path / "fixed.toml"
    cfg.write_text(f"""
name = "fixed"
[model]
path = "{tiny_model}"
engine = "hf"
[baseline]
mode = "fixed-pool"
pool = "reasoning-gym:basic_arithmetic,chain_sum"
pool_size = 2
[sandbox]
call_timeout = 30.0   # importing reasoning-gym in the sandbox is slow on a busy machine
[validate]
seeds = 1
[rollout]
episodes = 2
max_turns = 1
max_tokens = 8
[train]
per_device_batch_size = 2
""")
    r = subprocess.run(loop_cmd(cfg, tmp_path / "runs"), capture_output=True, timeout=900)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    rnd = tmp_path / "runs" / "fixed" / "round-001"
    stages = orjson.loads((rnd / "manifest.json").read_bytes())["stages"]
    assert list(stages) == [
        "memory-init",
        "pool-source",
        "pool",
        "validate",
        "hint",
        "rollout",
        "regret",
        "train",
    ]
    assert "--sandbox-package" in stages["rollout"]["argv"]
    scored = load_all(str(rnd / "scored.jsonl.zst"))
    assert len(scored) == 2
    assert all(c["validation"]["valid"] for c in scored), [c["validation"] for c in scored]
    assert all(len(c["rollouts"]["nohint"]) == 2 for c in scored)


def test_a_copied_run_resumes_from_its_own_records(finished_run, config, tmp_path):
    """A run copied elsewhere (off a scratch disk, say) goes on from its own checkpoint,
    not the original's, and the original is left as it was."""
    import shutil

    run_a, _ = finished_run
    before = {p: p.read_bytes() for p in run_a.rglob("*.json*") if p.is_file()}
    run_b = tmp_path / "elsewhere" / "t"
    shutil.copytree(run_a, run_b)
    r = subprocess.run(
        [*loop_cmd(config, run_b.parent), "--rounds", "2", "-v"], capture_output=True, timeout=1200
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert b"round 1: spade-" not in r.stderr  # round 1 is done where it lies now
    assert b"the run was at " + str(run_a.resolve()).encode() in r.stderr
    # round 2 plays the model round 1's record names (its checkpoint, or the tiny model
    # where round 1 had nothing to learn from), and no record names the original run
    second = orjson.loads((run_b / "round-002" / "manifest.json").read_bytes())
    ckpt = orjson.loads((run_b / "round-001" / "checkpoint.jsonl").read_bytes().splitlines()[0])
    assert ckpt["path"] == second["model"]
    for path in [run_b / "metrics.jsonl", *run_b.glob("round-*/checkpoint*.jsonl")]:
        assert str(run_a.resolve()).encode() not in path.read_bytes(), path
    assert {p: p.read_bytes() for p in before} == before
