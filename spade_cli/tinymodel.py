"""A tiny causal LM built offline in seconds: the model of the CPU demo and the tests.

Hub downloads are impossible on our machines, so `build_tiny_model` makes everything
locally: a byte-level BPE tokenizer trained on text that ships with Python (the
standard library's source and the language reference in `pydoc_data`), a ChatML chat
template with Qwen-style tool calls, and a small Qwen3-architecture model (random init,
optionally nudged by a few hundred optimiser steps on the same text so its samples look
like code and end their turns instead of being uniform noise).

The tokenizer trap: transformers 5.x `AutoTokenizer` ignores the
`tokenizer_class` of a `qwen2`/`qwen3` checkpoint and rebuilds the tokenizer from its
vocab and merges with Qwen's own pipeline (NFC normalisation, Qwen's split regex,
byte-level without its regex). We therefore train the BPE with exactly that pipeline,
so every loader (the rebuilt `Qwen2Tokenizer`, a plain `tokenizer.json` load, vLLM)
produces identical ids. `tests/test_tinymodel.py` checks the round trip on varied text.
"""

from __future__ import annotations

import json
import random
import sysconfig
from pathlib import Path

# Qwen2Tokenizer's pre-tokenisation regex (transformers/models/qwen2/tokenization_qwen2.py).
QWEN_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
# Added but not special: they survive `skip_special_tokens=True`, so tool calls stay in
# the decoded text where `parse_tool_calls` finds them.
TEXT_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

# ChatML with Qwen 2.5-style tools: the tool list goes into the system turn, assistant
# tool calls are `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, and
# consecutive tool results are grouped in one user turn as <tool_response> blocks.
# `spade_cli.engines.base.parse_tool_calls` reads exactly this format back.
CHAT_TEMPLATE = """
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'user' or message.role == 'system' %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls or [] %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
""".strip()

DEFAULTS = dict(
    vocab_size=4096,
    hidden_size=64,
    intermediate_size=192,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=8192,
)


def corpus_files(max_bytes: int = 1_500_000) -> list[Path]:
    """Local text to train the tokenizer (and nudge the model) on: the language
    reference that ships with Python plus standard-library source, in a fixed order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [stdlib / "pydoc_data" / "topics.py"]
    files += sorted(p for p in stdlib.glob("*.py") if p.is_file())
    out, total = [], 0
    for p in files:
        if not p.exists():
            continue
        out.append(p)
        total += p.stat().st_size
        if total >= max_bytes:
            break
    return out


def train_tokenizer(files: list[Path], vocab_size: int):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TEXT_TOKENS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([str(f) for f in files], trainer)
    return tok


def _wrap_tokenizer(tok):
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        model_max_length=DEFAULTS["max_position_embeddings"],
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    hf.add_special_tokens({"additional_special_tokens": [IM_START, IM_END, ENDOFTEXT]})
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t in TEXT_TOKENS])
    hf.chat_template = CHAT_TEMPLATE
    return hf


def _training_texts(files: list[Path], rng: random.Random, n: int, chars: int) -> list[str]:
    """Short ChatML conversations whose answers are fenced code from the corpus, so the
    nudged model learns the turn structure and to close its turn with <|im_end|>."""
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files[1:]] or [""]
    out = []
    for _ in range(n):
        src = rng.choice(texts)
        start = rng.randrange(max(1, len(src) - chars))
        snippet = src[start : start + chars]
        out.append(
            f"{IM_START}system\nYou design environments.{IM_END}\n"
            f"{IM_START}user\nWrite a new environment.{IM_END}\n"
            f"{IM_START}assistant\n```python\n{snippet}\n```{IM_END}\n"
        )
    return out


def _nudge(model, tokenizer, files: list[Path], steps: int, seed: int) -> None:
    import torch

    rng = random.Random(seed)
    texts = _training_texts(files, rng, n=steps * 8, chars=200)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        batch = tokenizer(
            texts[step * 8 : (step + 1) * 8],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=128,
        )
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()


def build_tiny_model(
    out_dir: str | Path,
    seed: int = 0,
    train_steps: int = 0,
    tokenizer_text: list[Path] | None = None,
    **overrides,
) -> Path:
    """Write a tiny HF-format causal LM + tokenizer + chat template to `out_dir`.

    `train_steps` > 0 trains the random init briefly on local text (about a quarter
    of a second per step on a CPU core) so samples look a little less like noise.
    `tokenizer_text` adds files to the tokenizer's training text (the micro model adds its
    world's transcripts, so their words are single tokens). `overrides` replace
    entries of DEFAULTS (vocab_size, hidden_size, ...). Returns the directory.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    cfg = {**DEFAULTS, **overrides}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = corpus_files()
    tokenizer = _wrap_tokenizer(
        train_tokenizer(files + list(tokenizer_text or []), cfg["vocab_size"])
    )
    tokenizer.model_max_length = cfg["max_position_embeddings"]

    ids = tokenizer.convert_tokens_to_ids
    # Round the embedding up to a multiple of 64 (as real checkpoints do); the
    # tokenizer's own length may be a little smaller.
    vocab = -(-len(tokenizer) // 64) * 64
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"],
        max_position_embeddings=cfg["max_position_embeddings"],
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=ids(IM_END),
        pad_token_id=ids(ENDOFTEXT),
        initializer_range=0.02,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    if train_steps > 0:
        _nudge(model, tokenizer, files, train_steps, seed)
    model.generation_config = GenerationConfig(
        eos_token_id=[ids(IM_END), ids(ENDOFTEXT)],
        pad_token_id=ids(ENDOFTEXT),
        do_sample=True,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # Name the class every transformers version maps to this pipeline (4.x loads
    # tokenizer.json as is, 5.x rebuilds it with the very pipeline trained above).
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["tokenizer_class"] = "Qwen2Tokenizer"
    tc_path.write_text(json.dumps(tc, indent=2) + "\n")
    (out / "spade_tiny_model.json").write_text(
        json.dumps(
            {"seed": seed, "train_steps": train_steps, **cfg, "corpus": [f.name for f in files]},
            indent=1,
        )
        + "\n"
    )
    return out
