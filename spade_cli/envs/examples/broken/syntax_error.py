"""Guess the capital city of a country (missing colon after the class header)."""

import random

import gymnasium as gym

CAPITALS = {"France": "Paris", "Peru": "Lima", "Kenya": "Nairobi", "Japan": "Tokyo"}


class Capitals(gym.Env)
    metadata = {"name": "capitals", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.country = rng.choice(sorted(CAPITALS))
        return f"What is the capital of {self.country}?", {"hint": "Think of Europe.", "solution": [CAPITALS[self.country]]}

    def step(self, action):
        ok = action.strip().lower() == CAPITALS[self.country].lower()
        return "Done.", float(ok), True, False, {}
