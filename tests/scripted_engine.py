"""A token-level engine double for the agent loop: the tiny model's tokenizer and chat
template (so prompts, env tokens and the parser are the real ones), and replies chosen by
a function of the conversation instead of sampled by a model."""

from __future__ import annotations

from collections.abc import Callable

from spade_cli.engines import Generation, parse_tool_calls
from spade_cli.engines.base import chat_ids

USER, END, ASSISTANT = "<|im_start|>user\n", "<|im_end|>", "<|im_start|>assistant"


def first_user_message(text: str) -> str:
    """The first user turn's content in a ChatML-rendered conversation."""
    start = text.index(USER) + len(USER)
    return text[start : text.index(END, start)]


class ScriptedEngine:
    """`reply(first_user_message, turn)` gives the text of generation `turn` (0-based)
    of the conversation; the reply is tokenised and ended with <|im_end|>, as a model that
    ends its turn would. Every decoded prompt is kept in `prompts`, every batch size in
    `batches`, every row's Sampling in `samplings`."""

    name, model = "scripted", "scripted"

    def __init__(self, tokenizer, reply: Callable[[str, int], str], max_model_len: int = 10**9):
        self.tokenizer = tokenizer
        self.reply = reply
        self.max_model_len = max_model_len
        self.prompts: list[str] = []
        self.batches: list[int] = []
        self.samplings: list = []
        self.end = tokenizer.convert_tokens_to_ids(END)

    def chat_ids(self, messages, tools=None):
        return chat_ids(self.tokenizer, messages, tools)

    def parse_tool_calls(self, text):
        return parse_tool_calls(text)

    def generate(self, prompts, sampling):
        self.batches.append(len(prompts))
        self.samplings += sampling if isinstance(sampling, list) else [sampling] * len(prompts)
        out = []
        for p in prompts:
            text = self.tokenizer.decode(p)
            self.prompts.append(text)
            reply = self.reply(first_user_message(text), text.count(ASSISTANT) - 1)
            ids = list(self.tokenizer.encode(reply, add_special_tokens=False)) + [self.end]
            out.append(Generation(reply, list(p), ids, None, "stop"))
        return out
