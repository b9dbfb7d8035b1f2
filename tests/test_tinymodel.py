"""The tiny offline model: builds offline, reloads through the Auto classes with the
same token ids (the transformers 5.x Qwen tokenizer trap), renders tools and tool calls."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest

from spade_cli.engines import parse_tool_calls

TEXTS = [
    "def f(x):\n\treturn x ** 2  # square\n",
    "héllo wörld, naïve café — 日本語のテキスト 🙂🚀 e\u0301 Å vs Å",
    "  leading spaces\r\n\r\n\ttabs\u00a0nbsp and trailing   ",
    '<|im_start|>user\nhi<|im_end|>\n<tool_call>\n{"name": "f"}\n</tool_call>',
    "ALL CAPS I'M YOU'LL they'd 12345 3.14159 0xFF",
    "Ελληνικά, русский, العربية, עברית, हिन्दी",
]


@pytest.fixture(scope="module")
def tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def test_files_and_size(tiny_model: Path):
    names = {p.name for p in tiny_model.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    total = sum(p.stat().st_size for p in tiny_model.iterdir())
    assert total < 8_000_000
    cfg = json.loads((tiny_model / "config.json").read_text())
    assert cfg["max_position_embeddings"] >= 4096


def test_token_ids_identical_across_loaders(tiny_model: Path, tok):
    from tokenizers import Tokenizer
    from transformers import Qwen2Tokenizer

    raw = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    rebuilt = Qwen2Tokenizer.from_pretrained(tiny_model)  # the class 5.x forces on qwen models
    src = Path(sysconfig.get_paths()["stdlib"]) / "email" / "_header_value_parser.py"
    for text in TEXTS + [src.read_text()[:20000]]:
        ids = raw.encode(text).ids
        assert tok(text)["input_ids"] == ids
        assert rebuilt(text)["input_ids"] == ids
    # Byte-level BPE round-trips any text that is already NFC.
    for text in TEXTS:
        import unicodedata

        nfc = unicodedata.normalize("NFC", text)
        assert tok.decode(tok(nfc)["input_ids"]) == nfc


def test_special_tokens(tok):
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    for t in ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1, t
    ids = tok("<|im_end|><tool_call>x</tool_call>")["input_ids"]
    # Tool-call markers survive skip_special_tokens, the end-of-turn marker does not.
    assert tok.decode(ids, skip_special_tokens=True) == "<tool_call>x</tool_call>"


def test_model_loads_and_runs(tiny_model: Path, tok):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    ids = torch.tensor([tok("hello world")["input_ids"]])
    logits = model(ids).logits
    assert logits.shape[-1] >= len(tok) and torch.isfinite(logits).all()


def test_chat_template_roles_and_tool_calls(tok):
    tools = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "move", "arguments": {"dir": "north"}}}
            ],
        },
        {"role": "tool", "content": "ok 1"},
        {"role": "tool", "content": "ok 2"},
        {"role": "assistant", "content": "done"},
    ]
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '"name": "move"' in text and text.endswith("<|im_start|>assistant\n")
    assert text.count("<tool_response>") == 2 and text.count("<|im_start|>user") == 2
    # The template's own rendering of a call parses back to the call.
    assistant = text.split("<|im_start|>assistant\n")[1]
    assert parse_tool_calls(assistant) == [{"name": "move", "arguments": {"dir": "north"}}]
    plain = tok.apply_chat_template(msgs[1:2], tokenize=False, add_generation_prompt=False)
    assert plain == "<|im_start|>user\ngo<|im_end|>\n"


def test_parse_tool_calls_variants():
    text = (
        'a <tool_call>\n{"name": "f", "arguments": "{\\"x\\": 1}"}\n</tool_call> b '
        '<tool_call>{"name": "g", "arguments": {"y": [1, 2]}}</tool_call>'
        '<tool_call>{not json}</tool_call><tool_call>{"arguments": {}}</tool_call>'
    )
    assert parse_tool_calls(text) == [
        {"name": "f", "arguments": {"x": 1}},
        {"name": "g", "arguments": {"y": [1, 2]}},
    ]
    assert parse_tool_calls("no calls here") == []


@pytest.mark.slow
def test_init_model_command(cli, tmp_path):
    out = tmp_path / "m"
    r = cli("init-model", out, "--layers", "1", "--vocab-size", "1024")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == str(out)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    again = cli("init-model", out)
    assert again.returncode == 2 and b"not empty" in again.stderr


def test_build_is_reproducible(tmp_path):
    from spade_cli.tinymodel import build_tiny_model

    small = dict(vocab_size=1024, num_hidden_layers=1)

    def files(p):
        return {f.name: f.read_bytes() for f in sorted(p.iterdir())}

    a = files(build_tiny_model(tmp_path / "a", seed=0, **small))
    b = files(build_tiny_model(tmp_path / "b", seed=0, **small))
    c = files(build_tiny_model(tmp_path / "c", seed=1, **small))
    assert a == b
    assert (
        a["tokenizer.json"] == c["tokenizer.json"]
        and a["model.safetensors"] != c["model.safetensors"]
    )
