"""Measure an exact amount of water with two unmarked jugs (fill, empty, pour).

Family: multi-step planning
"""

import math
import random
import re
from collections import deque

import gymnasium as gym


def _apply(state, caps, action):
    a, b = state
    ca, cb = caps
    kind, args = action[0], action[1:]
    if kind == "fill":
        return (ca, b) if args == ("A",) else (a, cb)
    if kind == "empty":
        return (0, b) if args == ("A",) else (a, 0)
    if args == ("A", "B"):
        t = min(a, cb - b)
        return (a - t, b + t)
    t = min(b, ca - a)
    return (a + t, b - t)


ACTIONS = [("fill", "A"), ("fill", "B"), ("empty", "A"), ("empty", "B"),
           ("pour", "A", "B"), ("pour", "B", "A")]


def _text(action):
    return " ".join(action) if action[0] != "pour" else f"pour {action[1]} into {action[2]}"


def _parse(text):
    words = re.findall(r"[a-z]+", str(text).lower())
    if not words or words[0] not in ("fill", "empty", "pour"):
        return None
    jugs = tuple(w.upper() for w in words[1:] if w in ("a", "b"))
    if words[0] in ("fill", "empty") and len(jugs) == 1:
        return (words[0], jugs[0])
    if words[0] == "pour" and len(jugs) == 2 and jugs[0] != jugs[1]:
        return ("pour", *jugs)
    return None


class WaterJugs(gym.Env):
    metadata = {"name": "water_jugs", "max_turns": 30}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            caps = (rng.randint(3, 13), rng.randint(3, 13))
            target = rng.randint(1, max(caps) - 1)
            if caps[0] == caps[1] or target in caps or target % math.gcd(*caps):
                continue
            prev, queue = {(0, 0): None}, deque([(0, 0)])
            goal = None
            while queue:
                s = queue.popleft()
                if target in s:
                    goal = s
                    break
                for act in ACTIONS:
                    n = _apply(s, caps, act)
                    if n not in prev:
                        prev[n] = (s, act)
                        queue.append(n)
            path = []
            while goal is not None and prev[goal] is not None:
                goal, act = prev[goal]
                path.append(_text(act))
            if len(path) >= 4:
                break
        path.reverse()
        self._caps, self._target = caps, target
        self._state, self._turns = (0, 0), 0
        self._max = min(self.metadata["max_turns"], len(path) + 10)
        first = _parse(path[0])[1]
        other = "B" if first == "A" else "A"
        hint = (f"Only ever fill jug {first}; pour it into jug {other}, and empty jug {other} "
                f"whenever it is full. {len(path)} actions are enough.")
        obs = self._render(f"Jug A holds {caps[0]} litres and jug B holds {caps[1]} litres; both "
                           f"start empty. Get exactly {target} litres into one of the jugs.")
        return obs, {"hint": hint, "solution": path}

    def _render(self, message):
        return (f"{message}\nA: {self._state[0]}/{self._caps[0]}  B: {self._state[1]}/"
                f"{self._caps[1]}. Actions: 'fill A', 'empty B', 'pour A into B', ... "
                f"Actions left: {self._max - self._turns}.")

    def step(self, action):
        self._turns += 1
        act = _parse(action)
        message = "I don't understand that action."
        if act is not None:
            self._state, message = _apply(self._state, self._caps, act), "Done."
        if self._target in self._state:
            return self._render("You measured it!"), 1.0, True, False, {}
        return self._render(message), 0.0, False, self._turns >= self._max, {}
