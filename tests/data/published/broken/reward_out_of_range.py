"""Pays 5 points per step: returns far outside [0, 1]."""


class PointsRain:
    def __init__(self, max_turns=4):
        self.max_turns = max_turns
        self.turn = 0

    def reset(self, seed=None):
        self.turn = 0
        return "Points fall from the sky.", {}

    def step(self, action):
        self.turn += 1
        return f"{5 * self.turn} points.", 5.0, self.turn >= self.max_turns, False, {}

    def solution(self):
        return "\\boxed{collect}"
