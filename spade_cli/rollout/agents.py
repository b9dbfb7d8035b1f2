"""The acting side of a rollout: the prompt, the model agent and the replay agent.

An agent turns the live episodes of one turn into one Generation each:
    agent.act(episodes) -> list[Generation]      (one batched call per turn)
    agent.format                                  (ChatFormat: prompts and env tokens)
    agent.parse_tool_calls(text)                  (the model's native tool-call format)
    agent.describe() -> {"name", "engine", "model", ...}   (recorded on every candidate)
    agent.max_context                             (the model's context window, tokens)
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ..declare import read_toml
from ..errors import UsageError
from .trajectory import ChatFormat, NoTokens, tool_call_message

PROMPT_KEYS = ("system", "text_rules", "tool_rules", "boxed_rules", "tool_call_rules", "hint")
_FORMAT_RULES = {"boxed": "boxed_rules", "tool_call": "tool_call_rules"}


class AgentPrompt:
    """The agent's prompt template (spade_cli/prompts/agent.toml, or a user's file)."""

    def __init__(self, path: str | Path | None = None):
        prompts = Path(__file__).resolve().parents[1] / "prompts"
        parts = tomllib.loads((prompts / "agent.toml").read_text())
        # A shipped prompt by name (`micro`: prompts/agent_micro.toml), else a file.
        if (
            path is not None
            and str(path).isidentifier()
            and (prompts / f"agent_{path}.toml").is_file()
        ):
            path = prompts / f"agent_{path}.toml"
        if path is not None:
            mine = read_toml(path, "prompt file")
            unknown = set(mine) - set(PROMPT_KEYS)
            if unknown:
                raise UsageError(
                    f"{path}: unknown prompt keys {sorted(unknown)} (known: {', '.join(PROMPT_KEYS)})"
                )
            parts.update(mine)
        self.parts = {k: str(parts[k]) for k in PROMPT_KEYS}
        self.path = str(path) if path else "spade_cli/prompts/agent.toml"

    def system(self, name: str, max_turns: int, tools: bool, action_format: str = "plain") -> str:
        """`action_format`: plain, boxed or tool_call (`envs.contracts.action_format`)."""
        key = _FORMAT_RULES.get(action_format) or ("tool_rules" if tools else "text_rules")
        rules = self.parts[key]
        head = self.parts["system"].format(name=name, max_turns=max_turns)
        return f"{head}\n\n{rules}".strip()

    def hint_text(self, hint: str) -> str:
        return self.parts["hint"].format(hint=hint)


class ModelAgent:
    """Samples actions from a model through an engine (spade_cli.engines)."""

    name = "model"

    def __init__(self, engine, sampling, seed: int = 0):
        self.engine = engine
        self.sampling = sampling
        self.seed = seed
        self.format = ChatFormat(engine.tokenizer, engine.chat_ids)
        self.max_context = int(engine.max_model_len)
        self.gen_seconds = 0.0

    def parse_tool_calls(self, text: str) -> list[dict]:
        return self.engine.parse_tool_calls(text)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "engine": self.engine.name,
            "model": str(self.engine.model),
            "sampling": self.sampling.to_dict(),
            "seed": self.seed,
        }

    def act(self, episodes, max_context: int) -> list:
        from dataclasses import replace

        prompts, samplings = [], []
        for ep in episodes:
            ctx = ep.traj.context()
            # The last turn may not outgrow the context budget; episodes with room for a
            # full reply share one sampling key, so they stay in one batch.
            room = max(0, min(self.sampling.max_tokens, max_context - len(ctx)))
            prompts.append(ctx)
            samplings.append(
                replace(self.sampling, max_tokens=room, seed=ep.sampling_seed(self.seed))
            )
        return self.engine.generate(prompts, samplings)


class ReplayAgent:
    """Plays each episode's `info["solution"]`, one item per generation: the harness test and
    an environment debugger. With a tokenizer (`--model`) the actions go through the same
    path as a model's: tool calls are written in the model's native markup by its chat
    template and parsed back with `parse_tool_calls`, tokens are recorded (no logprobs).
    Without one, token fields stay empty."""

    name = "replay"

    def __init__(
        self, tokenizer=None, model: str | None = None, chat_ids=None, parse_tool_calls=None
    ):
        from ..engines import parse_tool_calls as hermes

        self.model = model
        self.format = ChatFormat(tokenizer, chat_ids) if tokenizer is not None else NoTokens()
        self._parse = parse_tool_calls or hermes
        n = getattr(tokenizer, "model_max_length", None)
        self.max_context = int(n) if isinstance(n, int) and 0 < n < 10**8 else 1 << 30
        self.gen_seconds = 0.0

    @classmethod
    def for_model(cls, model: str) -> ReplayAgent:
        """A replay agent speaking `model`'s chat template, without loading its weights."""
        from transformers import AutoTokenizer

        from ..engines.base import chat_ids
        from ..errors import ResourceError

        try:
            tok = AutoTokenizer.from_pretrained(model)
        except OSError as e:
            raise ResourceError(f"cannot load the tokenizer of {model!r}: {e}") from None
        return cls(tok, model, lambda messages, tools=None: chat_ids(tok, messages, tools))

    def parse_tool_calls(self, text: str) -> list[dict]:
        return self._parse(text)

    def describe(self) -> dict:
        return {"name": self.name, "engine": "replay", "model": self.model}

    def act(self, episodes, max_context: int) -> list:
        from ..engines import Generation

        out = []
        for ep in episodes:
            # One solution item per generation; an item that is a list of tool calls is
            # one reply holding all of them (parallel calls, as a model may write).
            i = ep.generations
            item = ep.solution[i] if i < len(ep.solution) else ""
            group = [str(a) for a in item] if isinstance(item, list) else [str(item)]
            text = "\n".join(group)
            if ep.tools:
                try:
                    calls = [json.loads(a) for a in group]
                    msg = tool_call_message(
                        [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in calls]
                    )
                    text = self.format.assistant_text(ep.system, ep.tools, msg)
                except (ValueError, KeyError, TypeError, AttributeError):
                    pass  # not tool calls: played as plain text
            ids = self.format.encode(text) + self.format.end_ids()
            out.append(Generation(text, ep.traj.context(), ids, None, "stop"))
        return out
