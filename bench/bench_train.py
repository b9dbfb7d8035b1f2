"""Training throughput: spade-train on stored samples vs TRL generating its own completions.

Both sides run TRL's GRPOTrainer with the same tiny model, batch shape, loss and number
of optimizer steps, in this one process:

- `trl-generate`: a prompt dataset; GRPOTrainer samples G completions per prompt with
  transformers `generate` at every step (the usual online GRPO loop), then trains;
- `spade-stored`: the very same prompt/completion token ids (recorded from the first
  run) fed back as stored samples through spade-train's rollout_func; no generation.

Throughput = tokens through the training forward/backward (prompt + completion) per
second of `trainer.train()` wall time (model loading excluded on both sides). On a GPU
the peak memory of each run is printed too, per million parameters.

    python bench/bench_train.py            # ~1-2 minutes on 2 CPU cores
    python bench/bench_train.py --prompts 32 --completion-length 128
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def build_model(out: Path) -> Path:
    from spade_cli.tinymodel import build_tiny_model

    if not (out / "config.json").exists():
        build_tiny_model(out, seed=0)
    return out


def peak_mem():
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated()
    return None


def reset_mem():
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def run_trl_generate(model_dir: Path, prompts: list[str], args, work: Path):
    """Plain online GRPO: TRL generates, a reward function scores (and records) the rows."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig

    from spade_cli.train.trainer import SpadeGRPOTrainer as Trainer

    recorded = []
    rng = random.Random(0)

    def reward(prompts, completions, completion_ids, **kw):
        out = []
        for p, c in zip(prompts, completion_ids, strict=True):
            r = rng.random()
            recorded.append({"prompt": p, "completion_ids": list(c), "reward": r})
            out.append(r)
        return out

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16 if args.bf16 else torch.float32
    )
    cfg = GRPOConfig(
        output_dir=str(work / "trl"),
        per_device_train_batch_size=args.batch,
        num_generations=args.group,
        max_completion_length=args.completion_length,
        learning_rate=1e-5,
        logging_steps=1000,
        save_strategy="no",
        report_to=[],
        bf16=args.bf16,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=True,
        seed=0,
        num_train_epochs=1,
        temperature=1.0,
    )
    trainer = Trainer(
        model=model,
        reward_funcs=[reward],
        args=cfg,
        processing_class=tok,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
    )
    trainer.remove_callback(PrinterCallback)
    trainer._spade_tokens, trainer._spade_total, trainer._spade_t0 = 0, 0.0, time.perf_counter()
    reset_mem()
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = trainer._spade_total + trainer._spade_tokens
    nparams = sum(p.numel() for p in model.parameters())
    return (
        {
            "tokens": tokens,
            "seconds": seconds,
            "cpu": cpu,
            "steps": trainer.state.global_step,
            "peak_bytes": peak_mem(),
            "params": nparams,
        },
        recorded,
        tok,
    )


def run_spade_stored(model_dir: Path, recorded: list[dict], tok, args, work: Path):
    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import build_trainer, load_groups

    # One candidate per recorded completion; the G rows of one prompt form one group.
    recs = []
    for i, row in enumerate(recorded):
        g = i // args.group
        recs.append(
            {
                "kind": "candidate",
                "v": 1,
                "id": f"c{i}",
                "parents": [],
                "group": f"g{g}",
                "design": {
                    "prompt_ids": tok(row["prompt"], add_special_tokens=False)["input_ids"],
                    "completion_ids": row["completion_ids"] or [tok.eos_token_id],
                },
                "score": {"reward": row["reward"]},
            }
        )
    data = work / "stored.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    cfg = TrainJob(
        model=str(model_dir),
        output_dir=str(work / "spade"),
        inputs=[str(data)],
        role="designer",
        per_device_batch_size=args.batch,
        learning_rate=1e-5,
        logging_steps=1000,
        bf16=args.bf16,
        seed=0,
    )
    groups, _ = load_groups(cfg)
    trainer, plan, _ = build_trainer(cfg, groups, str(work / "spade.partial"))
    reset_mem()
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = trainer._spade_total + trainer._spade_tokens
    return {
        "tokens": tokens,
        "seconds": seconds,
        "cpu": cpu,
        "steps": trainer.state.global_step,
        "peak_bytes": peak_mem(),
        "params": sum(p.numel() for p in trainer.model.parameters()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--prompts", type=int, default=8, help="distinct prompts (groups)")
    ap.add_argument("--group", type=int, default=4, help="completions per prompt (G)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per optimizer step")
    ap.add_argument("--completion-length", type=int, default=64)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 (GPU only)")
    ap.add_argument(
        "--model", help="model directory (default: the tiny model, built in bench/data/)"
    )
    args = ap.parse_args()

    import torch

    torch.manual_seed(0)
    model_dir = (
        Path(args.model)
        if args.model
        else build_model(Path(__file__).parent / "data" / "tiny-model")
    )
    prompts = [
        f"Design a small text environment about topic number {i}: rules, reward, hint."
        for i in range(args.prompts)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trl, recorded, tok = run_trl_generate(model_dir, prompts, args, work)
        spade = run_spade_stored(model_dir, recorded, tok, args, work)
    device = (
        torch.cuda.get_device_name()
        if torch.cuda.is_available()
        else f"CPU x{torch.get_num_threads()} threads"
    )
    print(
        f"device: {device}; model {trl['params'] / 1e6:.2f}M params; {args.prompts} prompts x G={args.group}, "
        f"completions <= {args.completion_length} tokens, batch {args.batch}"
    )
    print(
        f"{'run':<14}{'steps':>6}{'tokens':>9}{'wall s':>9}{'tokens/s':>10}{'cpu s':>8}"
        f"{'tokens/cpu-s':>14}{'peak MB/Mparam':>16}"
    )
    for name, r in (("trl-generate", trl), ("spade-stored", spade)):
        mem = f"{r['peak_bytes'] / 2**20 / (r['params'] / 1e6):.1f}" if r["peak_bytes"] else "-"
        print(
            f"{name:<14}{r['steps']:>6}{int(r['tokens']):>9}{r['seconds']:>9.2f}"
            f"{r['tokens'] / r['seconds']:>10.0f}{r['cpu']:>8.2f}{r['tokens'] / r['cpu']:>14.0f}{mem:>16}"
        )
    ratio = (spade["tokens"] / spade["seconds"]) / (trl["tokens"] / trl["seconds"])
    cpu_ratio = (spade["tokens"] / spade["cpu"]) / (trl["tokens"] / trl["cpu"])
    print(
        f"ratio spade-stored / trl-generate: {ratio:.2f}x tokens per wall second, "
        f"{cpu_ratio:.2f}x tokens per CPU second (CPU time is the fairer figure on a shared machine)"
    )
    if trl["tokens"] != spade["tokens"]:
        print(f"note: token counts differ ({trl['tokens']} vs {spade['tokens']})")


if __name__ == "__main__":
    main()
