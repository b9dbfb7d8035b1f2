"""The published environment contract, presented inside the sandbox as one of ours.

Loaded by worker.py (from the file beside it, inside the jail at /opt/spade) when a
module defines no gymnasium.Env subclass. The published form is a plain class:
`__init__(max_turns=...)`, `reset(seed=None) -> (obs, info)`, `step(action) -> 5-tuple`,
`solution() -> str` (a reference answer: text, never machine-checked). The adapter is a
gymnasium.Env subclass of the same name whose metadata is
{"name": the class name, "max_turns": the constructor's default (or $SPADE_MAX_TURNS),
"contract": "published"}, and whose reset info adds `solution_text` (what solution()
returned after that reset) and, unless the environment gave one, `hint` (the same text,
the privileged information of the hinted condition). No `solution` list: the published
form has no verified solution.

Like worker.py this imports nothing from spade_cli (the package is not in the jail).
"""

import inspect
import os

import gymnasium

# The turn limit of a published class whose constructor declares none
# (spade_cli.envs.actions.DEFAULT_MAX_TURNS, which cannot be imported here).
DEFAULT_MAX_TURNS = 16


def _candidates(module):
    found = [v for v in vars(module).values()
             if isinstance(v, type) and v.__module__ == module.__name__
             and callable(getattr(v, "reset", None)) and callable(getattr(v, "step", None))]
    return [c for c in found if not any(o is not c and issubclass(o, c) for o in found)]


def constructor_max_turns(cls):
    """The default of `max_turns` in `cls.__init__`, or None."""
    try:
        param = inspect.signature(cls.__init__).parameters.get("max_turns")
    except (TypeError, ValueError):
        return None
    if param is None or param.default is inspect.Parameter.empty:
        return None
    value = param.default
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _takes_max_turns(cls):
    try:
        return "max_turns" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def adapt(module):
    """(adapter class, None) for the module's published-form class, or (None, problem)."""
    leaves = _candidates(module)
    if not leaves:
        return None, "the module defines no gymnasium.Env subclass and no class with reset() and step()"
    if len(leaves) > 1:
        return None, "the module defines several classes with reset() and step(): " + ", ".join(
            sorted(c.__name__ for c in leaves))
    inner = leaves[0]
    if not callable(getattr(inner, "solution", None)):
        return None, (f"{inner.__name__} has reset() and step() but no solution() "
                      "(the published contract needs all three)")
    override = os.environ.get("SPADE_MAX_TURNS", "")
    turns = int(override) if override.isdigit() else constructor_max_turns(inner)
    turns = turns if turns is not None else DEFAULT_MAX_TURNS
    takes = _takes_max_turns(inner)

    class Adapter(gymnasium.Env):
        metadata = {"name": inner.__name__, "max_turns": turns, "contract": "published"}

        def __init__(self):
            self.inner = inner(max_turns=turns) if takes else inner()

        def reset(self, seed=None, options=None):
            out = self.inner.reset(seed=seed)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("reset() must return (observation, info)")
            obs, info = out
            if not isinstance(info, dict):
                raise TypeError(f"reset() info must be a dict, got {type(info).__name__}")
            text = self.inner.solution()
            if not isinstance(text, str):
                raise TypeError(f"solution() must return a str, got {type(text).__name__}")
            info = dict(info, solution_text=text)
            info.setdefault("hint", text)
            return obs, info

        def step(self, action):
            return self.inner.step(action)

    Adapter.__name__ = Adapter.__qualname__ = inner.__name__
    Adapter.__module__ = module.__name__
    return Adapter, None
