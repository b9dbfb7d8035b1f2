"""What is the sum? One question, one answer: a quiz, not an interactive environment
(rejected only with --reject-single-shot)."""

import random

import gymnasium as gym


class SumQuiz(gym.Env):
    metadata = {"name": "sum_quiz", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.a, self.b = rng.randint(100, 999), rng.randint(100, 999)
        return f"What is {self.a} + {self.b}? Answer with the number only.", {
            "hint": "Add the hundreds, then the tens, then the units.",
            "solution": [str(self.a + self.b)]}

    def step(self, action):
        ok = action.strip() == str(self.a + self.b)
        return ("Correct." if ok else "Wrong."), float(ok), True, False, {}
