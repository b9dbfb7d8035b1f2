"""Flood-fill region counting with unbounded recursion: the interpreter's C stack overflows."""

import random
import sys

import gymnasium as gym

sys.setrecursionlimit(10**9)


def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)


class FloodFill(gym.Env):
    metadata = {"name": "flood_fill", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.n = rng.randint(10, 20)
        depth(10**8)  # walks the whole (huge) grid recursively
        return f"How many regions? {self.n}", {"hint": "Count them.", "solution": [str(self.n)]}

    def step(self, action):
        return "Done.", float(action.strip() == str(self.n)), True, False, {}
