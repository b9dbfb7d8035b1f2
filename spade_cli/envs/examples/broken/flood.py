"""Knapsack puzzle that prints every subset it tries while searching (debug output left in):
far more text than the sandbox lets an environment print."""

import itertools
import random

import gymnasium as gym


class Knapsack(gym.Env):
    metadata = {"name": "knapsack", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.items = [(rng.randint(1, 20), rng.randint(1, 30)) for _ in range(20)]
        best = 0
        for r in range(len(self.items) + 1):
            for combo in itertools.combinations(self.items, r):
                print("trying", combo)  # debug
                if sum(w for w, _ in combo) <= 50:
                    best = max(best, sum(v for _, v in combo))
        self.best = best
        return f"Items (weight, value): {self.items}. Best value within weight 50?", {
            "hint": "Dynamic programming over the weight.", "solution": [str(best)]}

    def step(self, action):
        return "Done.", float(action.strip() == str(self.best)), True, False, {}
