"""The two environment contracts: ours (`spade`) and the authors' release (`published`).

spade:      a gymnasium.Env subclass with `metadata = {"name", "max_turns", "tools"?}`;
            reset() gives info["hint"] and info["solution"] (a list of actions that
            validation plays: a machine-checked feasibility proof).
published:  a plain class with `__init__(max_turns=...)`, `reset(seed=None)`, `step(action)`
            and `solution() -> str` (reference text, never checked); the agent answers
            `\\boxed{<command>}` (tool use: `<tool_call>{...}</tool_call>`, ending with
            `<answer>done</answer>`) and the environment extracts it from the whole reply.

`detect_contract` reads the code statically (nothing runs on the host); inside the
sandbox, `spade_cli/sandbox/published.py` adapts a published class so that the session
looks like one of ours, with metadata["contract"] = "published".
"""

from __future__ import annotations

import ast
import re

CONTRACTS = ("spade", "published")
CONTRACT_CHOICES = ("auto", *CONTRACTS)
ACTION_FORMATS = ("auto", "plain", "boxed")

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_TOOL_OR_ANSWER = re.compile(r"<tool_call>.*?</tool_call>|<answer>.*?</answer>", re.DOTALL)


def _base_names(cls: ast.ClassDef) -> list[str]:
    out = []
    for b in cls.bases:
        node = b.func if isinstance(b, ast.Call) else b
        out.append(ast.unparse(node))
    return out


def _is_gym_class(cls: ast.ClassDef) -> bool:
    return any(n.split(".")[-1] == "Env" for n in _base_names(cls))


def _methods(cls: ast.ClassDef) -> set[str]:
    return {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _has_metadata(cls: ast.ClassDef) -> bool:
    for n in cls.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "metadata" for t in targets):
            return True
    return False


def detect_contract(code: str) -> str:
    """`published` when the module has a class with reset and step (solution too, or a
    clear verdict later says it is missing) that is neither a gymnasium.Env subclass nor
    declares metadata, and no class of ours; else `spade`. Unparsable code is `spade`
    (its verdict is syntax_error either way)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "spade"
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if any(_is_gym_class(c) or _has_metadata(c) for c in classes):
        return "spade"
    if any({"reset", "step"} <= _methods(c) for c in classes):
        return "published"
    return "spade"


def resolve_contract(code: str, wanted: str) -> str:
    """The contract `code` is checked under: `wanted`, or the detected one for auto."""
    if wanted not in CONTRACT_CHOICES:
        raise ValueError(f"unknown contract {wanted!r} (choose from {', '.join(CONTRACT_CHOICES)})")
    return detect_contract(code) if wanted == "auto" else wanted


def published_protocol(code: str) -> str:
    """How a published environment reads replies: `tool_call` when it speaks the
    <tool_call>/<answer> protocol, else `boxed`."""
    return "tool_call" if "<tool_call>" in code else "boxed"


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
