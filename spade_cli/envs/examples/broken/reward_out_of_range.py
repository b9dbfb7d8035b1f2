"""Spelling bee that awards 10 points per correct answer (returns must stay in [0, 1])."""

import random

import gymnasium as gym

WORDS = ["necessary", "rhythm", "accommodate", "conscience", "liaison", "millennium"]


class SpellingBee(gym.Env):
    metadata = {"name": "spelling_bee", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.word = rng.choice(WORDS)
        masked = "".join(c if i % 2 == 0 else "_" for i, c in enumerate(self.word))
        return f"Complete the word: {masked}", {"hint": f"It has {len(self.word)} letters.", "solution": [self.word]}

    def step(self, action):
        if action.strip().lower() == self.word:
            return "Correct, 10 points!", 10.0, True, False, {}
        return "Wrong.", 0.0, True, False, {}
