"""Mastermind: find a hidden code of four colours from exact and colour-only feedback.

Family: games
"""

import random
import re
from collections import Counter

import gymnasium as gym

COLOURS = ["red", "green", "blue", "yellow", "orange", "purple"]


class Mastermind(gym.Env):
    metadata = {"name": "mastermind", "max_turns": 10}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            code = [rng.choice(COLOURS) for _ in range(4)]
            if len(set(code)) >= 2:
                break
        self._code, self._turns = code, 0
        absent = [c for c in COLOURS if c not in code]
        hint = (f"The code uses {len(set(code))} different colours and contains no "
                f"{' and no '.join(absent)}.")
        obs = (f"Guess the secret code: 4 pegs, each one of {', '.join(COLOURS)} (repeats "
               f"allowed). After each guess you learn how many pegs are the right colour in "
               f"the right place (exact) and how many more are the right colour in the wrong "
               f"place (near). Reply with four colours separated by spaces. You have "
               f"{self.metadata['max_turns']} guesses.")
        return obs, {"hint": hint, "solution": [" ".join(code)]}

    def step(self, action):
        self._turns += 1
        truncated = self._turns >= self.metadata["max_turns"]
        guess = [w for w in re.findall(r"[a-z]+", str(action).lower()) if w in COLOURS]
        if len(guess) != 4:
            return (f"A guess is exactly four colours. Guesses left: "
                    f"{self.metadata['max_turns'] - self._turns}.", 0.0, False, truncated, {})
        exact = sum(g == c for g, c in zip(guess, self._code, strict=False))
        common = sum((Counter(guess) & Counter(self._code)).values())
        if exact == 4:
            return "exact 4, near 0: you cracked the code!", 1.0, True, False, {}
        return (f"{' '.join(guess)}: exact {exact}, near {common - exact}. Guesses left: "
                f"{self.metadata['max_turns'] - self._turns}.", 0.0, False, truncated, {})
