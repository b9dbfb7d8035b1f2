"""A Nim game (copied from the library with only cosmetic changes)."""

import random
import re
from functools import reduce

import gymnasium as gym


def _winning_move(piles):
    x = reduce(lambda a, b: a ^ b,
               piles, 0)   # nim-sum
    if x == 0:
        return None
    for i, p in enumerate(piles):
        if p ^ x < p:
            return i, p - (p ^ x)
    return None


def _opponent(piles):
    move = _winning_move(piles)
    if move is None:  # a lost position: stall with one object from the biggest pile
        i = max(range(len(piles)), key=lambda i: (piles[i], -i))
        move = (i, 1)
    return move


class Nim(gym.Env):
    metadata = {'name': 'nim', 'max_turns': 30}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            piles = [rng.randint(1, 9) for _ in range(rng.randint(3, 4))]
            if _winning_move(piles) is not None:
                break
        self._piles, self._turns = piles, 0
        sim, solution = list(piles), []
        while sum(sim):
            i, k = _winning_move(sim)
            solution.append(f'take {k} from pile {i + 1}')
            sim[i] -= k
            if sum(sim):
                j, m = _opponent(sim)
                sim[j] -= m
        hint = (f'Write the pile sizes in binary and XOR them: after each of your moves the '
                f'XOR of all piles must be 0. Right now it is {reduce(lambda a, b: a ^ b, piles)}.')
        return self._render('You move first.'), {'hint': hint, 'solution': solution}

    def _render(self, message):
        piles = '  '.join(f'pile {i + 1}: {p}' for i, p in enumerate(self._piles))
        return (f'{message}\n{piles}\nOn your turn take one or more objects from a single pile; '
                f"whoever takes the last object wins. Reply 'take K from pile P'.")

    def step(self, action):
        self._turns += 1
        truncated = self._turns >= self.metadata['max_turns']
        m = re.search(r'take\s+(\d+)\s+from\s+pile\s+(\d+)', str(action).lower())
        if not m:
            return self._render('Invalid move format.'), 0.0, False, truncated, {}
        k, i = int(m.group(1)), int(m.group(2)) - 1
        if not (0 <= i < len(self._piles)) or not 1 <= k <= self._piles[i]:
            return self._render('Illegal move.'), 0.0, False, truncated, {}
        self._piles[i] -= k
        if sum(self._piles) == 0:
            return self._render('You took the last object. You win!'), 1.0, True, False, {}
        j, m_ = _opponent(self._piles)
        self._piles[j] -= m_
        if sum(self._piles) == 0:
            return self._render(f'Opponent took {m_} from pile {j + 1}, the last object. '
                                f'You lose.'), 0.0, True, False, {}
        return self._render(f'Opponent took {m_} from pile {j + 1}.'), 0.0, False, truncated, {}
