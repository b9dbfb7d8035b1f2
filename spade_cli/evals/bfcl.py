"""BFCL-v4 multi-turn: the data, stateful tool classes and checker of the `bfcl-eval` package.

Each BFCL multi-turn entry becomes a tool-use environment. The agent sees the entry's
function docs as native tool specs; every tool call is executed against the entry's own
stateful instances (file system, trading bot, travel API, ...) exactly as BFCL's
inference loop does (`execute_multi_turn_func_call`), and the result comes back as the
observation. A text answer (no tool call) ends the current user turn; the next user
message is the next observation. After the last user turn the episode ends and BFCL's
`multi_turn_checker` scores it: reward 1 when every turn's end state and execution results
match the ground truth, else 0 (its error type is the episode's `detail`).

Faithful to BFCL (bfcl_eval/model_handler/base_handler.py and eval_runner.py):
- miss_func: the held-out function docs are revealed at their turn together with BFCL's
  message "I have updated some more functions you can choose from. What about now?";
- more than 20 model steps in one user turn (MAXIMUM_STEP_LIMIT) force-terminates the
  entry, which then fails ("multi_turn:force_terminated"). A model step is one generation,
  which may hold several parallel calls: the agent loop announces each generation with
  `env.begin_model_step()`; a driver that never does makes every call a step;
- long_context loads the classes' long-context scenarios.

Safety: BFCL `eval`s call strings. We never pass model text to it: a call is rebuilt from
the parsed tool call as `name(key=<python literal>, ...)`, and only names that are public
methods of the entry's classes are executed (anything else gets BFCL's own
"not defined" error text without running).

The oracle parses BFCL's ground-truth call strings (positional arguments mapped to names
through the method signatures) and plays them as tool calls, one user turn at a time.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import json
import os
import threading
from functools import lru_cache

from ..errors import UsageError
from .base import Task, require

SUITE = "bfcl"
CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
ALIASES = {c.removeprefix("multi_turn_"): c for c in CATEGORIES}

_counter = itertools.count()
_lock = threading.Lock()


def _project_root() -> None:
    """bfcl_eval creates `result/`, `score/` and `.file_locks/` under its project root on
    import, which defaults to site-packages itself (read-only for most users). Point it
    at a cache directory unless the user chose one (BFCL_PROJECT_ROOT)."""
    if "BFCL_PROJECT_ROOT" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "spade", "bfcl")
        os.makedirs(root, exist_ok=True)
        os.environ["BFCL_PROJECT_ROOT"] = root


def _require() -> None:
    _project_root()
    require("bfcl_eval", "bfcl-eval", SUITE)
    require("mpmath", "mpmath", SUITE)


@lru_cache(maxsize=8)
def load_category(category: str) -> tuple[list[dict], dict[str, list[list[str]]]]:
    """(entries with function docs, ground truth by id) of one multi-turn category."""
    _require()
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    entries = load_dataset_entry(category)
    truth = {g["id"]: g["ground_truth"] for g in load_ground_truth_entry(category)}
    return entries, truth


def resolve_categories(subset: list[str] | None) -> list[str]:
    if not subset:
        return list(CATEGORIES)
    out = []
    for name in subset:
        cat = ALIASES.get(name, name)
        if cat not in CATEGORIES:
            raise UsageError(f"unknown BFCL category {name!r} (choose from {', '.join(ALIASES)})")
        out.append(cat)
    return out


# --------------------------------------------------------------------------- tool specs

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def _openapi(schema):
    """BFCL's Python-flavoured JSON schema -> the JSON schema chat templates expect."""
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "type" and isinstance(v, str):
                out[k] = _TYPES.get(v, v)
            elif k in ("properties",) and isinstance(v, dict):
                out[k] = {name: _openapi(p) for name, p in v.items()}
            elif isinstance(v, dict | list):
                out[k] = _openapi(v)
            else:
                out[k] = v
        return out
    if isinstance(schema, list):
        return [_openapi(x) for x in schema]
    return schema


def tool_specs(functions: list[dict]) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": f["name"],
                "description": f.get("description", ""),
                "parameters": _openapi(f.get("parameters", {"type": "dict", "properties": {}})),
            },
        }
        for f in functions
    ]


# --------------------------------------------------------------------------- execution


def _method_names(classes: list[str]) -> dict[str, str]:
    """Public method name -> class name, over the entry's classes (BFCL's own mapping)."""
    import importlib

    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    out = {}
    for cls_name in classes:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[cls_name]), cls_name)
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction):
            if not name.startswith("_"):
                out[name] = cls_name
    return out


def call_string(name: str, arguments) -> str:
    """`name(k=repr(v), ...)` from a parsed tool call: only literals reach BFCL's eval."""
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    parts = []
    for k, v in arguments.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"bad argument name {k!r}")
        parts.append(f"{k}={v!r}")
    return f"{name}({', '.join(parts)})"


def _cleanup(prefix: str) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    g = vars(multi_turn_utils)
    for k in [k for k in g if k.startswith(prefix)]:
        del g[k]


class BFCLEnv:
    """One BFCL multi-turn entry as a tool-use environment (see the module docstring)."""

    # BFCL's executor keeps each entry's instances in a module's globals, which cleanup
    # edits: episodes take turns (the agent loop steps them on a thread pool).
    threadsafe = False

    def __init__(self, entry: dict, ground_truth: list[list[str]]):
        from bfcl_eval.constants.default_prompts import (
            DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
            MAXIMUM_STEP_LIMIT,
        )

        self.entry = copy.deepcopy(entry)
        self.ground_truth = ground_truth
        self.category = self.entry["id"].rsplit("_", 1)[0]
        self.turns = self.entry["question"]
        self.holdout = self.entry.get("missed_function", {})
        self.step_limit = MAXIMUM_STEP_LIMIT
        self.more_functions_prompt = DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
        self.methods = _method_names(self.entry["involved_classes"])
        self.metadata = {
            "name": f"bfcl/{self.entry['id']}",
            # The environment ends every episode itself (BFCL's step limit per user turn
            # counts generations, each of which may hold several calls); this bounds step
            # calls (the turn rule) as a backstop, with room for an average of four calls
            # per generation (one ground-truth turn holds 34 calls).
            "max_turns": len(self.turns) * 4 * (self.step_limit + 1),
            "tools": tool_specs(self.entry["function"]),
        }
        with _lock:
            self.model_name = f"spade_eval_{next(_counter)}"

    # -- contract

    def reset(self, seed=None, options=None):
        self.functions = list(self.entry["function"])
        self.turn = -1
        self.steps = 0
        self.announced = False
        self.decoded: list[list[list[str]]] = []
        self.done = False
        _cleanup(self.model_name)
        obs, info = self._next_turn()
        return obs, {**info, "hint": "", "solution": None}

    def step(self, action: str):
        if self.done:
            return "", 0.0, True, False, {"detail": "episode already over"}
        call = _as_tool_call(action)
        if call is None:
            # A text answer ends this user turn.
            if self.turn + 1 >= len(self.turns):
                return self._finish()
            obs, info = self._next_turn()
            return obs, 0.0, False, False, info
        if not self.announced:
            self.steps += 1
        if self.steps > self.step_limit:
            self.done = True
            _cleanup(self.model_name)
            return (
                "",
                0.0,
                True,
                False,
                {
                    "detail": "multi_turn:force_terminated: more than "
                    f"{self.step_limit} steps in turn {self.turn}"
                },
            )
        return self._execute(call), 0.0, False, False, {}

    def begin_model_step(self) -> None:
        """The calls that follow come from one generation (one BFCL model step)."""
        self.announced = True
        self.steps += 1

    def close(self) -> None:
        _cleanup(self.model_name)

    # -- internals

    def _next_turn(self) -> tuple[str, dict]:
        self.turn += 1
        self.steps = 0
        self.decoded.append([])
        messages = self.turns[self.turn]
        info = {}
        if str(self.turn) in self.holdout:
            self.functions.extend(self.holdout[str(self.turn)])
            info["tools"] = tool_specs(self.functions)
            messages = [{"role": "user", "content": self.more_functions_prompt}]
        text = "\n\n".join(m["content"] for m in messages if m.get("content"))
        return text, info

    def _execute(self, call: dict) -> str:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
            execute_multi_turn_func_call,
        )

        name, args = call.get("name"), call.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return "Error during execution: arguments are not valid JSON"
        if not isinstance(name, str) or name not in self.methods:
            return f"Error during execution: name '{name}' is not defined"
        try:
            text = call_string(name, args)
        except ValueError as e:
            return f"Error during execution: {e}"
        self.decoded[-1].append([text])
        results, _ = execute_multi_turn_func_call(
            [text],
            self.entry["initial_config"],
            self.entry["involved_classes"],
            self.model_name,
            self.entry["id"],
            long_context="long_context" in self.category or "composite" in self.category,
            is_evaL_run=False,
        )
        return results[0]

    def _finish(self):
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        self.done = True
        try:
            verdict = multi_turn_checker(
                self.decoded, self.ground_truth, self.entry, self.category, self.model_name
            )
        finally:
            _cleanup(self.model_name)
        if verdict.get("valid"):
            return "", 1.0, True, False, {}
        return (
            "",
            0.0,
            True,
            False,
            {"detail": f"{verdict.get('error_type')}: {verdict.get('error_message')}"},
        )


def _as_tool_call(action: str) -> dict | None:
    """The harness passes tool calls as JSON `{"name", "arguments"}`; anything else is text."""
    s = action.strip()
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str) and "arguments" in obj:
        return obj
    return None


# --------------------------------------------------------------------------- oracle


def parse_ground_truth_call(text: str, methods: dict[str, str]) -> dict:
    """`mv(source='a', destination='b')` or `sort('f.pdf')` -> {"name", "arguments"}."""
    import importlib

    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text}")
    name = node.func.id
    args = {}
    if node.args:
        cls_name = methods[name]
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[cls_name]), cls_name)
        params = [p for p in inspect.signature(getattr(cls, name)).parameters if p != "self"]
        for p, a in zip(params, node.args, strict=False):
            args[p] = ast.literal_eval(a)
    for kw in node.keywords:
        args[kw.arg] = ast.literal_eval(kw.value)
    return {"name": name, "arguments": args}


def oracle_actions(env: BFCLEnv) -> list:
    """Per user turn: the ground-truth calls as one model step (a list of tool-call
    actions, like one generation with parallel calls), then a text answer ending the turn."""
    actions: list = []
    for turn in env.ground_truth:
        if turn:
            actions.append([json.dumps(parse_ground_truth_call(c, env.methods)) for c in turn])
        actions.append("Done.")
    return actions


# --------------------------------------------------------------------------- tasks


def tasks(n: int | None, seed: int, subset: list[str] | None = None) -> list[Task]:
    """`n` entries spread round-robin over the chosen categories, in BFCL's id order
    (so `-n` picks the same entries for every checkpoint); n=None or 0 means all."""
    _require()
    cats = resolve_categories(subset)
    per_cat = {c: load_category(c) for c in cats}
    order = []
    for i in range(max(len(per_cat[c][0]) for c in cats)):
        for c in cats:
            if i < len(per_cat[c][0]):
                order.append((c, i))
    if n:
        order = order[:n]
    out = []
    for c, i in order:
        entry = per_cat[c][0][i]
        gt = per_cat[c][1][entry["id"]]

        def make_env(entry=entry, gt=gt):
            return BFCLEnv(entry, gt)

        out.append(
            Task(
                SUITE,
                entry["id"],
                c,
                make_env,
                seed=None,
                oracle=lambda env, obs, info: oracle_actions(env),
                meta={"turns": len(entry["question"])},
            )
        )
    return out
