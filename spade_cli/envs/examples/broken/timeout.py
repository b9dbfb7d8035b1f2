"""Magic squares by rejection sampling with a condition that can never hold: reset() spins."""

import random

import gymnasium as gym


class MagicSquare(gym.Env):
    metadata = {"name": "magic_square", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        while True:
            cells = rng.sample(range(1, 10), 9)
            rows = [sum(cells[i:i + 3]) for i in (0, 3, 6)]
            if len(set(rows)) == 1 and rows[0] == 16:  # impossible: every row of 1..9 sums to 15
                break
        self.cells = cells
        return "Find the missing cell.", {"hint": "Rows sum to 16.", "solution": [str(cells[4])]}

    def step(self, action):
        return "Done.", float(action.strip() == str(self.cells[4])), True, False, {}
