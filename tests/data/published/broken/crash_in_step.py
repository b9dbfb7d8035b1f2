"""Crashes on the second step: state it never initialised."""

import random


class Lantern:
    def __init__(self, max_turns=6):
        self.max_turns = max_turns
        self.turn = 0

    def reset(self, seed=None):
        self.turn = 0
        self.colour = random.Random(seed).choice(["red", "blue"])
        return "A lantern hangs in the dark. What do you do?", {}

    def step(self, action):
        self.turn += 1
        if self.turn >= 2:
            return self.flames[self.colour], 0.0, False, False, {}  # self.flames never set
        return "It flickers.", 0.0, False, False, {}

    def solution(self):
        return "\\boxed{light}"
