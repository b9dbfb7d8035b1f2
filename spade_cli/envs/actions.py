"""The harness side of the environment contract: the turn limit, and a reply's actions.

Every driver of contract environments (spade-rollout, spade-eval, the gym wrapper) takes
these from here, so an environment plays the same under each of them.

Turn limit. An environment declares `metadata["max_turns"]`; one that declares none (or
not a positive int) gets DEFAULT_MAX_TURNS. spade-validate rejects designed environments
without a limit, so the default only reaches hand-written or in-process environments:
a bound on what a model stuck in a loop costs, long enough for a short multi-step task.
Turns are counted as `step` calls (a reply with three tool calls takes three).

Actions. `reply_actions(text, tools, parse_tool_calls)` turns one model reply into the
actions passed to `step`:
- environments without tools: the reply with any <think>...</think> block removed (an
  unclosed one runs to the end), stripped of surrounding whitespace: one text action;
- tool-use environments: every tool call `parse_tool_calls` finds in the reply outside
  <think> (calls drafted while thinking are thoughts, not actions) is one action, the
  JSON `{"name", "arguments"}`, in order; a reply with no tool call is one text action
  as above, so the environment answers it (usually with a usage message);
- the published contract (action formats boxed and tool_call): the whole reply with any
  <think> block removed is one action; the environment finds its \boxed{} command or
  <tool_call>/<answer> block in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_TURNS = 16  # for an environment that declares no max_turns

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def turn_limit(declared: Any, cap: int | None = None) -> int:
    """The environment's max_turns (DEFAULT_MAX_TURNS when it declares none), capped."""
    turns = (
        declared
        if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0
        else DEFAULT_MAX_TURNS
    )
    return min(turns, cap) if cap is not None else turns


def strip_thinking(text: str) -> str:
    """`text` without its <think>...</think> blocks."""
    return _THINK.sub("", text)


def action_text(text: str) -> str:
    """The action of a text reply: thinking removed, whitespace stripped."""
    return strip_thinking(text).strip()


def tool_call_action(call: dict) -> str:
    """One parsed tool call as the JSON action `step` receives."""
    return json.dumps({"name": call["name"], "arguments": call.get("arguments") or {}})


def reply_actions(
    text: str,
    tools: Any,
    parse_tool_calls: Callable[[str], list[dict]],
    action_format: str = "plain",
) -> tuple[list[dict], list[str]]:
    """(tool calls, actions) of one model reply; `calls` is empty for a text action.
    Under the published contract's formats (boxed, tool_call) the whole reply, thinking
    removed, is one action: the environment extracts its command itself."""
    if action_format in ("boxed", "tool_call"):
        return [], [action_text(text)]
    calls = parse_tool_calls(strip_thinking(text)) if tools else []
    if calls:
        return calls, [tool_call_action(c) for c in calls]
    return [], [action_text(text)]
