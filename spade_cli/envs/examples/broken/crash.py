"""Bit-counting puzzle whose hand-rolled ctypes helper reads through a bad pointer: the
interpreter dies with a segmentation fault (stands for any native-code crash)."""

import ctypes
import random

import gymnasium as gym


class Table(ctypes.Structure):
    _fields_ = [("size", ctypes.c_long), ("counts", ctypes.c_char * 256)]


# "Fast path": the table's address was meant to be filled in later, and never was;
# 16 is an offset from a null base, so the read lands in unmapped memory.
TABLE = ctypes.cast(ctypes.c_void_p(16), ctypes.POINTER(Table))


def popcount_fast(n):
    return TABLE.contents.counts[n % 256]


class PopCount(gym.Env):
    metadata = {"name": "popcount", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.n = rng.randint(1000, 10**6)
        popcount_fast(self.n)
        return f"How many 1 bits does {self.n} have?", {"hint": "Write it in binary.", "solution": [str(bin(self.n).count("1"))]}

    def step(self, action):
        return "Done.", float(action.strip() == str(bin(self.n).count("1"))), True, False, {}
