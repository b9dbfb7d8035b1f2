"""Walk through a text maze from @ to G with up/down/left/right moves.

Family: multi-step planning
"""

import random
from collections import deque

import gymnasium as gym

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
ALIASES = {"u": "up", "d": "down", "l": "left", "r": "right", "north": "up", "south": "down",
           "west": "left", "east": "right", "n": "up", "s": "down", "w": "left", "e": "right"}


def _carve(rng, rows, cols):
    """A perfect maze by randomised depth-first search: every two cells have one path."""
    grid = [["#"] * (2 * cols + 1) for _ in range(2 * rows + 1)]
    stack, seen = [(0, 0)], {(0, 0)}
    grid[1][1] = "."
    while stack:
        r, c = stack[-1]
        nbrs = [(r + dr, c + dc) for dr, dc in MOVES.values()
                if 0 <= r + dr < rows and 0 <= c + dc < cols and (r + dr, c + dc) not in seen]
        if not nbrs:
            stack.pop()
            continue
        nr, nc = rng.choice(nbrs)
        grid[r + nr + 1][c + nc + 1] = "."
        grid[2 * nr + 1][2 * nc + 1] = "."
        seen.add((nr, nc))
        stack.append((nr, nc))
    return grid


def _bfs(grid, start):
    prev, queue = {start: None}, deque([start])
    while queue:
        cur = queue.popleft()
        for name, (dr, dc) in MOVES.items():
            nxt = (cur[0] + dr, cur[1] + dc)
            if grid[nxt[0]][nxt[1]] != "#" and nxt not in prev:
                prev[nxt] = (cur, name)
                queue.append(nxt)
    return prev


class GridMaze(gym.Env):
    metadata = {"name": "grid_maze", "max_turns": 60}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        rows, cols = rng.randint(4, 6), rng.randint(4, 6)
        self._grid = _carve(rng, rows, cols)
        self._pos = (1, 1)
        prev = _bfs(self._grid, self._pos)
        cells = [p for p in prev if p[0] % 2 == 1 and p[1] % 2 == 1]
        dist = {}
        for p in cells:
            n, q = 0, p
            while prev[q] is not None:
                q, n = prev[q][0], n + 1
            dist[p] = n
        far = sorted(cells, key=lambda p: (-dist[p], p))[: max(1, len(cells) // 6)]
        self._goal = rng.choice(far)
        path, q = [], self._goal
        while prev[q] is not None:
            q, move = prev[q]
            path.append(move)
        path.reverse()
        self._turns = 0
        self._max = min(self.metadata["max_turns"], len(path) + 12)
        q, k = self._goal, 0
        while prev[q] is not None and k < len(path) // 2:
            q, k = prev[q][0], k + 1
        mid = q
        hint = (f"The shortest route has {len(path)} moves and passes through row {mid[0]}, "
                f"column {mid[1]} (rows and columns count from 0 at the top left).")
        return self._render("Find the exit."), {"hint": hint, "solution": path}

    def _render(self, message):
        rows = []
        for r, line in enumerate(self._grid):
            row = list(line)
            if r == self._goal[0]:
                row[self._goal[1]] = "G"
            if r == self._pos[0]:
                row[self._pos[1]] = "@"
            rows.append("".join(row))
        return (f"{message}\n" + "\n".join(rows) + f"\nYou are @, the exit is G, # is wall. "
                f"Moves left: {self._max - self._turns}. Reply with one of: up, down, left, right.")

    def step(self, action):
        self._turns += 1
        word = str(action).strip().lower().rstrip(".")
        word = ALIASES.get(word, word)
        reward, terminated, message = 0.0, False, "You bump into a wall."
        if word in MOVES:
            dr, dc = MOVES[word]
            nxt = (self._pos[0] + dr, self._pos[1] + dc)
            if self._grid[nxt[0]][nxt[1]] != "#":
                self._pos, message = nxt, f"You move {word}."
        else:
            message = "Unknown move."
        if self._pos == self._goal:
            reward, terminated, message = 1.0, True, "You reached the exit!"
        truncated = not terminated and self._turns >= self._max
        return self._render(message), reward, terminated, truncated, {}
