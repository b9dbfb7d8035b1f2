"""One arithmetic question, one answer: a quiz, not an interactive environment."""

import random
import re


class SumQuiz:
    def __init__(self, max_turns=1):
        self.max_turns = max_turns
        self.a = self.b = 0

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.a, self.b = rng.randint(10, 99), rng.randint(10, 99)
        return f"What is {self.a} + {self.b}? Answer with \\boxed{{N}}.", {}

    def step(self, action):
        m = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action or "")
        ok = bool(m) and int(m[-1]) == self.a + self.b
        return ("Correct." if ok else "Wrong."), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return f"\\boxed{{{self.a + self.b}}}"
