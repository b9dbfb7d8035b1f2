"""The two environment contracts: ours (`spade`) and the authors' release (`published`).

spade:      a gymnasium.Env subclass with `metadata = {"name", "max_turns", "tools"?}`;
            reset() gives info["hint"] and info["solution"] (a list of actions that
            validation plays: a machine-checked feasibility proof).
published:  a plain class with `__init__(max_turns=...)`, `reset(seed=None)`, `step(action)`
            and, usually, `solution() -> str` (reference text, never checked), or a
            subclass of the release's `ToolUseBaseEnv`; the agent answers
            `\\boxed{<command>}` (tool use: `<tool_call>{...}</tool_call>`, ending with
            `<answer>done</answer>`) and the environment extracts it from the whole reply.

`detect_contract` reads the code statically (nothing runs on the host). It lives in
`spade_cli/sandbox/published.py`, which the sandbox's worker reads code with too: inside
the jail that module loads a published class as the release's loader does and adapts it
so that the session looks like one of ours, with metadata["contract"] = "published".
"""

from __future__ import annotations

import re

from .. import pyparse
from ..sandbox.published import detect_contract as _detect_contract

__all__ = [
    "detect_contract",
    "resolve_contract",
    "published_protocol",
    "action_format",
    "solution_actions",
]

CONTRACTS = ("spade", "published")
CONTRACT_CHOICES = ("auto", *CONTRACTS)
ACTION_FORMATS = ("auto", "plain", "boxed")

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_TOOL_BASE = re.compile(r"\bToolUseBaseEnv\b")
_TOOL_OR_ANSWER = re.compile(r"<tool_call>.*?</tool_call>|<answer>.*?</answer>", re.DOTALL)


def detect_contract(code: str) -> str:
    """The sandbox's `detect_contract`, run on the host under the parse lock (pyparse)."""
    with pyparse.LOCK:
        return _detect_contract(code)


def resolve_contract(code: str, wanted: str) -> str:
    """The contract `code` is checked under: `wanted`, or the detected one for auto."""
    if wanted not in CONTRACT_CHOICES:
        raise ValueError(f"unknown contract {wanted!r} (choose from {', '.join(CONTRACT_CHOICES)})")
    return detect_contract(code) if wanted == "auto" else wanted


def published_protocol(code: str) -> str:
    """How a published environment reads replies: `tool_call` when it speaks the
    <tool_call>/<answer> protocol (a ToolUseBaseEnv subclass does), else `boxed`."""
    return "tool_call" if "<tool_call>" in code or _TOOL_BASE.search(code) else "boxed"


def action_format(requested: str, contract: str, code: str) -> str:
    """plain, boxed or tool_call: auto follows the contract (published: boxed, or the
    tool-call protocol for a tool-use environment; ours: plain)."""
    if requested == "plain":
        return "plain"
    if contract == "published" or requested == "boxed":
        return published_protocol(code) if contract == "published" else "boxed"
    return "plain"


def solution_actions(text: object) -> list[str]:
    """solution() text as the actions it spells out, in order: every `\\boxed{...}`, or
    every <tool_call>/<answer> block; [] when the text is not an action sequence (a
    description of the goal)."""
    if not isinstance(text, str):
        return []
    blocks = _TOOL_OR_ANSWER.findall(text)
    if blocks:
        return [b.strip() for b in blocks]
    return [f"\\boxed{{{m.strip()}}}" for m in _BOXED.findall(text)]
