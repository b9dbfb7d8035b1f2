"""The micro world's environment families: base classes a design subclasses.

This module is trusted code that runs inside the sandbox: the jail exposes it as
`spade_micro` (only the standard library and gymnasium are used), so a design is short:

    from spade_micro import CorridorEnv

    class DarkHall(CorridorEnv):
        level = 4

and still a complete environment of our contract (reset/step, `info["solution"]`,
`info["hint"]`), checked in full by spade-validate. Each family has six levels, from
trivial to out of reach for a weak agent. Every family hides one fact that the hint states
and that the agent can otherwise only learn by spending turns (a wrong guess reveals it),
so a hint pays off where the turn budget is too tight to explore: that is the regret.

Families (one per skill):
    CorridorEnv   Spatial Reasoning   walk to a door on a hidden side, then `enter`
    CodeEnv       Pattern Recognition type a code slot by slot; one slot may be hidden
    SwitchEnv     Logical Deduction   press the first or the last switch, by a hidden rule

Every decision rests on the end of the last observation (the hint, appended to the first
one, included), so a model of a million parameters can learn it in minutes: the hidden
fact (a direction, a symbol, a rule) matters at the first move, where only the hint or a
wasted turn gives it.

The level tables are fixed: changing them changes every experiment's results.
"""

from __future__ import annotations

import random
import re

import gymnasium as gym

LEVELS = (1, 2, 3, 4, 5, 6)
# Symbols avoid the letters and words the validator's nonsense policy plays (a, b, c, x).
SYMBOLS = "dfgkmpqrstvwz"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class MicroEnv(gym.Env):
    """The shared machinery: a level, a turn budget, text actions, the final reward."""

    family = "micro"
    skill = ""
    level = 1
    # Per level: the family's parameters (a tuple, read by the subclass).
    TABLE: dict[int, tuple] = {}
    metadata = {"name": "micro", "max_turns": 1}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("TABLE"):
            return  # a family itself, not a design
        if not isinstance(cls.level, int) or isinstance(cls.level, bool) or cls.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {cls.level!r}")
        cls.metadata = {"name": _snake(cls.__name__), "max_turns": cls.budget_for(cls.level)}

    @classmethod
    def budget_for(cls, level: int) -> int:
        """The turn budget of a level (each family writes it from its table)."""
        raise NotImplementedError("a family writes budget_for(); a design subclasses a family")

    def __init__(self):
        super().__init__()
        self._turns, self._budget, self._done = 0, 1, False
        # The episode's hidden fact, the one the hint states ("left", "first", "rank 2 of
        # 4"): the held-out suite draws equally many episodes of each (evals/micro.py).
        self.secret = ""

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._turns, self._done = 0, False
        self._budget = self.budget_for(self.level)
        obs, hint, solution = self._setup(random.Random(seed), *self.TABLE[self.level])
        return obs, {"hint": hint, "solution": solution}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._turns += 1
        obs, solved = self._act(str(action).strip().lower())
        if solved:
            self._done = True
            return obs + " Solved.", 1.0, True, False, {}
        out_of_turns = self._turns >= self._budget
        self._done = out_of_turns
        return obs, 0.0, False, out_of_turns, {}

    def _setup(self, rng: random.Random, *params) -> tuple[str, str, list[str]]:
        """A new episode from the level's TABLE row: (observation, hint, solution)."""
        raise NotImplementedError("a family writes _setup(); a design subclasses a family")

    def _act(self, action: str) -> tuple[str, bool]:
        """One normalised action: (observation, solved)."""
        raise NotImplementedError("a family writes _act(); a design subclasses a family")


class CorridorEnv(MicroEnv):
    """A corridor of cells; a door lies on one side of the start, a wall ends each side.
    `left`/`right` move one cell, `enter` opens the door when standing at it. Walking the
    wrong way costs the walk to the wall and back, which the budget may not allow."""

    family = "corridor"
    skill = "Spatial Reasoning"
    COMMANDS = ("enter", "left", "right")
    # level: (distance to the door, cells behind the start, spare turns)
    TABLE = {1: (1, 1, 4), 2: (2, 1, 3), 3: (2, 2, 2), 4: (3, 2, 1), 5: (4, 3, 1), 6: (5, 4, 0)}

    @classmethod
    def budget_for(cls, level):
        door, _, spare = cls.TABLE[level]
        return door + 1 + spare

    def _setup(self, rng, door, behind, spare):
        side = self.secret = rng.choice(("left", "right"))
        # cells 0..n-1; the door `door` cells from the start on `side`
        if side == "right":
            self._pos, self._door, self._n = (
                behind,
                behind + door,
                behind + door + 1 + rng.randint(0, 1),
            )
        else:
            extra = rng.randint(0, 1)
            self._pos, self._door, self._n = door + extra, extra, door + extra + behind + 1
        self._facing = "right"
        obs = (
            f"You stand in a dark corridor with {self._budget} moves. Somewhere is a door. "
            f"Commands: {', '.join(self.COMMANDS)}."
        )
        return obs, f"The door is to your {side}.", [side] * door + ["enter"]

    def _act(self, action):
        # Each observation ends with where the agent now faces, or `enter` at the door.
        if action in ("left", "right"):
            nxt = self._pos + (1 if action == "right" else -1)
            if not 0 <= nxt < self._n:
                self._facing = "left" if action == "right" else "right"
                return f"A wall. You turn {self._facing}.", False
            self._pos, self._facing = nxt, action
            if nxt == self._door:
                return "A door is here: enter.", False
            return f"No door. You face {action}.", False
        if action == "enter":
            if self._pos == self._door:
                return "You open the door.", True
            return f"No door here. You face {self._facing}.", False
        return f"Unknown command. You face {self._facing}.", False


class CodeEnv(MicroEnv):
    """A lock whose code is typed one slot per turn; each observation ends with the slot's
    symbol, except that the first slot may be hidden (`?`). A wrong symbol costs a turn and
    names the right one."""

    family = "code"
    skill = "Pattern Recognition"
    # level: (slots, hidden slots (0 or 1), symbols to choose from, spare turns)
    TABLE = {
        1: (2, 0, 3, 1),
        2: (3, 1, 3, 1),
        3: (3, 1, 3, 0),
        4: (4, 1, 4, 0),
        5: (5, 1, 5, 0),
        6: (6, 1, 6, 0),
    }

    @classmethod
    def budget_for(cls, level):
        slots, _, _, spare = cls.TABLE[level]
        return slots + spare

    def _setup(self, rng, slots, hidden, symbols, spare):
        self._alphabet = sorted(rng.sample(SYMBOLS, symbols))
        code = [rng.choice(self._alphabet) for _ in range(slots)]
        for i in range(1, slots):  # no symbol twice in a row, so no constant policy opens it
            while code[i] == code[i - 1]:
                code[i] = rng.choice(self._alphabet)
        self._hidden = 0 if hidden else -1  # only the first slot is ever hidden
        rank = self._alphabet.index(code[0])
        self.secret = f"rank {rank + 1} of {symbols}" if hidden else "none"
        self._code, self._slot = code, 0
        obs = f"A lock with {slots} slots and symbols {' '.join(self._alphabet)}. {self._show()}"
        hint = f"The hidden slot holds {code[self._hidden]}." if hidden else "No slot is hidden."
        return obs, hint, list(code)

    def _show(self) -> str:
        n, total = self._slot + 1, len(self._code)
        shown = "?" if self._slot == self._hidden else self._code[self._slot]
        return f"Slot {n} of {total}: {shown}"

    def _act(self, action):
        if action not in self._alphabet:
            return f"Answer with one symbol. {self._show()}", False
        want = self._code[self._slot]
        if action != want:
            return f"{action} is wrong. Slot {self._slot + 1} of {len(self._code)}: {want}", False
        self._slot += 1
        if self._slot == len(self._code):
            return "The lock opens.", True
        return f"Accepted. {self._show()}", False


class SwitchEnv(MicroEnv):
    """Stages of switches; a hidden rule, the same at every stage, says whether the first
    or the last switch listed is the right one. Once the rule is known (the hint, or the
    first press: a wrong one costs a turn) every observation ends with the rule and the
    switch it picks, as the code's slots name their symbol."""

    family = "switch"
    skill = "Logical Deduction"
    RULES = ("first", "last")
    # level: (switches per stage, stages, spare turns)
    TABLE = {1: (2, 1, 1), 2: (2, 2, 1), 3: (3, 2, 1), 4: (3, 3, 0), 5: (4, 4, 0), 6: (5, 5, 0)}

    @classmethod
    def budget_for(cls, level):
        _, stages, spare = cls.TABLE[level]
        return stages + spare

    def _setup(self, rng, switches, stages, spare):
        self._rule = self.secret = rng.choice(self.RULES)
        self._stages = [rng.sample(SYMBOLS, switches) for _ in range(stages)]
        self._stage, self._known = 0, False
        self._pick = 0 if self._rule == "first" else -1
        solution = [s[self._pick] for s in self._stages]
        return self._show(), self._rule_text(), solution

    def _rule_text(self) -> str:
        return f"Press the {self._rule} one: {self._stages[self._stage][self._pick]}."

    def _show(self) -> str:
        switches = " ".join(self._stages[self._stage])
        rule = f" {self._rule_text()}" if self._known else ""
        return f"Stage {self._stage + 1} of {len(self._stages)}: {switches}.{rule}"

    def _act(self, action):
        switches = self._stages[self._stage]
        if action not in switches:
            return f"Press one symbol. {self._show()}", False
        self._known = True  # a right press shows the rule as surely as a wrong one
        if action != switches[self._pick]:
            return f"{action}: no. {self._show()}", False
        self._stage += 1
        if self._stage == len(self._stages):
            return "All stages cleared.", True
        return f"Yes. {self._show()}", False


FAMILIES = {cls.family: cls for cls in (CorridorEnv, CodeEnv, SwitchEnv)}
SKILLS = {cls.skill: cls for cls in FAMILIES.values()}
