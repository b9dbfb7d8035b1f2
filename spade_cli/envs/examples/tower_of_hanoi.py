"""Tower of Hanoi from a scrambled (but legal) position to one target peg.

Family: multi-step planning
"""

import itertools
import random
import re
from collections import deque

import gymnasium as gym

PEGS = "ABC"


def _moves(state):
    """state[i] is the peg of disk i+1 (disk 1 is the smallest)."""
    tops = {}
    for disk, peg in enumerate(state):
        tops.setdefault(peg, disk)
    for src, dst in itertools.permutations(PEGS, 2):
        if src in tops and (dst not in tops or tops[dst] > tops[src]):
            s = list(state)
            s[tops[src]] = dst
            yield f"move {src} {dst}", tuple(s)


class TowerOfHanoi(gym.Env):
    metadata = {"name": "tower_of_hanoi", "max_turns": 40}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        n = rng.randint(4, 5)
        while True:
            start = tuple(rng.choice(PEGS) for _ in range(n))
            target = rng.choice(PEGS)
            goal = (target,) * n
            prev, queue = {start: None}, deque([start])
            while queue:
                s = queue.popleft()
                if s == goal:
                    break
                for name, nxt in _moves(s):
                    if nxt not in prev:
                        prev[nxt] = (s, name)
                        queue.append(nxt)
            path, s = [], goal
            while prev[s] is not None:
                s, name = prev[s]
                path.append(name)
            if len(path) >= 7:
                break
        path.reverse()
        self._state, self._goal, self._turns = start, goal, 0
        self._max = min(self.metadata["max_turns"], len(path) + 12)
        big = max(i for i in range(n) if start[i] != target)
        spare = next(p for p in PEGS if p not in (start[big], target))
        hint = (f"Disk {big + 1} is the largest disk not yet on peg {target}; it must move from "
                f"peg {start[big]} straight to peg {target}, so first stack every smaller "
                f"disk on peg {spare}.")
        obs = self._render(f"Move all {n} disks onto peg {target}. Only the top disk of a peg "
                           f"can move, and never onto a smaller disk.")
        return obs, {"hint": hint, "solution": path}

    def _render(self, message):
        lines = []
        for p in PEGS:
            disks = [str(i + 1) for i in reversed(range(len(self._state))) if self._state[i] == p]
            lines.append(f"{p}: {' '.join(disks) or '(empty)'}")
        return (f"{message}\n" + "\n".join(lines) + "\n(bottom to top). Reply 'move X Y' to "
                f"move the top disk of peg X onto peg Y. Moves left: {self._max - self._turns}.")

    def step(self, action):
        self._turns += 1
        pegs = re.findall(r"\b([abc])\b", str(action).lower())
        name = f"move {pegs[0].upper()} {pegs[1].upper()}" if len(pegs) == 2 else None
        legal = dict(_moves(self._state))
        message = "Illegal move."
        if name in legal:
            self._state, message = legal[name], f"Done: {name}."
        if self._state == self._goal:
            return self._render("All disks are home!"), 1.0, True, False, {}
        return self._render(message), 0.0, False, self._turns >= self._max, {}
