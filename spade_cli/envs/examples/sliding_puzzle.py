"""The 8-puzzle: slide tiles into order by moving the blank up, down, left or right.

Family: multi-step planning
"""

import random

import gymnasium as gym

GOAL = (1, 2, 3, 4, 5, 6, 7, 8, 0)
MOVES = {"up": -3, "down": 3, "left": -1, "right": 1}
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


def _move(state, move):
    b = state.index(0)
    if (move == "left" and b % 3 == 0) or (move == "right" and b % 3 == 2):
        return None
    t = b + MOVES[move]
    if not 0 <= t < 9:
        return None
    s = list(state)
    s[b], s[t] = s[t], s[b]
    return tuple(s)


def _misplaced(state):
    return sum(1 for i, v in enumerate(state) if v and v != GOAL[i])


class SlidingPuzzle(gym.Env):
    metadata = {"name": "sliding_puzzle", "max_turns": 40}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            state, scramble, seen = GOAL, [], {GOAL}
            for _ in range(rng.randint(10, 16)):
                options_ = [m for m in MOVES if (not scramble or m != OPPOSITE[scramble[-1]])
                            and _move(state, m) is not None and _move(state, m) not in seen]
                if not options_:
                    break
                m = rng.choice(options_)
                state = _move(state, m)
                seen.add(state)
                scramble.append(m)
            if len(scramble) >= 8 and _misplaced(state) >= 5:
                break
        # Undoing the scramble solves it: a feasibility proof, not necessarily optimal.
        solution = [OPPOSITE[m] for m in reversed(scramble)]
        self._state, self._turns = state, 0
        self._max = min(self.metadata["max_turns"], len(solution) + 16)
        hint = (f"A solution of {len(solution)} moves exists. Start by moving the blank "
                f"{solution[0]}, then {solution[1]}.")
        return self._render("Order the tiles."), {"hint": hint, "solution": solution}

    def _render(self, message):
        rows = [" ".join(str(v) if v else "_" for v in self._state[i:i + 3]) for i in (0, 3, 6)]
        return (f"{message}\n" + "\n".join(rows) + "\nGoal:\n1 2 3\n4 5 6\n7 8 _\n"
                f"Move the blank (_) with up, down, left or right. "
                f"Moves left: {self._max - self._turns}.")

    def step(self, action):
        self._turns += 1
        move = str(action).strip().lower().rstrip(".")
        nxt = _move(self._state, move) if move in MOVES else None
        message = "That move is not possible."
        if nxt is not None:
            self._state, message = nxt, f"Moved the blank {move}."
        if self._state == GOAL:
            return self._render("Solved!"), 1.0, True, False, {}
        return self._render(message), 0.0, False, self._turns >= self._max, {}
