"""Rectangle areas; the solution uses the perimeter formula by mistake, so it never solves."""

import random

import gymnasium as gym


class RectangleArea(gym.Env):
    metadata = {"name": "rectangle_area", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.w, self.h = rng.randint(3, 40), rng.randint(3, 40)
        wrong = 2 * (self.w + self.h)
        return (f"A rectangle is {self.w} m wide and {self.h} m tall. What is its area in m2?",
                {"hint": "Multiply width by height.", "solution": [str(wrong)]})

    def step(self, action):
        ok = action.strip() == str(self.w * self.h)
        return "Done.", float(ok), True, False, {}
