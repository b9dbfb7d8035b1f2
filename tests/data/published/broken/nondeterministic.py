"""Draws its secret from the global random generator: reset(seed) does not fix it."""

import random
import re


class CoinGuess:
    def __init__(self, max_turns=3):
        self.max_turns = max_turns
        self.side = "heads"
        self.turn = 0

    def reset(self, seed=None):
        self.side = random.choice(["heads", "tails"] * 50 + ["edge"])
        self.turn = 0
        return f"A coin ({random.random():.6f}). \\boxed{{heads}} or \\boxed{{tails}}?", {}

    def step(self, action):
        self.turn += 1
        m = re.findall(r"\\boxed\{(\w+)\}", action or "")
        ok = bool(m) and m[-1] == self.side
        return ("Yes." if ok else "No."), (1.0 if ok else 0.0), ok or self.turn >= 3, False, {}

    def solution(self):
        return f"\\boxed{{{self.side}}}"
