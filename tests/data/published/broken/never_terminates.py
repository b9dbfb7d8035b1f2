"""Ignores max_turns and never ends an episode."""

import random


class Echo:
    def __init__(self, max_turns=5):
        self.max_turns = max_turns
        self.word = ""

    def reset(self, seed=None):
        self.word = random.Random(seed).choice(["alpha", "beta", "gamma"])
        return "Guess my word: \\boxed{WORD}.", {}

    def step(self, action):
        return f"You said {action!r}; not quite.", 0.0, False, False, {}

    def solution(self):
        return f"\\boxed{{{self.word}}}"
