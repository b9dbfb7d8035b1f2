"""Walk a dark corridor of five rooms to the exit. Each room shows two doors; the wrong
one drops you back in the first room, so the agent must remember what it learnt.

Partial progress: 0.2 for each room reached for the first time (the exit is the fifth).
"""

import random
import re

DIRECTIONS = ["north", "south", "east", "west"]


class DarkCorridor:
    def __init__(self, max_turns=20):
        self.max_turns = max_turns
        self.right = []
        self.decoy = []
        self.room = 0
        self.best = 0
        self.turn = 0

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.right, self.decoy = [], []
        for _ in range(5):
            a, b = rng.sample(DIRECTIONS, 2)
            self.right.append(a)
            self.decoy.append(b)
        self.room = self.best = self.turn = 0
        return self._describe("You stand in the first dark room."), {}

    def _describe(self, lead):
        doors = sorted([self.right[self.room], self.decoy[self.room]])
        return (f"{lead} Room {self.room + 1} of 5. Doors: {doors[0]} and {doors[1]}. "
                "Move with \\boxed{north|south|east|west}.")

    def step(self, action):
        self.turn += 1
        truncated = self.turn >= self.max_turns
        m = re.findall(r"\\boxed\{\s*(\w+)\s*\}", action or "")
        move = m[-1].lower() if m else ""
        if move not in DIRECTIONS:
            return self._describe("Nothing happens."), 0.0, False, truncated, {}
        if move != self.right[self.room]:
            lead = (f"The {move} door drops you back into the first room."
                    if move == self.decoy[self.room] else f"You bump into the {move} wall.")
            if move == self.decoy[self.room]:
                self.room = 0
            return self._describe(lead), 0.0, False, truncated, {}
        self.room += 1
        reward = 0.0
        if self.room > self.best:
            reward, self.best = 0.2 * (self.room - self.best), self.room
        if self.room == 5:  # as published: the final step's reward is the episode's return
            return "Daylight: you found the exit.", 1.0, True, False, {}
        return self._describe(f"You walk {move}."), reward, False, truncated, {}

    def solution(self):
        return " ".join(f"\\boxed{{{m}}}" for m in self.right)
