"""A counter game without solution(): not a complete environment of the published form."""

import re


class CountUp:
    def __init__(self, max_turns=5):
        self.max_turns = max_turns
        self.n = 0

    def reset(self, seed=None):
        self.n = 0
        return "Say \\boxed{up} three times.", {}

    def step(self, action):
        if re.search(r"\\boxed\{up\}", action or ""):
            self.n += 1
        done = self.n >= 3
        return f"Count: {self.n}.", (1.0 if done else 0.0), done, False, {}
