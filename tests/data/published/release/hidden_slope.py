# ruff: noqa: F821, UP006, UP035 - the release's style: injected names, typing.Tuple
"""A game in the release's game-template form: a hidden line y = m*x + c; ask for points,
then name the slope. Answers are checked with math_verify, so 3/4, 0.75 and \\frac{3}{4}
all count. No solution() (as the release's TradingGameEnv example has none), and `random`
is used without an import: the release's loader injects it."""

import re
from typing import Tuple

from math_verify import parse, verify


def verify_answer(player_answer, solution):
    """String match first, then math equivalence."""
    if str(player_answer).strip() == str(solution).strip():
        return True
    try:
        return verify(parse(str(solution)), parse(player_answer))
    except Exception:
        return False


class HiddenSlopeEnv:
    def __init__(self, max_turns=12, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0
        self.num = 1
        self.den = 2
        self.offset = 0
        self.wrong = 0
        self.reset()

    def reset(self, seed=None) -> Tuple[str, dict]:
        if seed is not None:
            random.seed(seed)
        self.turn_count = 0
        self.wrong = 0
        self.den = random.randint(2, 9)
        self.num = random.choice([n for n in range(1, 3 * self.den) if n % self.den])
        self.offset = random.randint(-5, 5)
        return ("A hidden line y = m*x + c. Ask for a point with \\boxed{at X} (X an integer); "
                "when you know m, answer \\boxed{slope S} with S as a fraction or decimal. "
                "Three wrong answers lose."), {}

    def _y(self, x: int) -> str:
        top = self.num * x + self.offset * self.den
        return f"{top}/{self.den}"

    def step(self, action: str) -> Tuple[str, float, bool, bool, dict]:
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        match = re.search(r"\\boxed\{([^}]*)\}", action)
        if not match:
            return "Use \\boxed{at X} or \\boxed{slope S}.", 0.0, False, truncated, {}
        cmd = match.group(1).strip().lower()
        if cmd.startswith("at "):
            try:
                x = int(cmd[3:])
            except ValueError:
                return "X must be an integer.", 0.0, False, truncated, {}
            return f"At x = {x}, y = {self._y(x)}.", 0.0, False, truncated, {}
        if cmd.startswith("slope "):
            if verify_answer(cmd[6:].strip(), f"{self.num}/{self.den}"):
                return "Correct slope. You win!", 1.0, True, False, {}
            self.wrong += 1
            if self.wrong >= 3:
                return f"Wrong again. The slope was {self.num}/{self.den}.", 0.0, True, False, {}
            return f"Wrong slope ({3 - self.wrong} tries left).", 0.0, False, truncated, {}
        return "Unknown command.", 0.0, False, truncated, {}

    def close(self):
        pass
