"""The micro model: a small Qwen3-shaped LM pretrained on CPU on micro-world transcripts.

`build_micro_model(out)` trains the tiny model's tokenizer (tinymodel.py: the same BPE
pipeline every loader reproduces), initialises a Qwen3 model of about 1.8M parameters and
pretrains it for `steps` AdamW steps on transcripts.py's synthetic designs and episodes,
with the loss on the assistant turns only. Seeded; the result is cached under
`cache_dir()` by its recipe (seed, steps, sizes, skill, code version).

The default recipe's build also ships in `weights/` (`just micro-weights` rewrites it):
a fresh machine copies it instead of pretraining for about ten minutes (709 s on 2 cores
whose reference workload, bench/micro_experiment.py's, took 0.65 s), and every machine runs
the model the evidence was measured with. Pretraining reads Python's own documentation,
so another Python version would build another model. `rebuild=True`
(spade-init-model --rebuild) pretrains from scratch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
from pathlib import Path

# 2: the switches name the switch their rule picks once the rule is known.
# 3: design prompts show memory as the published policy renders it (the library's entries
#    as exemplars, an avoid line); before, an avoid line was new to the model and most
#    designs under one were unplayable (docs/evidence.md).
# 4: 1.8M parameters instead of 1.1M, an agent that learns faster under GRPO; a design
#    imports the module and names its family once (`spade_micro.CodeEnv`), since at this
#    size recipe 3's answers named it twice and most disagreed (docs/evidence.md).
RECIPE_VERSION = 4
DEFAULTS = dict(
    vocab_size=4096,
    hidden_size=160,
    intermediate_size=480,
    num_hidden_layers=4,
    num_attention_heads=5,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=2048,
)
# Pretraining: steps of `batch` transcripts; `skill` is the expert's per-action reliability.
# At 1.1M parameters 1,200 steps imitated the expert twice as well as 600 on the validation
# split (0.32 against 0.15, in the world before the switches named their switch;
# docs/evidence.md): at 600 the model had not learnt to copy a symbol from the
# observation, and no RL step taught it. The 1.8M model reaches that loss in 1,000.
TRAIN = dict(
    steps=1000,
    batch=16,
    lr=3e-3,
    warmup=30,
    skill=0.7,
    design_share=0.25,
    hint_share=0.4,
    doc_tokens=48,
)


# The default recipe's build, as `just micro-weights` wrote it.
WEIGHTS = Path(__file__).resolve().with_name("weights")


def cache_dir() -> Path:
    base = os.environ.get("SPADE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "spade")
    return Path(base) / "micro-model"


def recipe(seed: int, **train) -> dict:
    return {"version": RECIPE_VERSION, "seed": seed, **DEFAULTS, **TRAIN, **train}


def recipe_key(r: dict) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]


def documents(tokenizer, doc_tokens: int, n: int = 400) -> list[tuple[str, str]]:
    """(source, excerpt) pairs from the language reference that ships with Python: the
    demo corpus's own source."""
    from pydoc_data.topics import topics

    from ..design import excerpt

    out = []
    for name in sorted(topics)[:n]:
        out.append((name, excerpt(topics[name], doc_tokens, tokenizer)))
    return out


def encode(tokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Ids of the conversation under the chat template and a mask of the assistant turns
    (their content and end-of-turn marker), the only tokens the loss sees."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    spans = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            start = len(
                tokenizer.apply_chat_template(
                    messages[:i], tokenize=False, add_generation_prompt=True
                )
            )
            end = len(tokenizer.apply_chat_template(messages[: i + 1], tokenize=False))
            spans.append((start, end))
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    mask = [int(any(s <= a < e for s, e in spans)) for a, _ in enc["offset_mapping"]]
    return enc["input_ids"], mask


def _transcripts(n: int, seed: int, settings: dict, documents_: list[tuple[str, str]]):
    from ..design import Template
    from ..skills import MICRO
    from . import transcripts as tr

    rng = random.Random(seed)
    template = Template.load("micro")
    for _ in range(n):
        if rng.random() < settings["design_share"]:
            yield tr.design_transcript(rng, template, documents_, MICRO)
        else:
            yield tr.agent_transcript(rng, settings["skill"], rng.random() < settings["hint_share"])


def sample_text(seed: int, n: int, settings: dict) -> str:
    """Plain text of `n` transcripts (another seed than pretraining's) for the tokenizer."""
    from pydoc_data.topics import topics

    docs = [(k, topics[k][:300]) for k in sorted(topics)[:50]]
    return "\n".join(
        m["content"] for t in _transcripts(n, seed + 7919, settings, docs) for m in t.messages
    )


def transcripts(tokenizer, n: int, seed: int, settings: dict) -> list[tuple[list[int], list[int]]]:
    docs = documents(tokenizer, settings["doc_tokens"])
    return [encode(tokenizer, t.messages) for t in _transcripts(n, seed, settings, docs)]


def pretrain(model, data, settings: dict, seed: int, log=None) -> list[float]:
    """AdamW with warm-up and cosine decay; batches of similar lengths. Returns the losses."""
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    steps, batch = settings["steps"], settings["batch"]
    opt = torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / settings["warmup"])
            * 0.5
            * (1 + math.cos(math.pi * min(s, steps) / steps))
        ),
    )
    pad = model.config.pad_token_id
    losses = []
    model.train()
    order = sorted(range(len(data)), key=lambda i: len(data[i][0]))
    chunks = [order[i : i + batch] for i in range(0, len(order) - batch + 1, batch)]
    t0 = time.time()
    for step in range(steps):
        idx = chunks[rng.randrange(len(chunks))]
        width = max(len(data[i][0]) for i in idx)
        ids = torch.full((len(idx), width), pad)
        labels = torch.full((len(idx), width), -100)
        for row, i in enumerate(idx):
            x, m = data[i]
            ids[row, : len(x)] = torch.tensor(x)
            labels[row, : len(x)] = torch.tensor(
                [t if k else -100 for t, k in zip(x, m, strict=True)]
            )
        loss = assistant_loss(model, ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if log and (step % 50 == 0 or step == steps - 1):
            log(
                f"micro model: step {step + 1}/{steps} loss {sum(losses[-50:]) / len(losses[-50:]):.3f} "
                f"({time.time() - t0:.0f} s)"
            )
    model.eval()
    return losses


def assistant_loss(model, ids, labels):
    """The causal LM loss on the labelled (assistant) tokens, with the output head applied
    to those positions only: at this size the head over a 4,096-token vocabulary costs as
    much as the layers, and most positions are prompt (bench/bench_micro_pretrain.py).
    Right padding under a causal mask never reaches a real token: no attention mask, which
    keeps SDPA on its fast causal path."""
    import torch.nn.functional as F

    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
    target = labels[:, 1:]
    keep = target != -100
    return F.cross_entropy(model.lm_head(hidden[keep]), target[keep])


def build_micro_model(
    out_dir: str | Path, seed: int = 0, use_cache: bool = True, log=None, **train
) -> Path:
    """Write the micro model to `out_dir`: from the cache when its recipe was built before,
    else from the shipped build when it is that recipe's, else pretrained (and cached).
    Without `use_cache` it is pretrained and the cache is left alone."""
    r = recipe(seed, **train)
    cached = cache_dir() / recipe_key(r)
    out = Path(out_dir)
    partial = None  # a build of ours that did not go into the cache
    if use_cache and (cached / "spade_micro_model.json").is_file():
        src = cached
    elif use_cache and shipped_recipe() == r:
        if log:
            log(f"micro model: the shipped build of recipe {recipe_key(r)} ({WEIGHTS})")
        src = WEIGHTS
    else:
        _remove_dead_partials(cached)
        src = partial = cached.with_name(f".{cached.name}.partial-{os.getpid()}")
        _build(partial, r, log)
        if use_cache and not cached.exists():
            cached.parent.mkdir(parents=True, exist_ok=True)
            src, partial = partial.rename(cached), None
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    if partial is not None:
        shutil.rmtree(partial)
    return out


def shipped_recipe() -> dict | None:
    """The recipe the shipped build in `weights/` was pretrained with (None: none ships)."""
    try:
        return json.loads((WEIGHTS / "spade_micro_model.json").read_text())["micro"]
    except (OSError, ValueError, KeyError):
        return None


def _remove_dead_partials(cached: Path) -> None:
    """Builds that were killed leave `.KEY.partial-PID`; a live builder's stays."""
    for p in cached.parent.glob(f".{cached.name}.partial-*"):
        try:
            os.kill(int(p.name.rsplit("-", 1)[1]), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


def _build(out: Path, r: dict, log) -> None:
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..tinymodel import build_tiny_model

    sizes = {k: r[k] for k in DEFAULTS}
    with tempfile.TemporaryDirectory() as tmp:
        # The tokenizer also learns the micro world's own words (spade_micro, CorridorEnv,
        # the observations' phrases), so transcripts are short and each word one token.
        sample = Path(tmp) / "micro.txt"
        sample.write_text(sample_text(r["seed"], 2000, r))
        build_tiny_model(out, seed=r["seed"], tokenizer_text=[sample], **sizes)

    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    t0 = time.time()
    data = transcripts(tok, r["steps"] * r["batch"] // 2, r["seed"], r)
    if log:
        log(f"micro model: {len(data)} transcripts in {time.time() - t0:.0f} s")
    losses = pretrain(model, data, r, r["seed"], log)
    model.save_pretrained(out)
    meta = json.loads((out / "spade_tiny_model.json").read_text())
    meta.update(
        {
            "micro": r,
            "final_loss": sum(losses[-50:]) / max(1, len(losses[-50:])),
            "pretrain_seconds": round(time.time() - t0, 1),
        }
    )
    (out / "spade_micro_model.json").write_text(json.dumps(meta, indent=1) + "\n")
