"""Walk a dark corridor of rooms to the exit; each room tells only which doors it has."""

import random
import re

MOVES = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}


class DarkCorridor:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.pos = (0, 0)
        self.exit = (0, 0)
        self.path = []
        self.turn = 0
        self.best = 0

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.pos, self.path = (0, 0), []
        x, y = 0, 0
        for _ in range(4):
            move = rng.choice(["east", "south"])
            self.path.append(move)
            dx, dy = MOVES[move]
            x, y = x + dx, y + dy
        self.exit = (x, y)
        self.turn = 0
        self.best = 0
        return self._room("You stand in the first dark room."), {}

    def _doors(self):
        i = self._index()
        return [self.path[i]] if i is not None and i < len(self.path) else []

    def _index(self):
        x, y = 0, 0
        for i, move in enumerate(self.path):
            if (x, y) == self.pos:
                return i
            dx, dy = MOVES[move]
            x, y = x + dx, y + dy
        return len(self.path) if (x, y) == self.pos else None

    def _room(self, lead):
        doors = self._doors()
        return f"{lead} Doors: {', '.join(doors) or 'none'}. Move with \\boxed{{north|south|east|west}}."

    def step(self, action):
        self.turn += 1
        truncated = self.turn >= self.max_turns
        m = re.findall(r"\\boxed\{\s*(\w+)\s*\}", action or "")
        move = m[-1].lower() if m else ""
        if move not in MOVES:
            return self._room("Nothing happens."), 0.0, False, truncated, {}
        if move not in self._doors():
            return self._room(f"You bump into the {move} wall."), 0.0, False, truncated, {}
        dx, dy = MOVES[move]
        self.pos = (self.pos[0] + dx, self.pos[1] + dy)
        i = self._index()
        reward = 0.0
        if i is not None and i > self.best:  # partial progress: 0.25 per room never reached before
            reward, self.best = 0.25 * (i - self.best), i
        if self.pos == self.exit:
            return "Daylight: you found the exit.", reward, True, False, {}
        return self._room(f"You walk {move}."), reward, False, truncated, {}

    def solution(self):
        return " ".join(f"\\boxed{{{m}}}" for m in self.path)
