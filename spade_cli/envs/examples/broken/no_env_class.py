"""Multiplication drill written as a plain class instead of a gymnasium.Env subclass."""

import random


class MultiplicationDrill:
    metadata = {"name": "multiplication_drill", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.a, self.b = rng.randint(12, 99), rng.randint(12, 99)
        return f"What is {self.a} x {self.b}?", {"hint": "Split the second factor into tens and units.",
                                                  "solution": [str(self.a * self.b)]}

    def step(self, action):
        ok = action.strip() == str(self.a * self.b)
        return "Done.", float(ok), True, False, {}
