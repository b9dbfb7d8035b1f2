"""Counting game that pays out on the right count but never ends the episode."""

import random

import gymnasium as gym


class CountVowels(gym.Env):
    metadata = {"name": "count_vowels", "max_turns": 5}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.text = " ".join(rng.choice(["banana", "kiwi", "mango", "papaya", "quince"]) for _ in range(6))
        self.count = sum(c in "aeiou" for c in self.text)
        self.paid = False
        return f"How many vowels are in: {self.text}?", {"hint": "Count a, e, i, o and u.", "solution": [str(self.count)]}

    def step(self, action):
        if action.strip() == str(self.count) and not self.paid:
            self.paid = True
            return "Correct!", 1.0, False, False, {}
        return "Keep going.", 0.0, False, False, {}
