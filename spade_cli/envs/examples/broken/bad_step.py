"""Higher-or-lower number guessing written against the old gym API (4-tuple step)."""

import random

import gymnasium as gym


class HigherLower(gym.Env):
    metadata = {"name": "higher_lower", "max_turns": 10}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.secret, self.turns = rng.randint(1, 1000), 0
        return "Guess my number between 1 and 1000.", {"hint": "Halve the interval every time.",
                                                       "solution": [str(self.secret)]}

    def step(self, action):
        self.turns += 1
        try:
            guess = int(action)
        except ValueError:
            return "Send a number.", 0.0, self.turns >= 10, {}
        if guess == self.secret:
            return "Got it!", 1.0, True, {}
        return ("higher" if guess < self.secret else "lower"), 0.0, self.turns >= 10, {}
