"""The engine interface: batched chat generation that keeps token ids.

Every engine takes token-id prompts (or chat conversations, rendered with the model's
own chat template) and returns, per prompt, a `Generation` with the completion text,
the exact prompt and completion token ids, and the logprob of each sampled token where
the engine provides one. Training then needs no re-tokenisation of multi-turn text.

Conventions shared by all engines (the tests hold each engine to them):
- `completion_ids` are the tokens the model produced, including the end-of-turn token
  when it ended its turn (`finish_reason == "stop"`); `text` is their decoding without
  special tokens.
- A stop string ends the completion: `text` is cut before it, `completion_ids` keep the
  tokens up to and including the one that completed it.
- `logprobs[i]` is the log-probability of `completion_ids[i]` under the distribution
  it was sampled from: after temperature and top-p (vLLM's "processed_logprobs", what
  TRL's importance-sampling correction expects). With top_p=1 this is the
  temperature-scaled softmax the GRPO loss computes. Greedy decoding (temperature 0)
  reports the model's untempered logprobs.
- `finish_reason` is "stop" (end of turn or stop string), "length" (max_tokens) or
  "context" (the prompt left no room in the model's context window).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

from ..declare import option


@dataclass
class Sampling:
    """How to sample; its first three fields are also the sampling options of every
    generating command (each stage nests it with its own defaults: `settings.group`)."""

    temperature: float = option(
        1.0, "--temperature", min=0.0, help="Sampling temperature (0 = greedy)."
    )
    top_p: float = option(1.0, "--top-p", min=0.0, max=1.0, help="Nucleus sampling mass.")
    max_tokens: int = option(
        256,
        "--max-tokens",
        min=1,
        help="Most tokens generated per completion (a design, an agent turn, a hint).",
    )
    seed: int | None = None
    stop: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def key(self) -> tuple:
        """What must match for two requests to share one batched call (seeds may differ)."""
        return (float(self.temperature), float(self.top_p), int(self.max_tokens))


@dataclass
class Generation:
    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str

    def to_dict(self) -> dict:
        return asdict(self)


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> list[dict]:
    """Tool calls in the Qwen/Hermes format `<tool_call>{"name":..., "arguments":...}</tool_call>`
    (what the tiny model's chat template and Qwen models use). Calls whose JSON does not
    parse, or that lack a name, are skipped: the harness then treats the turn as text.
    `arguments` given as a JSON string are decoded to an object."""
    calls = []
    for body in _TOOL_CALL.findall(text):
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                pass
        calls.append({"name": obj["name"], "arguments": args if args is not None else {}})
    return calls


def first_line(err: BaseException) -> str:
    """Library errors often span lines; the toolchain reports one."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def as_list(sampling: Sampling | list[Sampling], n: int) -> list[Sampling]:
    if isinstance(sampling, Sampling):
        return [sampling] * n
    sampling = list(sampling)
    if len(sampling) != n:
        raise ValueError(f"got {len(sampling)} Sampling objects for {n} prompts")
    return sampling


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found."""
    best = -1
    for s in stops:
        if s:
            i = text.find(s)
            if i >= 0 and (best < 0 or i < best):
                best = i
    return (text[:best], True) if best >= 0 else (text, False)


def chat_ids(tokenizer: Any, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
    """Token ids of `messages` under `tokenizer`'s chat template, generation prompt added."""
    text = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


class Engine(ABC):
    """Base class: chat rendering and tool-call parsing shared by every engine.
    Subclasses set `name`, `model`, `tokenizer`, `max_model_len` and implement `generate`."""

    name = "base"

    def __init__(self, model: str, tokenizer: Any, max_model_len: int | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len or _context_length(tokenizer)

    def chat_ids(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """Token ids of `messages` under the model's chat template, generation prompt added."""
        return chat_ids(self.tokenizer, messages, tools)

    @abstractmethod
    def generate(
        self, prompts: list[list[int]], sampling: Sampling | list[Sampling]
    ) -> list[Generation]:
        """One completion per prompt (token ids), in order."""

    def chat(
        self,
        conversations: list[list[dict]],
        sampling: Sampling | list[Sampling],
        tools: list[dict] | list[list[dict] | None] | None = None,
    ) -> list[Generation]:
        """Generate one assistant turn per conversation. `tools` is one list of tool specs
        shared by all conversations, or one entry (a list or None) per conversation."""
        per_conv = _tools_per_conversation(tools, len(conversations))
        prompts = [self.chat_ids(c, t) for c, t in zip(conversations, per_conv, strict=True)]
        return self.generate(prompts, sampling)

    def parse_tool_calls(self, text: str) -> list[dict]:
        return parse_tool_calls(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def eos_ids(self) -> set[int]:
        ids = set()
        tok = self.tokenizer
        for t in (tok.eos_token_id,):
            if t is not None:
                ids.add(int(t))
        return ids

    def close(self) -> None:  # noqa: B027 - optional hook: most engines hold nothing to free
        """Free what the engine holds (GPU memory, threads). Safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _tools_per_conversation(tools, n: int) -> list:
    if not tools:
        return [None] * n
    if all(isinstance(t, dict) for t in tools):
        return [tools] * n
    if len(tools) != n:
        raise ValueError(f"got {len(tools)} tool lists for {n} conversations")
    return list(tools)


def _context_length(tokenizer) -> int:
    n = getattr(tokenizer, "model_max_length", None)
    # Tokenizers without a limit report a huge sentinel (int(1e30)).
    return int(n) if isinstance(n, int) and 0 < n < 10**8 else 32768
