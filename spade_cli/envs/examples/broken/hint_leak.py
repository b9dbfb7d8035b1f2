"""Decimal to binary conversion whose 'hint' simply states the answer."""

import random

import gymnasium as gym


class ToBinary(gym.Env):
    metadata = {"name": "to_binary", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.n = rng.randint(300, 4000)
        answer = format(self.n, "b")
        return f"Write {self.n} in binary.", {"hint": f"The binary form is {answer}.", "solution": [answer]}

    def step(self, action):
        ok = action.strip() == format(self.n, "b")
        return "Done.", float(ok), True, False, {}
