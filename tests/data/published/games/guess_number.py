"""Guess a hidden number between 10 and 99; each guess is answered higher or lower."""

import random
import re


class GuessNumber:
    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.secret = 0
        self.turn = 0
        self.low, self.high = 10, 99

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.secret = rng.randint(10, 99)
        self.turn = 0
        self.low, self.high = 10, 99
        return ("I am thinking of a whole number from 10 to 99. Guess it with \\boxed{N}; "
                "I will say whether it is higher or lower."), {}

    def step(self, action):
        self.turn += 1
        m = re.findall(r"\\boxed\{([^}]*)\}", action or "")
        truncated = self.turn >= self.max_turns
        if not m or not m[-1].strip().isdigit():
            return (f"Reply with \\boxed{{N}}, N a number from {self.low} to {self.high}.",
                    0.0, False, truncated, {})
        guess = int(m[-1].strip())
        if guess == self.secret:
            return f"{guess} is right.", 1.0, True, False, {}
        if guess < self.secret:
            self.low = max(self.low, guess + 1)
            return f"Higher than {guess}.", 0.0, False, truncated, {}
        self.high = min(self.high, guess - 1)
        return f"Lower than {guess}.", 0.0, False, truncated, {}

    def solution(self):
        return f"\\boxed{{{self.secret}}}"
