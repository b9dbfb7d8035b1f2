"""Open a vault with a hidden three-digit code; each try says how many digits are in place.

Partial progress: 0.2 the first time each digit is in place, 0.4 for opening the vault.
"""

import random
import re


class VaultCode:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.code = "000"
        self.turn = 0
        self.credited = set()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.code = "".join(rng.choice("0123456789") for _ in range(3))
        self.turn = 0
        self.credited = set()
        return ("A vault with a three-digit code. Try a code with \\boxed{try DDD}; the lock "
                "tells you how many digits are in the right place."), {}

    def step(self, action):
        self.turn += 1
        truncated = self.turn >= self.max_turns
        m = re.findall(r"\\boxed\{\s*try\s+(\d{3})\s*\}", action or "")
        if not m:
            return "The lock only understands \\boxed{try DDD}.", 0.0, False, truncated, {}
        guess = m[-1]
        right = [i for i in range(3) if guess[i] == self.code[i]]
        reward = 0.2 * len(set(right) - self.credited)
        self.credited |= set(right)
        if guess == self.code:
            return "Click. The vault opens.", reward + 0.4, True, False, {}
        return f"{guess}: {len(right)} digit(s) in the right place.", reward, False, truncated, {}

    def solution(self):
        return f"\\boxed{{try {self.code}}}"
