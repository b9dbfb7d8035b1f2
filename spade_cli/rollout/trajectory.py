"""Token trajectories built turn by turn, so the ids training sees are the ids the model saw.

Layout of one episode (what `prompt_ids`, `completion_ids`, `env_mask`, `logprobs` hold):

    prompt_ids      the first turn's prompt: system message, first observation (+ hint),
                    tool specs, generation prompt, under the model's chat template
    completion_ids  model tokens of turn 1                          env_mask 1
                    + env tokens: end of the assistant turn the      env_mask 0
                      template adds after the model's last token,
                      the observation message(s), the next
                      generation prompt
                    + model tokens of turn 2                         env_mask 1
                    + ...                                            (ends with model tokens)
    logprobs        the engine's logprob of each model token; 0.0 for every env token
                    (so the list stays numeric and aligned); null for the whole episode
                    when the engine gives no logprobs (the replay agent, some servers).

The prompt of turn t+1 is literally `prompt_ids + completion_ids` as they stand after
turn t: nothing is re-rendered, so thinking text the template would strip from earlier
turns, or a re-tokenisation that would merge differently, cannot make the stored
trajectory differ from what was generated. The observation after the final step is not
appended (no generation follows it); it is in the episode's `turns`.

The env tokens of a turn come from the chat template itself: render a short conversation
(system, a stand-in user turn, the assistant turn, the observation message(s), the
generation prompt) and take everything after the assistant turn's end-of-turn marker
(the model's own last token when it ended its turn; ChatML's "<|im_end|>"), which
starts with whatever the template writes after that marker (ChatML's "\\n"). When the
model was cut off before ending its turn, the marker itself is an env token too.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("spade")

# A short fixed conversation before the assistant turn when rendering env tokens: the
# difference between two renderings does not depend on it, and short renders are cheap.
_PREFIX_USER = {"role": "user", "content": "start"}


class Trajectory:
    """prompt_ids + completion_ids with the env mask and logprobs aligned to completion_ids."""

    def __init__(self, prompt_ids: list[int]):
        self.prompt_ids = list(prompt_ids)
        self.completion_ids: list[int] = []
        self.env_mask: list[int] = []
        self.logprobs: list[float] | None = []

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    def context(self) -> list[int]:
        """The next generation's prompt."""
        return self.prompt_ids + self.completion_ids

    def add_model(self, ids: list[int], logprobs: list[float] | None) -> None:
        self.completion_ids += ids
        self.env_mask += [1] * len(ids)
        if logprobs is None or len(logprobs) != len(ids):
            self.logprobs = None  # one turn without logprobs: the episode has none
        elif self.logprobs is not None:
            self.logprobs += [float(x) for x in logprobs]

    def add_env(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        if self.logprobs is not None:
            self.logprobs += [0.0] * len(ids)


def tool_call_message(calls: list[dict], content: str = "") -> dict:
    """An assistant message carrying `calls` ({"name","arguments"}) the way chat templates
    expect them (OpenAI shape)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c.get("arguments") or {}},
            }
            for i, c in enumerate(calls)
        ],
    }


class ChatFormat:
    """The model's chat template, as the harness needs it: first prompts, env tokens
    between turns, and (for the replay agent) the text a model would write for a message.
    `chat_ids` is the engine's (so prompts match what `engine.chat` would send)."""

    def __init__(self, tokenizer: Any, chat_ids=None):
        self.tokenizer = tokenizer
        self._chat_ids = chat_ids
        self.eos_text = tokenizer.eos_token or ""
        self.special_ids = set(tokenizer.all_special_ids or [])
        self._warned = False

    # -- rendering --------------------------------------------------------------

    def render(self, messages: list[dict], tools: list[dict] | None, generation: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=generation
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        if self._chat_ids is not None:
            return list(self._chat_ids(messages, tools=tools or None))
        return self.encode(self.render(messages, tools, True))

    def env_ids(
        self,
        system: str,
        tools: list[dict] | None,
        assistant: dict,
        observations: list[dict],
        last_token: int | None,
    ) -> list[int]:
        """Tokens between the model's last token and its next turn: the rest of the
        assistant turn, the observation message(s), the generation prompt.

        `last_token` is the model's final token when it ended its turn with a special
        token (its end-of-turn); None when it was cut off (max tokens or a stop string),
        in which case the end-of-turn marker itself is an env token too."""
        marker = (
            self.tokenizer.convert_ids_to_tokens(last_token)
            if last_token is not None
            else self.eos_text
        )
        head = [{"role": "system", "content": system}, _PREFIX_USER]
        after = self.render(head + [assistant] + observations, tools, True)
        # The assistant turn's end is the first end-of-turn marker after the head's own.
        # Counting markers, rather than diffing two renderings, stays right for
        # templates that render a past assistant turn differently once a newer user
        # message follows (Qwen3 drops its <think> block then).
        n_head = self.render(head, tools, False).count(marker) if marker else 0
        pos = -1
        for _ in range(n_head + 1):
            pos = after.find(marker, pos + 1) if marker else -1
            if pos < 0:
                break
        if pos < 0:
            # No usable marker: fall back to what follows the assistant-only rendering.
            if not self._warned:
                log.warning(
                    "chat template: no end-of-turn marker found; env tokens are approximate"
                )
                self._warned = True
            before = self.render(head + [assistant], tools, False)
            n = 0
            while n < min(len(before), len(after)) and before[n] == after[n]:
                n += 1
            return self.encode(after[n:])
        text = after[pos + len(marker) :]
        if last_token is None:
            text = marker + text  # the model was cut off: the marker is the template's
        return self.encode(text)

    def assistant_text(self, system: str, tools: list[dict] | None, message: dict) -> str:
        """The text a model writes for `message` (for example native tool-call markup),
        cut at the end-of-turn marker: what the replay agent 'generates'."""
        head = [{"role": "system", "content": system}, _PREFIX_USER]
        before = self.render(head, tools, True)
        full = self.render(head + [message], tools, False)
        text = full[len(before) :] if full.startswith(before) else message.get("content") or ""
        if self.eos_text and self.eos_text in text:
            text = text[: text.rfind(self.eos_text)]
        return text

    def end_ids(self) -> list[int]:
        return self.encode(self.eos_text) if self.eos_text else []


class NoTokens:
    """Stand-in format when there is no tokenizer (`--agent replay` without `--model`):
    episodes run and score exactly as with one, their token fields stay empty."""

    tokenizer = None

    def prompt_ids(self, messages, tools) -> list[int]:
        return []

    def env_ids(self, *args, **kwargs) -> list[int]:
        return []

    def assistant_text(self, system, tools, message: dict) -> str:
        # The Qwen/Hermes markup, which `engines.parse_tool_calls` reads back.
        parts = [message.get("content") or ""]
        for c in message.get("tool_calls") or []:
            f = c["function"]
            parts.append(
                "<tool_call>\n"
                + json.dumps({"name": f["name"], "arguments": f["arguments"]})
                + "\n</tool_call>"
            )
        return "\n".join(p for p in parts if p)

    def encode(self, text: str) -> list[int]:
        return []

    def end_ids(self) -> list[int]:
        return []
