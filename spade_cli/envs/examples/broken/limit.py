"""Word ladders with a 'cache' of every ladder written to /tmp: the file outgrows the
sandbox's file-size limit (the same code for too many processes, open files or a full /tmp)."""

import random

import gymnasium as gym

WORDS = ["cold", "cord", "card", "ward", "warm", "word", "wore", "core", "bore", "bare"]


class WordLadder(gym.Env):
    metadata = {"name": "word_ladder", "max_turns": 6}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        block = "\n".join(" -> ".join(rng.sample(WORDS, 5)) for _ in range(2000)) + "\n"
        with open("/tmp/ladder_cache.txt", "w") as fh:
            for _ in range(1000):  # ~60 MB of "cache"
                fh.write(block)
        self.start, self.goal = "cold", "warm"
        self.turns = 0
        return "Turn cold into warm, one letter at a time.", {
            "hint": "Go through cord and card.", "solution": ["cord", "card", "ward", "warm"]}

    def step(self, action):
        self.turns += 1
        if action.strip() == "warm":
            return "Done!", 1.0, True, False, {}
        return "Next.", 0.0, False, self.turns >= 6, {}
