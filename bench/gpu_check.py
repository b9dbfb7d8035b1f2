"""A GPU check in one prepared run: does every GPU path of the toolchain work, and how fast?

Parts, each in its own subprocess with its own time budget, so one that fails, hangs or
crashes the interpreter (a CUDA error, an OOM kill) is reported and the others still run:

  versions       Python, PyTorch, CUDA, cuDNN, the GPU, and the library versions
  models         the tiny model (as spade-init-model builds it) and a random-initialised model of a
                 realistic shape (Qwen3-0.6B's body, ~0.46B parameters; no downloads)
  hf_generate    the hf engine generating on the device (bf16 on CUDA): tokens/s at
                 batch 1 / 16 / 64 on the realistic model, and the batch-64 / batch-1 ratio
  round          design -> validate -> rollout -> regret -> train on the tiny model, the
                 engine on the device (the CLI commands, as spade-loop runs them)
  grpo_designer  one GRPO optimizer step on stored designer samples (realistic model,
                 bf16 on CUDA): tokens/s and peak GPU memory
  grpo_agent     the same for agent episodes (with environment tokens masked out)
  fsdp           spade-train under `accelerate launch` with examples/accelerate/fsdp.yaml
                 on one process
  reload         the checkpoints written above load again and generate; trained
                 weights differ from the starting ones
  vllm           with vLLM importable and CUDA present, the vllm engine on the hf
                 engine's prompts: tokens/s and the ratio to hf, then a restart on the
                 grpo_designer checkpoint (else skipped, saying why)

Output: one JSON line on stdout (every part with its status "ok", "failed" or "skipped",
its seconds, budget and figures, or its reason), and a short table on stderr. Exit code
0 when no part failed, 1 when one did, 2 for bad arguments.

    python bench/gpu_check.py                      # CUDA, realistic shapes, <= 8 minutes
    python bench/gpu_check.py --device cpu --quick # small shapes, fp32: smoke test of the script
    just gpu-check --device cpu --quick

Designer code runs in the bubblewrap sandbox; without bwrap the round is skipped unless
`--unsafe-no-sandbox` is given (the same opt-in the CLI commands ask for).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# name -> (budget seconds on a GPU run, budget seconds with --quick); run in this order.
# The quick budgets only catch hangs: they leave room for a CPU shared with other jobs.
PARTS = {
    "versions": (30, 30),
    "models": (90, 60),
    "hf_generate": (75, 60),
    "round": (120, 150),
    "grpo_designer": (60, 90),
    "grpo_agent": (60, 90),
    "fsdp": (75, 120),
    "reload": (40, 60),
    "vllm": (120, 30),
}
TOTAL_BUDGET = 480  # seconds: the whole run, whatever the parts' own budgets add up to
DEPENDS = {
    "hf_generate": "models",
    "round": "models",
    "grpo_designer": "models",
    "grpo_agent": "models",
    "fsdp": "models",
    "reload": "models",
    "vllm": "models",
}


class Skip(Exception):  # noqa: N818 - a part's way of saying "skipped: <reason>"
    pass


# --------------------------------------------------------------------------- shapes


def shapes(quick: bool) -> dict:
    if quick:
        return dict(
            model=dict(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                vocab_size=4096,
                max_position_embeddings=4096,
            ),
            batches=[1, 4, 8],
            prompt_len=16,
            new_tokens=8,
            group=2,
            groups=2,
            train_prompt=16,
            train_completion=8,
            design_tokens=16,
            agent_tokens=8,
            design_prompt=["--doc-tokens", "64", "--max-prompt-tokens", "2560"],
        )
    # Qwen3-0.6B's body (28 layers, width 1024, 16 query / 8 KV heads of 128, MLP 3072) with
    # the vocabulary a BPE reaches on the local text (~20k of the 32k asked): ~0.46B
    # parameters. Qwen's 152k vocabulary makes Qwen3-0.6B do ~30% more work per token.
    return dict(
        model=dict(
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=32768,
            max_position_embeddings=4096,
        ),
        batches=[1, 16, 64],
        prompt_len=128,
        new_tokens=128,
        group=8,
        groups=4,
        train_prompt=256,
        train_completion=256,
        design_tokens=64,
        agent_tokens=24,
        design_prompt=[],
    )


def bench_prompts(n: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """The same token-id prompts for every engine (ids above the special tokens)."""
    rng = random.Random(seed)
    return [[rng.randrange(8, vocab) for _ in range(length)] for _ in range(n)]


def cli(args: list, log) -> None:
    """Run `spade-<command> args`, its stderr appended to the open file `log`."""
    log.flush()
    start = log.tell()
    r = subprocess.run(
        [sys.executable, "-m", "spade_cli", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=child_env(),
    )
    if r.returncode != 0:
        with open(log.name, "rb") as f:
            f.seek(start)
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
        raise RuntimeError(
            f"spade-{args[0]} exited {r.returncode}: {(lines or ['no output'])[-1][:300]}"
        )


def child_env() -> dict:
    paths = [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TRL_EXPERIMENTAL_SILENCE": "1"}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --------------------------------------------------------------------------- parts


def part_versions(ctx: dict) -> dict:
    import torch

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    out = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    for dist in ("transformers", "accelerate", "trl", "peft", "datasets", "vllm", "spade-cli"):
        out[dist] = version(dist)
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
        out["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        out["cudnn"] = torch.backends.cudnn.version()
        out["bf16"] = torch.cuda.is_bf16_supported()
    if ctx["device"].startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no CUDA device")
    return out


def part_models(ctx: dict) -> dict:
    from transformers import AutoConfig

    from spade_cli.tinymodel import build_tiny_model

    work, s = ctx["work"], ctx["shapes"]
    # What spade-init-model writes, built here without a second process. The realistic
    # model is the same recipe at full size: its tokenizer (trained on local text) decodes
    # every id the random weights can sample, which a borrowed tokenizer would not.
    tiny = build_tiny_model(work / "tiny", seed=0)
    realistic = build_tiny_model(work / "realistic", seed=0, **s["model"])
    cfg = AutoConfig.from_pretrained(realistic)
    per_layer = (
        4
        * cfg.hidden_size
        * cfg.head_dim
        * (cfg.num_attention_heads + cfg.num_key_value_heads)
        // 2
        + 3 * cfg.hidden_size * cfg.intermediate_size
    )
    params = cfg.num_hidden_layers * per_layer + cfg.vocab_size * cfg.hidden_size
    return {
        "tiny": str(tiny),
        "realistic": str(realistic),
        "realistic_params_m": round(params / 1e6, 1),
        "realistic_vocab": cfg.vocab_size,
        "realistic_layers": cfg.num_hidden_layers,
    }


def _generate_tps(engine, prompts: list[list[int]], new_tokens: int) -> tuple[float, int, float]:
    from spade_cli.engines import Sampling

    samplings = [
        Sampling(temperature=1.0, max_tokens=new_tokens, seed=i) for i in range(len(prompts))
    ]
    t0 = time.perf_counter()
    gens = engine.generate(prompts, samplings)
    seconds = time.perf_counter() - t0
    tokens = sum(len(g.completion_ids) for g in gens)
    return tokens / seconds, tokens, seconds


def _engine_throughput(engine, ctx: dict) -> dict:
    s = ctx["shapes"]
    vocab = len(engine.tokenizer)
    _generate_tps(
        engine, bench_prompts(1, s["prompt_len"], vocab, seed=99), 4
    )  # warm-up: kernels, allocator
    out = {"prompt_len": s["prompt_len"], "new_tokens": s["new_tokens"]}
    for b in s["batches"]:
        tps, tokens, seconds = _generate_tps(
            engine, bench_prompts(b, s["prompt_len"], vocab), s["new_tokens"]
        )
        out[f"batch_{b}"] = {
            "tokens_per_s": round(tps, 1),
            "tokens": tokens,
            "seconds": round(seconds, 3),
        }
    lo, hi = s["batches"][0], s["batches"][-1]
    out["ratio"] = round(out[f"batch_{hi}"]["tokens_per_s"] / out[f"batch_{lo}"]["tokens_per_s"], 2)
    return out


def part_hf_generate(ctx: dict) -> dict:
    from spade_cli.engines import load_engine

    engine = load_engine(
        str(ctx["work"] / "realistic"),
        "hf",
        device=ctx["device"],
        dtype=ctx["dtype"],
        max_batch_size=max(ctx["shapes"]["batches"]),
    )
    try:
        return {"device": engine.device, **_engine_throughput(engine, ctx)}
    finally:
        engine.close()


def part_round(ctx: dict) -> dict:
    from spade_cli.envs.library import load_library
    from spade_cli.memory import entries_from_library, save_memory

    sandbox = []
    if shutil.which("bwrap") is None:
        if not ctx["unsafe_no_sandbox"]:
            raise Skip(
                "bwrap not found: designer code runs only in the sandbox "
                "(install bubblewrap, or pass --unsafe-no-sandbox)"
            )
        sandbox = ["--unsafe-no-sandbox"]
    work, s = ctx["work"] / "round", ctx["shapes"]
    work.mkdir(exist_ok=True)
    tiny = ctx["work"] / "tiny"
    engine = ["--model", tiny, "--engine", "hf", "--device", ctx["device"]]
    bf16 = ["--bf16"] if ctx["bf16"] else ["--no-bf16"]
    memory = work / "memory.jsonl.zst"
    save_memory(str(memory), entries_from_library(load_library()))
    stages = [
        (
            "sample-docs",
            ["sample-docs", ctx["corpus"], "-n", "1", "--seed", "0", "-o", work / "docs.jsonl"],
        ),
        (
            "design",
            [
                "design",
                work / "docs.jsonl",
                *engine,
                "-G",
                "2",
                "--max-tokens",
                s["design_tokens"],
                *s["design_prompt"],
                "--no-memory",
                "--round",
                "1",
                "--seed",
                "0",
                "-o",
                work / "cands.jsonl",
            ],
        ),
        (
            "validate",
            [
                "validate",
                work / "cands.jsonl",
                "--seeds",
                "1",
                "--workers",
                "2",
                *sandbox,
                "-o",
                work / "validated.jsonl",
            ],
        ),
        (
            "replay",
            [
                "memory",
                "replay",
                memory,
                "-n",
                "2",
                "--round",
                "1",
                "--seed",
                "0",
                "-o",
                work / "replay.jsonl",
            ],
        ),
        (
            "rollout",
            [
                "rollout",
                work / "validated.jsonl",
                "--replay",
                work / "replay.jsonl",
                *engine,
                "-k",
                "2",
                "--max-turns",
                "2",
                "--max-tokens",
                s["agent_tokens"],
                "--seed",
                "0",
                *sandbox,
                "-o",
                work / "rollouts.jsonl",
            ],
        ),
        (
            "regret",
            ["regret", work / "rollouts.jsonl", "--round", "1", "-o", work / "scored.jsonl"],
        ),
        (
            "train",
            [
                "train",
                work / "scored.jsonl",
                "--model",
                tiny,
                "--output-dir",
                work / "checkpoint",
                "--role",
                "both",
                "--per-device-batch-size",
                "2",
                "--if-empty",
                "keep",
                *bf16,
                "--seed",
                "0",
                "-o",
                work / "checkpoint.jsonl",
            ],
        ),
    ]
    seconds = {}
    with open(work / "round.log", "ab") as log:
        for name, argv in stages:
            t0 = time.perf_counter()
            cli(argv, log)
            seconds[name] = round(time.perf_counter() - t0, 2)
    episodes = 0
    for line in (work / "rollouts.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rollouts = rec.get("rollouts") or {}
        episodes += sum(len(rollouts.get(cond) or []) for cond in ("nohint", "hint"))
    ckpt = json.loads((work / "checkpoint.jsonl").read_text().splitlines()[0])
    count = lambda p: len((work / p).read_text().splitlines())  # noqa: E731
    return {
        "stage_seconds": seconds,
        "candidates": count("cands.jsonl"),
        "episodes": episodes,
        "train_steps": ckpt.get("steps"),
        "checkpoint": ckpt.get("path"),
        "sandbox": "bwrap" if not sandbox else "none (--unsafe-no-sandbox)",
    }


def _stored_samples(role: str, ctx: dict, vocab: int) -> list[dict]:
    """Scored candidates in the record format spade-regret writes, with rewards that vary
    inside every group so GRPO has an advantage to learn from."""
    s, rng = ctx["shapes"], random.Random(1)
    ids = lambda n: [rng.randrange(8, vocab) for _ in range(n)]  # noqa: E731
    recs = []
    for g in range(s["groups"]):
        prompt = ids(s["train_prompt"])
        if role == "designer":
            for j in range(s["group"]):
                recs.append(
                    {
                        "kind": "candidate",
                        "v": 1,
                        "id": f"d{g}-{j}",
                        "parents": [],
                        "group": f"g{g}",
                        "design": {
                            "prompt_ids": prompt,
                            "completion_ids": ids(s["train_completion"]),
                        },
                        "score": {"reward": j / s["group"]},
                    }
                )
        else:
            episodes = []
            for j in range(s["group"]):
                n = s["train_completion"]
                # Model turns with an environment observation in the middle (masked out).
                mask = [1] * (n // 4) + [0] * (n // 4) + [1] * (n - n // 2)
                episodes.append(
                    {
                        "prompt_ids": prompt,
                        "completion_ids": ids(n),
                        "env_mask": mask,
                        "return": j / s["group"],
                        "stop": "terminated",
                    }
                )
            recs.append(
                {
                    "kind": "candidate",
                    "v": 1,
                    "id": f"a{g}",
                    "parents": [],
                    "rollouts": {"nohint": episodes},
                }
            )
    return recs


def _grpo_step(role: str, ctx: dict) -> dict:
    import torch
    from transformers import AutoTokenizer

    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import run

    model = ctx["work"] / "realistic"
    vocab = len(AutoTokenizer.from_pretrained(model))
    data = write_jsonl(ctx["work"] / f"{role}-samples.jsonl", _stored_samples(role, ctx, vocab))
    s = ctx["shapes"]
    rows = s["groups"] * s["group"]
    cfg = TrainJob(
        model=str(model),
        output_dir=str(ctx["work"] / f"grpo-{role}"),
        inputs=[str(data)],
        role=role,
        per_device_batch_size=rows,
        group_size=s["group"],
        learning_rate=1e-4,
        bf16=ctx["bf16"],
        seed=0,
        overwrite=True,
    )
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    info = run(cfg)
    tokens = rows * (s["train_prompt"] + s["train_completion"])
    out = {
        "model": model.name,
        "steps": info["steps"],
        "rows": rows,
        "tokens": tokens,
        "seconds": info["seconds"],
        "tokens_per_s": round(tokens / max(info["seconds"], 1e-9), 1),
        "train_loss": info["train_loss"],
        "checkpoint": info["path"],
        "bf16": ctx["bf16"],
    }
    if torch.cuda.is_available():
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    if info["steps"] < 1:
        raise RuntimeError(f"no optimizer step was taken: {info}")
    return out


def part_grpo_designer(ctx: dict) -> dict:
    return _grpo_step("designer", ctx)


def part_grpo_agent(ctx: dict) -> dict:
    return _grpo_step("agent", ctx)


def part_fsdp(ctx: dict) -> dict:
    from transformers import AutoTokenizer

    work = ctx["work"] / "fsdp"
    work.mkdir(exist_ok=True)
    tiny = ctx["work"] / "tiny"
    config = REPO / "examples" / "accelerate" / "fsdp.yaml"
    if ctx["device"] == "cpu":
        # The example's bf16 mixed precision and NCCL need a GPU; the same FSDP2 settings
        # on CPU (gloo, fp32) exercise the launch, the sharding and the full-state save.
        text = config.read_text().replace("use_cpu: false", "use_cpu: true")
        config = work / "fsdp-cpu.yaml"
        config.write_text(text.replace("mixed_precision: bf16", "mixed_precision: 'no'"))
    data = write_jsonl(
        work / "samples.jsonl",
        _stored_samples("designer", ctx, len(AutoTokenizer.from_pretrained(tiny))),
    )
    bf16 = ["--bf16"] if ctx["bf16"] else ["--no-bf16"]
    t0 = time.perf_counter()
    with open(work / "fsdp.log", "ab") as log:
        cli(
            [
                "train",
                data,
                "--model",
                tiny,
                "--output-dir",
                work / "checkpoint",
                "--role",
                "designer",
                "--per-device-batch-size",
                ctx["shapes"]["groups"] * ctx["shapes"]["group"],
                "--lr",
                "1e-3",
                *bf16,
                "--num-processes",
                "1",
                "--accelerate-config",
                config,
                "--seed",
                "0",
                "--overwrite",
                "-o",
                work / "checkpoint.jsonl",
            ],
            log,
        )
    ckpt = json.loads((work / "checkpoint.jsonl").read_text().splitlines()[0])
    return {
        "config": str(config.relative_to(REPO) if config.is_relative_to(REPO) else config.name),
        "seconds": round(time.perf_counter() - t0, 2),
        "steps": ckpt.get("steps"),
        "processes": ckpt.get("processes"),
        "checkpoint": ckpt.get("path"),
    }


def part_reload(ctx: dict) -> dict:
    import torch
    from safetensors.torch import load_file

    from spade_cli.engines import Sampling, load_engine

    pairs = [
        ("fsdp", ctx["work"] / "fsdp" / "checkpoint", ctx["work"] / "tiny"),
        ("grpo_designer", ctx["work"] / "grpo-designer", None),
    ]
    out = {}
    for name, ckpt, base in pairs:
        if not (ckpt / "config.json").exists():
            continue
        if base is None:
            base = Path(json.loads((ckpt / "spade_train.json").read_text())["result"]["base_model"])
        engine = load_engine(str(ckpt), "hf", device=ctx["device"], dtype=ctx["dtype"])
        try:
            gens = engine.generate(
                bench_prompts(2, 8, len(engine.tokenizer)), Sampling(max_tokens=4, seed=0)
            )
        finally:
            engine.close()
        new, old = _weights(ckpt, load_file), _weights(base, load_file)
        shared = sorted(set(new) & set(old))
        if not shared:
            raise RuntimeError(f"{ckpt}: no tensor names in common with {base}")
        changed = sum(not torch.equal(new[k].float(), old[k].float()) for k in shared)
        finite = all(torch.isfinite(t.float()).all() for t in new.values())
        out[name] = {
            "tensors": len(new),
            "changed": changed,
            "finite": bool(finite),
            "generated_tokens": sum(len(g.completion_ids) for g in gens),
        }
        if not finite or changed == 0:
            raise RuntimeError(
                f"{name} checkpoint: finite={finite}, {changed}/{len(shared)} tensors changed"
            )
    if not out:
        raise Skip("no checkpoint to reload: the fsdp and grpo_designer parts wrote none")
    return out


def _weights(model_dir: Path, load_file) -> dict:
    tensors = {}
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return tensors


def part_vllm(ctx: dict) -> dict:
    if importlib.util.find_spec("vllm") is None:
        raise Skip("vllm is not importable here (pip install 'spade-cli[gpu]' on a CUDA machine)")
    if not ctx["device"].startswith("cuda"):
        raise Skip("the vllm engine needs CUDA (--device cuda)")
    from spade_cli.engines import Sampling, load_engine

    engine = load_engine(
        str(ctx["work"] / "realistic"),
        "vllm",
        dtype=ctx["dtype"],
        gpu_memory_utilization=0.5,
        max_model_len=4096,
        seed=0,
    )
    try:
        out = _engine_throughput(engine, ctx)
        # A new round's checkpoint: the engine restarts on it with the same settings.
        ckpt = ctx["work"] / "grpo-designer"
        if (ckpt / "config.json").exists():
            t0 = time.perf_counter()
            engine.reload(str(ckpt))
            gens = engine.generate(
                bench_prompts(2, 8, len(engine.tokenizer)), Sampling(max_tokens=4, seed=0)
            )
            out["reload"] = {
                "checkpoint": ckpt.name,
                "seconds": round(time.perf_counter() - t0, 2),
                "generated_tokens": sum(len(g.completion_ids) for g in gens),
            }
        return out
    finally:
        engine.close()


# --------------------------------------------------------------------------- driver


def run_part(name: str, ctx: dict) -> dict:
    """In the part's own process: run it and return its result record."""
    fn = globals()[f"part_{name}"]
    try:
        return {"status": "ok", **fn(ctx)}
    except Skip as e:
        return {"status": "skipped", "reason": str(e)}


def spawn(name: str, ctx_file: Path, timeout: float) -> dict:
    """Run one part in a subprocess (its own session, so a timeout ends its children too)."""
    log = ctx_file.parent / f"{name}.stderr"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--part",
        name,
        "--context",
        str(ctx_file),
    ]
    t0 = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, env=child_env(), start_new_session=True
        )
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {
                "status": "failed",
                "reason": f"over its budget of {timeout:.0f} s (killed)",
                "seconds": round(time.perf_counter() - t0, 2),
            }
        except BaseException:  # Ctrl-C: the part runs in its own session and would outlive us
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    seconds = round(time.perf_counter() - t0, 2)
    lines = stdout.decode(errors="replace").strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or [
            "no output"
        ]
        how = (
            f"exit {proc.returncode}"
            if proc.returncode >= 0
            else f"killed by signal {-proc.returncode}"
        )
        result = {"status": "failed", "reason": f"{how}: {tail[0][:300]}"}
    result["seconds"] = seconds
    return result


def table(summary: dict) -> str:
    rows = [
        f"gpu check on {summary['device']}{' (quick)' if summary['quick'] else ''}: "
        f"{summary['total_seconds']:.0f} s, {summary['failed']} failed"
    ]
    for name, r in summary["parts"].items():
        rows.append(
            f"  {name:<14}{r['status']:<8}{r.get('seconds', 0):>7.1f} s / {r.get('budget_s', 0):>3} s  "
            f"{headline(name, r)}"
        )
    return "\n".join(rows)


def headline(name: str, r: dict) -> str:
    if r["status"] != "ok":
        return r.get("reason", "")
    if name == "versions":
        return (
            f"torch {r['torch']} cuda {r['cuda']} transformers {r['transformers']} trl {r['trl']} "
            f"accelerate {r['accelerate']} vllm {r['vllm']} {r.get('gpu', '')}"
        )
    if name == "models":
        return f"realistic {r['realistic_params_m']}M params, {r['realistic_layers']} layers, vocab {r['realistic_vocab']}"
    if name in ("hf_generate", "vllm"):
        per = ", ".join(
            f"b{k[6:]} {v['tokens_per_s']:.0f}" for k, v in r.items() if k.startswith("batch_")
        )
        extra = f", {r['vs_hf']}x hf" if "vs_hf" in r else ""
        again = (
            f"; restarted on {r['reload']['checkpoint']} in {r['reload']['seconds']} s"
            if "reload" in r
            else ""
        )
        return f"tokens/s {per}; ratio {r['ratio']}x{extra}{again}"
    if name == "round":
        return (
            f"{r['candidates']} designs, {r['episodes']} episodes, {r['train_steps']} train steps"
        )
    if name.startswith("grpo"):
        mem = f", peak {r['peak_gpu_mib']} MiB" if "peak_gpu_mib" in r else ""
        return f"steps {r['steps']}, {r['tokens_per_s']:.0f} tokens/s{mem}"
    if name == "fsdp":
        return f"steps {r['steps']}, processes {r['processes']}, {r['config']}"
    if name == "reload":
        return "; ".join(
            f"{k}: {v['changed']}/{v['tensors']} tensors changed"
            for k, v in r.items()
            if isinstance(v, dict)
        )
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument(
        "--quick", action="store_true", help="small shapes and few tokens (the CPU smoke test)"
    )
    ap.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated subset of: " + ", ".join(PARTS)
    )
    ap.add_argument(
        "--work",
        help="keep the models, records and logs in this directory (default: a temporary one)",
    )
    ap.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run the round's designer code without bwrap",
    )
    ap.add_argument("--part", help=argparse.SUPPRESS)
    ap.add_argument("--context", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:  # one part, in its own process
        ctx = json.loads(Path(args.context).read_text())
        ctx["work"] = Path(ctx["work"])
        print(json.dumps(run_part(args.part, ctx)), flush=True)
        return 0
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PARTS]
    if unknown:
        print(
            f"gpu_check: unknown part(s) {', '.join(unknown)} (choose from {', '.join(PARTS)})",
            file=sys.stderr,
        )
        return 2
    if args.device != "cpu" and not args.device.startswith("cuda"):
        print(
            f"gpu_check: --device must be cpu, cuda or cuda:N, not {args.device!r}", file=sys.stderr
        )
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="spade-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        summary = check(args, wanted, work.resolve())
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary), flush=True)
    print(table(summary), file=sys.stderr)
    return 1 if summary["failed"] else 0


def check(args, wanted: list[str], work: Path) -> dict:
    from spade_cli.corpus.demo import build_demo_corpus

    corpus = work / "corpus.jsonl.zst"
    build_demo_corpus(str(corpus))
    bf16 = args.device != "cpu"
    device = args.device
    if device.startswith("cuda:"):
        # Every part (training too, which takes the default device) sees just that GPU.
        os.environ["CUDA_VISIBLE_DEVICES"], device = device.split(":", 1)[1], "cuda"
    ctx = {
        "device": device,
        "quick": args.quick,
        "bf16": bf16,
        "dtype": "bfloat16" if bf16 else "float32",
        "shapes": shapes(args.quick),
        "work": str(work),
        "corpus": str(corpus),
        "unsafe_no_sandbox": args.unsafe_no_sandbox,
    }
    ctx_file = work / "context.json"
    ctx_file.write_text(json.dumps(ctx))
    t_start, started = time.perf_counter(), datetime.now(UTC).isoformat(timespec="seconds")
    parts: dict[str, dict] = {}
    for name in PARTS:
        if name not in wanted:
            continue
        budget = PARTS[name][1 if args.quick else 0]
        left = TOTAL_BUDGET - (time.perf_counter() - t_start)
        need = DEPENDS.get(name)
        if need and need in parts and parts[need]["status"] != "ok":
            result = {
                "status": "skipped",
                "reason": f"needs the {need} part, which {parts[need]['status']}",
            }
        elif left < 10:
            result = {"status": "skipped", "reason": f"the run's {TOTAL_BUDGET} s were spent"}
        else:
            print(
                f"gpu_check: {name} (budget {min(budget, left):.0f} s)", file=sys.stderr, flush=True
            )
            result = spawn(name, ctx_file, min(budget, left))
        result["budget_s"] = budget
        parts[name] = result
        print(
            f"gpu_check: {name} {result['status']} in {result.get('seconds', 0):.1f} s {result.get('reason', '')}",
            file=sys.stderr,
            flush=True,
        )
    hf, vl = parts.get("hf_generate", {}), parts.get("vllm", {})
    if hf.get("status") == "ok" and vl.get("status") == "ok":
        top = f"batch_{shapes(args.quick)['batches'][-1]}"
        vl["vs_hf"] = round(vl[top]["tokens_per_s"] / hf[top]["tokens_per_s"], 2)
    return {
        "check": "gpu",
        "device": args.device,
        "quick": args.quick,
        "started": started,
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "failed": sum(r["status"] == "failed" for r in parts.values()),
        "parts": parts,
    }


if __name__ == "__main__":
    sys.exit(main())
