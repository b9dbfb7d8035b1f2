"""Tic-tac-toe against a scripted opponent that wins or blocks when it can; you must win.

Family: games
"""

import random
import re

import gymnasium as gym

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _winner(board):
    for a, b, c in LINES:
        if board[a] != " " and board[a] == board[b] == board[c]:
            return board[a]
    return None


def _opponent(board, prefs):
    free = [i for i in range(9) if board[i] == " "]
    for mark in ("O", "X"):  # win if possible, else block
        for i in free:
            trial = board[:]
            trial[i] = mark
            if _winner(trial) == mark:
                return i
    return next(i for i in prefs if board[i] == " ")


def _search(board, prefs):
    """A sequence of X cells that wins against this opponent, or None."""
    for i in range(9):
        if board[i] != " ":
            continue
        b = board[:]
        b[i] = "X"
        if _winner(b) == "X":
            return [i]
        if " " not in b:
            continue
        b[_opponent(b, prefs)] = "O"
        if _winner(b) == "O" or " " not in b:
            continue
        rest = _search(b, prefs)
        if rest is not None:
            return [i] + rest
    return None


class TicTacToe(gym.Env):
    metadata = {"name": "tic_tac_toe", "max_turns": 8}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            prefs = list(range(9))
            rng.shuffle(prefs)
            board = [" "] * 9
            # The opponent opens in a random cell, so the first move is not always the same.
            board[prefs[0]] = "O"
            path = _search(board, prefs)
            if path is not None:
                break
        self._board, self._prefs, self._turns = board, prefs, 0
        hint = (f"You can force a win: open in cell {path[0] + 1} and aim for a fork, two "
                f"lines that each need one more X.")
        return self._render("The opponent (O) opened."), {
            "hint": hint, "solution": [str(i + 1) for i in path]}

    def _render(self, message):
        cells = [c if c != " " else str(i + 1) for i, c in enumerate(self._board)]
        rows = [" | ".join(cells[r:r + 3]) for r in (0, 3, 6)]
        return (f"{message}\n" + "\n".join(rows) + "\nYou are X. Reply with the number of a "
                "free cell. You must win; a draw is a loss.")

    def step(self, action):
        self._turns += 1
        truncated = self._turns >= self.metadata["max_turns"]
        m = re.search(r"\d", str(action))
        i = int(m.group()) - 1 if m else -1
        if not 0 <= i < 9 or self._board[i] != " ":
            return self._render("That cell is not free."), 0.0, False, truncated, {}
        self._board[i] = "X"
        if _winner(self._board) == "X":
            return self._render("Three in a row: you win!"), 1.0, True, False, {}
        if " " not in self._board:
            return self._render("Draw: no win for you."), 0.0, True, False, {}
        j = _opponent(self._board, self._prefs)
        self._board[j] = "O"
        if _winner(self._board) == "O":
            return self._render(f"O takes {j + 1} and wins."), 0.0, True, False, {}
        if " " not in self._board:
            return self._render("Draw: no win for you."), 0.0, True, False, {}
        return self._render(f"O takes cell {j + 1}."), 0.0, False, truncated, {}
