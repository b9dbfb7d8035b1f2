"""Anagram solving with a word list read from disk (the file does not exist in the sandbox)."""

import random

import gymnasium as gym

with open("/usr/share/dict/words") as fh:
    WORDS = [w.strip().lower() for w in fh if len(w.strip()) == 6]


class Anagrams(gym.Env):
    metadata = {"name": "anagrams", "max_turns": 3}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.word = rng.choice(WORDS)
        letters = list(self.word)
        rng.shuffle(letters)
        self.turns = 0
        return f"Unscramble: {''.join(letters)}", {"hint": f"It starts with {self.word[0]}.", "solution": [self.word]}

    def step(self, action):
        self.turns += 1
        if action.strip().lower() == self.word:
            return "Yes!", 1.0, True, False, {}
        return "No.", 0.0, False, self.turns >= 3, {}
