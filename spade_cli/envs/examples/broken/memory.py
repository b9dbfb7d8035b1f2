"""Shortest paths on a grid with an all-pairs distance table far too big for the sandbox."""

import random

import gymnasium as gym


class GridDistances(gym.Env):
    metadata = {"name": "grid_distances", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.size = 3000
        # A full size^2 x size^2 table, built eagerly "for speed".
        self.table = [[0] * (self.size * self.size) for _ in range(self.size)]
        self.a = (rng.randrange(self.size), rng.randrange(self.size))
        self.b = (rng.randrange(self.size), rng.randrange(self.size))
        d = abs(self.a[0] - self.b[0]) + abs(self.a[1] - self.b[1])
        return f"Manhattan distance from {self.a} to {self.b}?", {"hint": "Add the differences.", "solution": [str(d)]}

    def step(self, action):
        d = abs(self.a[0] - self.b[0]) + abs(self.a[1] - self.b[1])
        return "Done.", float(action.strip() == str(d)), True, False, {}
