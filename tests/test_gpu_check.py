"""bench/gpu_check.py: the CPU smoke run completes with every part reported, a part that
fails or overruns its budget is reported without stopping the others, and (with a GPU)
the full check passes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from .helpers import ROOT

SCRIPT = ROOT / "bench" / "gpu_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_check(*args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout
    )
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, (
        f"stdout must be one JSON line, got {r.stdout[-2000:]!r}\n{r.stderr[-3000:]}"
    )
    return r, json.loads(lines[0])


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.slow
def test_quick_cpu_run_reports_every_part():
    r, summary = run_check("--device", "cpu", "--quick")
    gpu_check = load_script()
    parts = summary["parts"]
    assert list(parts) == list(gpu_check.PARTS)
    for name, result in parts.items():
        assert result["status"] in ("ok", "skipped"), (name, result, r.stderr[-3000:])
        if result["status"] == "skipped":
            assert result["reason"], name
        assert result["seconds"] <= result["budget_s"], (name, result)
    assert r.returncode == 0 and summary["failed"] == 0
    # What must run on any CPU machine, with figures that say it did.
    for name in (
        "versions",
        "models",
        "hf_generate",
        "grpo_designer",
        "grpo_agent",
        "fsdp",
        "reload",
    ):
        assert parts[name]["status"] == "ok", (name, parts[name])
    hf = parts["hf_generate"]
    for b in gpu_check.shapes(True)["batches"]:
        assert hf[f"batch_{b}"]["tokens"] > 0 and hf[f"batch_{b}"]["tokens_per_s"] > 0
    for role in ("grpo_designer", "grpo_agent"):
        assert parts[role]["steps"] == 1 and parts[role]["tokens_per_s"] > 0
    assert parts["fsdp"]["processes"] == 1 and parts["fsdp"]["steps"] >= 1
    assert set(parts["reload"]) >= {"fsdp", "grpo_designer"}
    assert all(parts["reload"][k]["changed"] > 0 for k in ("fsdp", "grpo_designer"))
    if shutil.which("bwrap"):
        assert parts["round"]["status"] == "ok" and parts["round"]["episodes"] > 0
    if importlib.util.find_spec("vllm") is None:
        assert parts["vllm"]["status"] == "skipped" and "vllm" in parts["vllm"]["reason"]
    assert summary["total_seconds"] < gpu_check.TOTAL_BUDGET
    assert "gpu check on cpu (quick)" in r.stderr and "hf_generate" in r.stderr


@pytest.mark.skipif("not _no_cuda()")
def test_failed_part_does_not_stop_the_next():
    # Without CUDA, `--device cuda` fails the versions part; vllm still runs (and skips).
    r, summary = run_check("--device", "cuda", "--parts", "versions,vllm")
    assert r.returncode == 1 and summary["failed"] >= 1
    assert summary["parts"]["versions"]["status"] == "failed"
    assert "no CUDA device" in summary["parts"]["versions"]["reason"]
    assert (
        summary["parts"]["vllm"]["status"] in ("skipped", "failed")
        and summary["parts"]["vllm"]["reason"]
    )
    assert "versions" in r.stderr and "failed" in r.stderr


def test_part_over_budget_is_killed(tmp_path):
    gpu_check = load_script()
    ctx = tmp_path / "context.json"
    ctx.write_text(json.dumps({"work": str(tmp_path), "device": "cpu", "quick": True}))
    result = gpu_check.spawn("versions", ctx, timeout=0.05)  # importing torch takes longer
    assert result["status"] == "failed" and "over its budget" in result["reason"]


def test_unknown_part_is_a_usage_error():
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--parts", "versions,warp-drive"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "warp-drive" in r.stderr


@pytest.mark.gpu
def test_full_check_on_the_gpu():
    r, summary = run_check(timeout=560)
    parts = summary["parts"]
    assert summary["failed"] == 0, r.stderr[-4000:]
    assert summary["total_seconds"] <= 480
    assert parts["hf_generate"]["ratio"] > 1
    assert parts["grpo_designer"]["peak_gpu_mib"] > 0 and parts["grpo_agent"]["peak_gpu_mib"] > 0
