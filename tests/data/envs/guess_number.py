import random

import gymnasium as gym


class GuessNumber(gym.Env):
    """Guess a secret number between 1 and 100 with higher/lower feedback."""

    metadata = {"name": "guess-number", "max_turns": 10}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        self.secret = rng.randint(1, 100)
        self.turns = 0
        hint = f"The number is {'even' if self.secret % 2 == 0 else 'odd'}."
        lo, hi, solution = 1, 100, []
        while True:
            mid = (lo + hi) // 2
            solution.append(str(mid))
            if mid == self.secret:
                break
            if mid < self.secret:
                lo = mid + 1
            else:
                hi = mid - 1
        return "Guess a number between 1 and 100.", {"hint": hint, "solution": solution}

    def step(self, action):
        self.turns += 1
        try:
            guess = int(action.strip())
        except ValueError:
            return "Please answer with an integer.", 0.0, False, self.turns >= 10, {}
        if guess == self.secret:
            return "Correct!", 1.0, True, False, {}
        feedback = "higher" if guess < self.secret else "lower"
        return f"Try {feedback}.", 0.0, False, self.turns >= 10, {}
