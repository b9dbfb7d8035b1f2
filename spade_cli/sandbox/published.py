"""The published environment contract, presented inside the sandbox as one of ours.

Loaded by worker.py (from the file beside it, inside the jail at /opt/spade). It loads
what the authors' release loads (`core/envs/synthetic_game_env.py`):
  - `prefill(namespace)`, before the module runs: the ~40 common names their loader
    injects (`random`, `math`, `re`, `json`, `np`, `deque`, `Counter`, `Tuple`, ...) and
    `ToolUseBaseEnv` (ours, below, with their protocol; also importable as
    `tool_use_base_env`). Explicit imports rebind the same objects.
  - the class: the first one whose name ends in `Env` (bar the injected bases), else the
    one class with reset() and step(); `solution()` is optional.
  - the turn budget: forced to PUBLISHED_MAX_TURNS (their 25) unless $SPADE_MAX_TURNS
    says otherwise; the class is built with `max_turns=` where it takes it.
The adapter is a gymnasium.Env subclass of the same name whose metadata is
{"name": the class name, "max_turns", "contract": "published", "has_solution": bool,
"tools"?: get_tools() of a ToolUseBaseEnv}, and whose reset info adds `solution_text`
(what solution() returned after that reset, "" without one) and, unless the environment
gave one, `hint` (the same text). No `solution` list: the published form has no verified
solution.

Like worker.py this imports nothing from spade_cli (the package is not in the jail); the
host imports `detect_contract` from here, so both sides read code the same way.
"""

import ast
import inspect
import json
import os
import re
import sys

# Their launchers' turn budget (--max-turns 25), which their loader forces on every class.
PUBLISHED_MAX_TURNS = 25
INJECTED_BASES = ("Env", "ToolUseBaseEnv")


# --------------------------------------------------------------------------- detection


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [ast.unparse(b.func if isinstance(b, ast.Call) else b) for b in cls.bases]


def _methods(cls: ast.ClassDef) -> set[str]:
    return {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _has_metadata(cls: ast.ClassDef) -> bool:
    for n in cls.body:
        targets = (
            n.targets
            if isinstance(n, ast.Assign)
            else [n.target]
            if isinstance(n, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "metadata" for t in targets):
            return True
    return False


def detect_contract(code: str) -> str:
    """`published` when the module has a class with reset and step, or a ToolUseBaseEnv
    subclass, and no class of ours (a gymnasium.Env subclass or one declaring metadata);
    else `spade`. Unparsable code is `spade` (its verdict is syntax_error either way)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "spade"
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if any(
        any(b.split(".")[-1] == "Env" for b in _base_names(c)) or _has_metadata(c) for c in classes
    ):
        return "spade"
    if any({"reset", "step"} <= _methods(c) or "ToolUseBaseEnv" in _base_names(c) for c in classes):
        return "published"
    return "spade"


# --------------------------------------------------------------------------- ToolUseBaseEnv


class ToolUseBaseEnv:
    """The base class of the release's tool-use environments, with its protocol.

    A subclass writes reset(seed=None) (setting self._tools {name: {"description",
    "parameters"}}, self._state and self._expected_answer, returning (observation, {})),
    solution() and one tool_<name>(**arguments) per tool. The agent replies with
    `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` or `<answer>...</answer>`:
    a correct answer ends the episode with 1.0, a reply with neither (or unreadable JSON)
    costs -0.1, anything else 0.0; the turn `max_turns` truncates, showing solution().
    """

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0
        self._tools = {}
        self._state = {}
        self._call_history = []
        self._expected_answer = None
        self.reset()

    def reset(self, seed=None):
        raise NotImplementedError("a ToolUseBaseEnv subclass writes reset()")

    def solution(self):
        raise NotImplementedError("a ToolUseBaseEnv subclass writes solution()")

    def get_tools(self):
        """self._tools as OpenAI function schemas."""
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": spec.get("description", ""),
                    "parameters": spec.get("parameters", {"type": "object", "properties": {}}),
                },
            }
            for name, spec in self._tools.items()
        ]

    def execute_tool(self, name, arguments):
        """{"output": str, "returncode": 0 or 1} of one parsed call."""
        method = getattr(self, f"tool_{name}", None)
        if method is None:
            return {"output": f"Unknown tool '{name}'", "returncode": 1}
        try:
            result = str(method(**arguments))
        except Exception as e:  # a bad argument is the agent's mistake, told to it
            return {"output": f"Error calling {name}: {e}", "returncode": 1}
        self._call_history.append({"name": name, "arguments": arguments, "result": result})
        return {"output": result, "returncode": 0}

    def _time_up(self, prefix=""):
        return f"{prefix}Time up. Solution:\n{self.solution()}", 0.0, False, True, {}

    def step(self, action):
        self.turn_count += 1
        last = self.turn_count >= self.max_turns
        answer = re.search(r"<answer>(.*?)</answer>", action, re.DOTALL)
        if answer:
            if self._check_answer(answer.group(1).strip()):
                return "Correct!", 1.0, True, False, {}
            if last:
                return f"Wrong answer. Solution:\n{self.solution()}", 0.0, False, True, {}
            return self._incorrect_answer_feedback(), 0.0, False, False, {}
        block = re.search(r"<tool_call>(.*?)</tool_call>", action, re.DOTALL)
        if not block:
            if last:
                return self._time_up()
            return (
                "Format error: use tools to call a function, or <answer>result</answer> to submit.",
                -0.1,
                False,
                False,
                {},
            )
        try:
            call = json.loads(block.group(1))
            name, arguments = call.get("name", ""), call.get("arguments", {})
        except (ValueError, AttributeError):
            if last:
                return self._time_up()
            return "Format error: invalid tool call arguments.", -0.1, False, False, {}
        if getattr(self, f"tool_{name}", None) is None:
            if last:
                return self._time_up()
            return (
                f"Unknown tool '{name}'. Available: {', '.join(self._tools)}",
                0.0,
                False,
                False,
                {},
            )
        out = self.execute_tool(name, arguments if isinstance(arguments, dict) else {})
        obs = f"Tool result:\n{out['output']}"
        return self._time_up(obs + "\n\n") if last else (obs, 0.0, False, False, {})

    def _obs_suffix(self):
        """Kept for subclasses that still call it: tools reach the agent as schemas."""
        return ""

    def _incorrect_answer_feedback(self):
        """A multi-step task (one with _user_messages and _current_msg) names the step
        still pending, so the agent acts instead of resubmitting."""
        msgs, idx = getattr(self, "_user_messages", None), getattr(self, "_current_msg", None)
        if isinstance(msgs, (list, tuple)) and isinstance(idx, int) and 0 <= idx < len(msgs):
            return (
                f"Incorrect. Keep using tools. Not all steps are complete: you are still on "
                f'step {idx + 1}/{len(msgs)}: "{msgs[idx]}" Complete it with the tools '
                "before submitting <answer>done</answer>."
            )
        return "Incorrect. Keep using tools."

    def _check_answer(self, answer):
        """Case-insensitive equality, or numbers within 0.01 ($ and , ignored)."""
        got, want = str(answer).strip(), str(self._expected_answer).strip()
        if got.lower() == want.lower():
            return True
        try:
            return (
                abs(
                    float(got.replace("$", "").replace(",", ""))
                    - float(want.replace("$", "").replace(",", ""))
                )
                < 0.01
            )
        except ValueError:
            return False

    def close(self):
        pass


# --------------------------------------------------------------------------- loading


def common_names():
    """The names the release's loader puts in every environment's namespace."""
    import collections
    import copy
    import functools
    import heapq
    import itertools
    import math
    import operator
    import random
    import statistics
    import string
    import typing

    import numpy

    names = {
        m.__name__: m
        for m in (
            itertools,
            math,
            random,
            re,
            json,
            collections,
            functools,
            string,
            copy,
            heapq,
            operator,
            statistics,
            numpy,
        )
    }
    names["np"] = numpy
    for n in ("deque", "defaultdict", "Counter", "OrderedDict", "namedtuple"):
        names[n] = getattr(collections, n)
    for n in ("combinations", "permutations", "product", "chain", "accumulate"):
        names[n] = getattr(itertools, n)
    names.update(
        reduce=functools.reduce,
        lru_cache=functools.lru_cache,
        deepcopy=copy.deepcopy,
        heappush=heapq.heappush,
        heappop=heapq.heappop,
    )
    for n in (
        "Tuple",
        "Dict",
        "List",
        "Optional",
        "Union",
        "Any",
        "Set",
        "FrozenSet",
        "Callable",
        "Iterable",
        "Sequence",
        "Mapping",
    ):
        names[n] = getattr(typing, n)
    return names


def prefill(namespace):
    """Before a published module runs: the release's injected names and ToolUseBaseEnv."""
    for name, value in common_names().items():
        namespace.setdefault(name, value)
    namespace.setdefault("ToolUseBaseEnv", ToolUseBaseEnv)
    module = type(sys)("tool_use_base_env")  # `from tool_use_base_env import ...`, as theirs
    module.ToolUseBaseEnv = ToolUseBaseEnv
    sys.modules["tool_use_base_env"] = module


def choose_class(module):
    """(class, None) as the release picks it, or (None, problem)."""
    own = [
        v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__
    ]
    named = [c for c in own if c.__name__.endswith("Env") and c.__name__ not in INJECTED_BASES]
    if named:
        return named[0], None
    found = [
        c for c in own if callable(getattr(c, "reset", None)) and callable(getattr(c, "step", None))
    ]
    leaves = [c for c in found if not any(o is not c and issubclass(o, c) for o in found)]
    if not leaves:
        return (
            None,
            "the module defines no gymnasium.Env subclass and no class with reset() and step()",
        )
    if len(leaves) > 1:
        return None, (
            "the module defines several classes with reset() and step() and none "
            "whose name ends in Env: " + ", ".join(sorted(c.__name__ for c in leaves))
        )
    return leaves[0], None


def _build(inner, turns):
    """An instance as the release builds one: max_turns= where the class takes it."""
    try:
        takes = "max_turns" in inspect.signature(inner.__init__).parameters
    except (TypeError, ValueError):
        takes = False
    env = inner(max_turns=turns) if takes else inner()
    if not takes and hasattr(env, "max_turns"):
        env.max_turns = turns
    return env


def _tools_of(inner, turns):
    """get_tools() of a ToolUseBaseEnv, or None (any failure shows again at construction)."""
    if not issubclass(inner, ToolUseBaseEnv):
        return None
    try:
        tools = _build(inner, turns).get_tools()
        json.dumps(tools)
    except Exception:  # noqa: BLE001 - the same failure is reported by instantiate()
        return None
    return tools or None


def adapt(module):
    """(adapter class, None) for the module's published-form class, or (None, problem)."""
    import gymnasium

    inner, problem = choose_class(module)
    if inner is None:
        return None, problem
    if not (callable(getattr(inner, "reset", None)) and callable(getattr(inner, "step", None))):
        return None, f"{inner.__name__} has no reset() and step()"
    override = os.environ.get("SPADE_MAX_TURNS", "")
    turns = int(override) if override.isdigit() and int(override) > 0 else PUBLISHED_MAX_TURNS
    has_solution = callable(getattr(inner, "solution", None))
    meta = {
        "name": inner.__name__,
        "max_turns": turns,
        "contract": "published",
        "has_solution": has_solution,
    }
    tools = _tools_of(inner, turns)
    if tools:
        meta["tools"] = tools

    class Adapter(gymnasium.Env):
        metadata = meta

        def __init__(self):
            self.inner = _build(inner, turns)

        def reset(self, seed=None, options=None):
            out = self.inner.reset(seed=seed)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("reset() must return (observation, info)")
            obs, info = out
            if not isinstance(info, dict):
                raise TypeError(f"reset() info must be a dict, got {type(info).__name__}")
            text = self.inner.solution() if has_solution else ""
            if not isinstance(text, str):
                raise TypeError(f"solution() must return a str, got {type(text).__name__}")
            info = dict(info, solution_text=text)
            if text:
                info.setdefault("hint", text)
            return obs, info

        def step(self, action):
            return self.inner.step(action)

    Adapter.__name__ = Adapter.__qualname__ = inner.__name__
    Adapter.__module__ = module.__name__
    return Adapter, None
