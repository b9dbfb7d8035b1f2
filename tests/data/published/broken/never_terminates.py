"""Ignores max_turns and never ends an episode."""

import random


class Echo:
    def __init__(self, max_turns=5):
        self.max_turns = max_turns
        self.word = ""

    def reset(self, seed=None):
        self.word = random.Random(seed).choice(["alpha", "beta", "gamma"])
        return f"Repeat after me: {self.word}", {}

    def step(self, action):
        return f"You said {action!r}; say {self.word}.", 0.0, False, False, {}

    def solution(self):
        return f"\\boxed{{{self.word}}}"
