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

from .conftest import ROOT, require_module

pytestmark = pytest.mark.slow

# Small enough for CI on 2 cores; every stage still runs for real.
SETTINGS = {"DOCS": 1, "DESIGNS": 2, "DESIGN_TOKENS": 24, "SEEDS": 1, "WORKERS": 2, "K": 1,
            "MAX_TURNS": 2, "AGENT_TOKENS": 12, "MAX_CONTEXT": 2048, "REPLAY": 2}


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
docs_per_round = {s['DOCS']}
[design]
designs_per_doc = {s['DESIGNS']}
max_tokens = {s['DESIGN_TOKENS']}
[validate]
seeds = {s['SEEDS']}
workers = {s['WORKERS']}
[rollout]
episodes = {s['K']}
max_turns = {s['MAX_TURNS']}
max_tokens = {s['AGENT_TOKENS']}
max_context = {s['MAX_CONTEXT']}
replay = {s['REPLAY']}
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
        return {k: normalise(v, run_dir) for k, v in obj.items() if not VOLATILE.search(k)}
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
    # later design attempts only re-design documents whose designs all failed
    first = [c for c in scored if (c.get("design") or {}).get("attempt", 1) == 1]
    assert len(first) == SETTINGS["DOCS"] * SETTINGS["DESIGNS"] + SETTINGS["REPLAY"]
    assert len(scored) - len(first) <= 2 * SETTINGS["DOCS"] * SETTINGS["DESIGNS"]
    assert all("score" in c for c in scored)
    played = [c for c in scored if c.get("rollouts")]
    assert len(played) >= SETTINGS["REPLAY"]
    summary = orjson.loads(proc.stdout.splitlines()[0])
    assert summary["kind"] == "round" and summary["round"] == 1
    assert summary["designs"] == SETTINGS["DOCS"] * SETTINGS["DESIGNS"]
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
    proc = subprocess.Popen(loop_cmd(config, runs_b), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    manifest = runs_b / "t" / "round-001" / "manifest.json"
    deadline = time.time() + 900
    # Kill once the run is inside the rollout stage (validate done, rollout not yet).
    while time.time() < deadline:
        if manifest.exists() and b'"validate"' in manifest.read_bytes():
            break
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stages = orjson.loads(manifest.read_bytes())["stages"]
    assert "validate" in stages and "regret" not in stages
    assert not (runs_b / "t" / "round-001" / "scored.jsonl.zst").exists()

    r = subprocess.run(loop_cmd(config, runs_b), capture_output=True, timeout=1200)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert b"spade-design" not in r.stderr  # finished stages are not run again
    run_b = runs_b / "t"
    for name in ("scored.jsonl.zst", "memory.jsonl.zst", "rollouts.jsonl.zst"):
        assert records(run_b / "round-001" / name, run_b) == records(run_a / "round-001" / name, run_a), name
    assert not list(run_b.rglob(".*partial*"))


def test_bin_pipeline_matches_the_loop(finished_run, tiny_model, corpus, tmp_path):
    run_a, _ = finished_run
    out = tmp_path / "round"
    env = {**os.environ, **{k: str(v) for k, v in SETTINGS.items()},
           "MODEL": str(tiny_model), "CORPUS": corpus, "ROUND": "1", "SEED": "0", "BATCH": "2",
           "MEMORY": str(run_a / "memory-000.jsonl.zst"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(ROOT / "bin" / "spade-round"), str(out)], env=env,
                       capture_output=True, timeout=1200)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    loop_scored = records(run_a / "round-001" / "scored.jsonl.zst", run_a)
    pipe_scored = records(out / "scored.jsonl.zst", out)
    assert pipe_scored == loop_scored
    assert records(out / "memory.jsonl.zst", out) == records(run_a / "round-001" / "memory.jsonl.zst", run_a)


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
    assert list(stages) == ["pool-source", "pool", "validate", "rollout", "regret", "train"]
    assert "--sandbox-package" in stages["rollout"]["argv"]
    scored = load_all(str(rnd / "scored.jsonl.zst"))
    assert len(scored) == 2
    assert all(c["validation"]["valid"] for c in scored), [c["validation"] for c in scored]
    assert all(len(c["rollouts"]["nohint"]) == 2 for c in scored)
