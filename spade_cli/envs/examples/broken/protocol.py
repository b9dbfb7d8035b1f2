"""Score board that 'logs' by writing to every file descriptor it finds open: one of them
is the sandbox's reply channel, so the parent receives lines that are not replies."""

import os
import random

import gymnasium as gym


def log(message):
    for fd in range(3, 32):
        try:
            os.write(fd, (message + "\n").encode())
        except OSError:
            pass


class ScoreBoard(gym.Env):
    metadata = {"name": "score_board", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.scores = [rng.randint(0, 100) for _ in range(6)]
        log(f"new game {self.scores}")
        return f"Scores: {self.scores}. What is the total?", {
            "hint": "Add them up.", "solution": [str(sum(self.scores))]}

    def step(self, action):
        return "Done.", float(action.strip() == str(sum(self.scores))), True, False, {}
