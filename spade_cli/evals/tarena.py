"""textarena: text games played turn by turn, scored by the game's own reward.

textarena 0.7.4 registers over 700 game variants. The ones offered here are single-player
games that need no downloaded data (the word games read NLTK corpora, which would need a
download) and whose opponent is the game itself; textarena ships no scripted opponents
for its two-player games (its agents are clients of hosted LLM APIs), so a two-player game
would measure the opponent model as much as ours and is left out.

Each game runs unwrapped (`<id>-raw`): the agent sees the game's prompt and board as the
first user message and, after each move, only the new game messages (its own move is
not echoed back). The game's final reward (textarena gives 1 for a win and a completion
fraction otherwise) is the return, clipped to [0, 1]; success means a win.

textarena seeds Python's global `random` in `reset` and draws from it during play, so
each environment here keeps its own copy of the random state and swaps it in around
every call: episodes played side by side stay reproducible.

The oracle reads the game's hidden state (the secret number or code, the full Sudoku
grid, the lake map) and plays a winning line.
"""

from __future__ import annotations

import random
from collections import deque

from ..errors import UsageError
from ..records import seed_for
from .base import Task, clip01, require

SUITE = "textarena"


def _hanoi(n: int, src: str = "A", dst: str = "C", via: str = "B") -> list[str]:
    if n == 0:
        return []
    return _hanoi(n - 1, src, via, dst) + [f"[{src} {dst}]"] + _hanoi(n - 1, via, dst, src)


def _frozen_lake(game) -> list[str]:
    gs = game.state.game_state
    grid, start, goal = gs["grid"], tuple(gs["player_pos"]), tuple(gs["goal_pos"])
    n = len(grid)
    moves = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    prev = {start: None}
    todo = deque([start])
    while todo:
        cur = todo.popleft()
        if cur == goal:
            break
        for name, (dr, dc) in moves.items():
            nxt = (cur[0] + dr, cur[1] + dc)
            if (
                0 <= nxt[0] < n
                and 0 <= nxt[1] < n
                and nxt not in prev
                and grid[nxt[0]][nxt[1]] != "H"
            ):
                prev[nxt] = (cur, name)
                todo.append(nxt)
    path, cur = [], goal
    while prev.get(cur):
        cur, name = prev[cur]
        path.append(f"[{name}]")
    return path[::-1]


def _sudoku(game) -> list[str]:
    board = game.state.game_state["board"]
    return [
        f"[{r + 1} {c + 1} {game.full_grid[r][c]}]"
        for r in range(9)
        for c in range(9)
        if board[r][c] == 0
    ]


# game id -> oracle(game) reading its hidden state
GAMES = {
    "GuessTheNumber-v0": lambda g: [f"[{g.state.game_state['game_number']}]"],
    "Mastermind-v0": lambda g: ["[" + " ".join(map(str, g.state.game_state["secret_code"])) + "]"],
    "TowerOfHanoi-v0": lambda g: _hanoi(g.num_disks),
    "FrozenLake-v0-random": _frozen_lake,
    "Sudoku-v0-very-easy": _sudoku,
}
DEFAULT_GAMES = tuple(GAMES)


class TextArenaEnv:
    """One single-player textarena game as a contract environment."""

    threadsafe = False  # the game's randomness is process-global (swapped per call)

    def __init__(self, game_id: str):
        import textarena as ta

        self.game_id = game_id
        self.game = ta.make(f"{game_id}-raw")
        max_turns = getattr(self.game, "max_turns", None) or 100
        self.metadata = {"name": f"textarena/{game_id}", "max_turns": int(max_turns)}
        self._rng_state = None

    def _call(self, fn, *args, **kw):
        saved = random.getstate()
        if self._rng_state is not None:
            random.setstate(self._rng_state)
        try:
            return fn(*args, **kw)
        finally:
            self._rng_state = random.getstate()
            random.setstate(saved)

    def _messages(self) -> str:
        _, messages = self.game.get_observation()
        # Drop the echo of our own move; keep prompt, board and game messages.
        return "\n".join(m[1] for m in messages if m[0] != 0).strip()

    def reset(self, seed=None, options=None):
        self._call(self.game.reset, num_players=1, seed=seed)
        return self._messages(), {"hint": "", "solution": None}

    def step(self, action: str):
        done, _info = self._call(self.game.step, str(action))
        if done:
            rewards, game_info = self.game.close()
            reward = clip01((rewards or {}).get(0, 0.0))
            reason = (game_info or {}).get(0, {}).get("reason", "")
            return str(reason), reward, True, False, {"detail": str(reason)}
        return self._messages(), 0.0, False, False, {}

    def close(self) -> None:
        pass


def tasks(n: int, seed: int, subset: list[str] | None = None) -> list[Task]:
    if n < 1:
        raise UsageError(f"suite {SUITE!r} has no fixed set of items: give -n > 0")
    require("textarena", "textarena", SUITE)
    games = list(subset) if subset else list(DEFAULT_GAMES)
    bad = [g for g in games if g not in GAMES]
    if bad:
        raise UsageError(
            f"unknown or unsupported textarena game {', '.join(bad)} (choose from {', '.join(GAMES)})"
        )
    out = []
    count = {g: 0 for g in games}
    for i in range(n):
        game = games[i % len(games)]
        idx = count[game]
        count[game] += 1
        episode_seed = seed_for(seed, SUITE, f"{game}/{idx}")

        def make_env(game=game):
            return TextArenaEnv(game)

        def oracle(env, obs, info, game=game):
            return GAMES[game](env.game)

        out.append(
            Task(
                SUITE,
                f"{game}/{idx}",
                game,
                make_env,
                seed=episode_seed,
                oracle=oracle,
                meta={"game": game, "episode_seed": episode_seed},
            )
        )
    return out
