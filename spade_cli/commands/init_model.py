"""spade-init-model: build an offline model (tokenizer + chat template + weights): the tiny
random one, or the micro world's pretrained one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..cli import Quiet, Verbose, entry, log, make_app
from ..errors import UsageError

app = make_app(
    "Build a tiny random-init causal LM in HF format, fully offline, in seconds: a "
    "byte-level BPE tokenizer trained on text shipped with Python, a ChatML chat template "
    "with Qwen-style tool calls, and a ~0.4M-parameter Qwen3-architecture model. It loads "
    "with AutoTokenizer/AutoModelForCausalLM and every engine; the CPU demo and the tests "
    "use it. With --kind micro: the micro world's ~1.8M-parameter model, pretrained on CPU on "
    "synthetic designs and episodes in the real prompts' formats (its seed-0 build ships)."
    "\n\nExample: spade-init-model models/tiny && spade-design docs.jsonl --model models/tiny"
)


@app.command()
def init_model(
    out_dir: Annotated[
        Path, typer.Argument(help="Directory to write the model into.", show_default=False)
    ],
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="tiny: random init in seconds (sizes below); "
            "micro: the micro world's model, pretrained on its transcripts (seed 0: the "
            "build that ships with spade; other seeds: a few minutes on CPU, then cached in "
            "$SPADE_CACHE or ~/.cache/spade; spade_cli/micro).",
        ),
    ] = "tiny",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the weight initialisation.")] = 0,
    train_steps: Annotated[
        int,
        typer.Option(
            "--train-steps",
            min=0,
            help="Optimiser steps on local text after the random "
            "init (~0.25 s each on a CPU core); 0 keeps pure random init.",
        ),
    ] = 0,
    vocab_size: Annotated[
        int, typer.Option("--vocab-size", min=512, help="Tokenizer vocabulary size.")
    ] = 4096,
    hidden_size: Annotated[int, typer.Option("--hidden-size", min=16, help="Model width.")] = 64,
    layers: Annotated[
        int, typer.Option("--layers", min=1, help="Number of transformer layers.")
    ] = 2,
    max_len: Annotated[
        int, typer.Option("--max-len", min=256, help="Context length (max_position_embeddings).")
    ] = 8192,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a non-empty directory.")
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="micro: pretrain from scratch (about 3 minutes on 2 cores) instead of "
            "copying the cached or shipped build of the same recipe; the cache is left alone.",
        ),
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    from ..tinymodel import build_tiny_model

    if kind not in ("tiny", "micro"):
        raise UsageError(f"--kind must be tiny or micro, got {kind!r}")
    if rebuild and kind != "micro":
        raise UsageError("--rebuild is for --kind micro (the tiny model is always built afresh)")
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise UsageError(f"{out_dir}: directory is not empty (use --force to overwrite)")
    if kind == "micro":
        from ..micro.model import build_micro_model

        path = build_micro_model(out_dir, seed=seed, use_cache=not rebuild, log=log.info)
        log.info("wrote micro model to %s", path)
        print(path)
        return
    if hidden_size % 16:
        raise UsageError("--hidden-size must be a multiple of 16 (4 heads of width >= 4)")
    path = build_tiny_model(
        out_dir,
        seed=seed,
        train_steps=train_steps,
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=3 * hidden_size,
        num_hidden_layers=layers,
        head_dim=hidden_size // 4,
        max_position_embeddings=max_len,
    )
    log.info("wrote tiny model to %s", path)
    print(path)


main = entry(app, "spade-init-model")
