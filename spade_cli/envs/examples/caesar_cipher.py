"""Decode a short message written with a Caesar shift cipher.

Family: single-answer reasoning
"""

import random
import re

import gymnasium as gym

WORDS = ("river garden silver window market candle forest yellow planet rocket orange "
         "basket winter summer little bright castle bridge dragon flower copper pocket "
         "mirror shadow thunder harbor meadow lantern button ticket violet tunnel").split()


def _shift(text, k):
    out = []
    for ch in text:
        if ch.isalpha():
            out.append(chr((ord(ch.lower()) - 97 + k) % 26 + 97))
        else:
            out.append(ch)
    return "".join(out)


class CaesarCipher(gym.Env):
    metadata = {"name": "caesar_cipher", "max_turns": 1}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        plain = " ".join(rng.sample(WORDS, rng.randint(3, 4)))
        k = rng.choice([k for k in range(2, 25) if k != 13])
        self._plain = plain
        self._done = False
        obs = (f"This message was encrypted by shifting every letter forward in the alphabet "
               f"by the same secret amount (wrapping from z to a): '{_shift(plain, k).upper()}'. "
               f"Reply with the decrypted message in lower case.")
        hint = f"The shift is {k}: move every letter {k} places back in the alphabet."
        return obs, {"hint": hint, "solution": [plain]}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._done = True
        words = re.findall(r"[a-z]+", str(action).lower())
        if " ".join(words) == self._plain:
            return "Correct.", 1.0, True, False, {}
        return "Incorrect.", 0.0, True, False, {}
