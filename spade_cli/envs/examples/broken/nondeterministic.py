"""Sum of dice; uses the global random module, so the same seed gives different episodes."""

import random

import gymnasium as gym


class DiceSum(gym.Env):
    metadata = {"name": "dice_sum", "max_turns": 1}

    def reset(self, seed=None, options=None):
        self.dice = [random.randint(1, 6) for _ in range(7)]
        self.target = sum(self.dice) * 3 + 1
        return (f"Seven dice show {self.dice}. What is three times their sum, plus one?",
                {"hint": "Add the dice first, then multiply.", "solution": [str(self.target)]})

    def step(self, action):
        ok = action.strip() == str(self.target)
        return "Done.", float(ok), True, False, {}
