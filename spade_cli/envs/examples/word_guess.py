"""A five-letter word-guessing game with per-letter feedback (like Wordle), six tries.

Family: games
"""

import random
import re

import gymnasium as gym

WORDS = ("apple grape lemon mango peach plums chair table couch shelf stove brick stone "
         "cloud storm frost flame river ocean beach coast plant tiger zebra horse camel "
         "eagle otter whale shark crown sword lance arrow piano flute cello drums maple "
         "cedar birch olive bread toast honey sugar spice chalk paint pearl amber").split()
HINTS = {"fruit": "apple grape lemon mango peach plums olive", "furniture": "chair table couch shelf",
         "building material": "brick stone chalk", "weather": "cloud storm frost",
         "nature": "flame river ocean beach coast plant maple cedar birch",
         "animal": "tiger zebra horse camel eagle otter whale shark",
         "object": "stove crown sword lance arrow paint pearl amber",
         "musical instrument": "piano flute cello drums", "food": "bread toast honey sugar spice"}


def _feedback(guess, secret):
    marks, left = ["-"] * 5, list(secret)
    for i, (g, s) in enumerate(zip(guess, secret, strict=False)):
        if g == s:
            marks[i] = "G"
            left.remove(g)
    for i, g in enumerate(guess):
        if marks[i] == "-" and g in left:
            marks[i] = "Y"
            left.remove(g)
    return "".join(marks)


class WordGuess(gym.Env):
    metadata = {"name": "word_guess", "max_turns": 6}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        self._secret = rng.choice(WORDS)
        self._turns = 0
        group = next(g for g, ws in HINTS.items() if self._secret in ws.split())
        hint = f"The word is a kind of {group} and its second letter is '{self._secret[1]}'."
        obs = ("Guess the secret five-letter English word. After each guess you get one mark "
               "per letter: G = right letter in the right spot, Y = in the word but elsewhere, "
               "- = not in the word. Reply with one lower-case word. You have 6 tries.")
        return obs, {"hint": hint, "solution": [self._secret]}

    def step(self, action):
        self._turns += 1
        truncated = self._turns >= self.metadata["max_turns"]
        words = re.findall(r"[a-z]+", str(action).lower())
        guess = next((w for w in words if len(w) == 5), None)
        if guess is None:
            return "Please guess a five-letter word.", 0.0, False, truncated, {}
        if guess == self._secret:
            return f"{guess}: GGGGG. You found it!", 1.0, True, False, {}
        left = self.metadata["max_turns"] - self._turns
        return f"{guess}: {_feedback(guess, self._secret)} ({left} tries left)", 0.0, False, truncated, {}
