import gymnasium as gym
import numpy as np


class Nim(gym.Env):
    """Single-heap Nim against a greedy opponent: take 1-3 stones, last stone wins."""

    metadata = {"name": "nim-single-heap", "max_turns": 20}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.rs = np.random.default_rng(seed)
        self.heap = int(self.rs.integers(9, 30))
        if self.heap % 4 == 0:
            self.heap += 1
        self.done = False
        moves, heap = [], self.heap
        while heap > 0:
            take = heap % 4 or 1
            moves.append(f"take {take}")
            heap -= take
            if heap > 0:
                heap -= min(heap, 1 + (heap % 3))
        obs = f"There are {self.heap} stones. Take 1, 2 or 3 with 'take N'."
        return obs, {"hint": "Always leave a multiple of four stones.", "solution": moves}

    def _opponent(self):
        return min(self.heap, 1 + (self.heap % 3))

    def step(self, action):
        parts = action.strip().lower().split()
        if len(parts) != 2 or parts[0] != "take" or parts[1] not in {"1", "2", "3"}:
            return "Invalid move. Use 'take N' with N in 1..3.", 0.0, True, False, {}
        n = int(parts[1])
        if n > self.heap:
            return "Not enough stones.", 0.0, True, False, {}
        self.heap -= n
        if self.heap == 0:
            return "You took the last stone. You win!", 1.0, True, False, {}
        reply = self._opponent()
        self.heap -= reply
        if self.heap == 0:
            return f"Opponent takes {reply} and wins.", 0.0, True, False, {}
        return f"Opponent takes {reply}. {self.heap} stones left.", 0.0, False, False, {}
