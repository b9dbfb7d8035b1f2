"""Does a hint give the answer away? `hint_leak(hint, solution)` says why, or None.

Both texts are normalised before comparing: Unicode NFKC, case folded, and every run
of whitespace or separators (punctuation, dashes, underscores) made one space. The
hint leaks when the solution's words appear in it in order and contiguously, or when
whole consecutive words of the hint spell the solution with separators removed (at
least four characters: "a-p-p-l-e", "A P P L E", "move_left" for "move left"). A solution shorter
than two characters is not judged textually (a hint mentioning "a" or "7" proves
nothing).
"""

from __future__ import annotations

import re
import unicodedata

MIN_CHARS = 2
MIN_COMPACT = 4


def normalise(text: str) -> str:
    """NFKC, case folded, separators and whitespace to single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"[^\W_]+", text))


def hint_leak(hint: str, solution: str | list[str]) -> str | None:
    """Why `hint` contains `solution` (an action sequence or its text), or None."""
    sol = normalise(" ".join(solution) if isinstance(solution, list) else solution)
    if len(sol.replace(" ", "")) < MIN_CHARS:
        return None
    text = normalise(hint)
    if re.search(r"(?<!\S)" + re.escape(sol) + r"(?!\S)", text):
        return "the hint contains the solution"
    compact = sol.replace(" ", "")
    if len(compact) >= MIN_COMPACT and _spelled(text.split(), compact):
        return "the hint contains the solution with its separators changed"
    return None


def _spelled(tokens: list[str], compact: str) -> bool:
    """Whether whole consecutive tokens concatenate to `compact` (not part of a word)."""
    for i in range(len(tokens)):
        acc = ""
        for tok in tokens[i:]:
            acc += tok
            if acc == compact:
                return True
            if not compact.startswith(acc):
                break
    return False
