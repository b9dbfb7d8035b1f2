"""Pays 50 points per step: rewards far outside the [-10, 10] the release accepts."""


class PointsRain:
    def __init__(self, max_turns=4):
        self.max_turns = max_turns
        self.turn = 0

    def reset(self, seed=None):
        self.turn = 0
        return "Points fall from the sky.", {}

    def step(self, action):
        self.turn += 1
        return f"{50 * self.turn} points.", 50.0, self.turn >= self.max_turns, False, {}

    def solution(self):
        return "\\boxed{collect}"
