"""Does a hint give the solution away? A pure text check, for designer-written and
model-written hints alike.

    hint_leak(hint, solution, observation="") -> str | None   # the reason, or None

A hint may help; it may not contain the answer. Both texts are normalised first (NFKC,
so full-width digits are digits; case folded; number words written as digits:
"four seven" -> "47", "forty-two" -> "42"; every separator removed, so "4-7-2-1" and
"4 7 2 1" are "4721"), and the solution (its actions joined) is looked for in:

- the hint itself, and the hint read backwards (a reversed answer);
- the hint under rot13, and every base64 or hex token of the hint decoded;
- the first letters of the hint's words, and of its sentences (acrostics);
- the digits of the hint in order (an answer split across sentences: "47 ... then 21");
- the values of the sums, differences and products written in the hint ("4700 + 21");
- the hint's words: the solution's tokens all appearing in order across the hint.

Solutions shorter than two characters after normalisation are not judged textually (a
hint containing "a" or "7" proves nothing). A solution padded with words so that the
bare code in the hint is not "the whole solution" is caught by its codes: for a
one-action solution (an answer), every whitespace-separated piece of an action that holds a digit (a number, "b7", a date), two
or more characters long and not already in the observation, must not appear in the hint
in any of the forms above.

What no text check can find, and is left to the regret estimate and to review: a hint
that describes the answer rather than spelling it ("the capital of France"), that encodes
it in a scheme not listed here (a custom cipher, an index into the observation, a
riddle), that leaks it by arithmetic the hint leaves undone ("the square of 69"), or
that is honest while the environment pays an answer only the hint can lead to.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUE = {w: i for i, w in enumerate(_UNITS)} | {w: 10 * i for i, w in enumerate(_TENS) if w}
_NUMBER_WORDS = re.compile(
    r"\b(?:("
    + "|".join(w for w in _TENS if w)
    + r")[\s-]*("
    + "|".join(_UNITS[1:10])
    + r")?|("
    + "|".join(sorted(_UNITS, key=len, reverse=True))
    + r"))\b"
)
_ARITH = re.compile(r"\d+(?:\s*[-+*x×]\s*\d+)+")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{6,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}){3,}\b")
MIN_LENGTH = 2


def _digits_for_words(text: str) -> str:
    def value(m: re.Match) -> str:
        if m.group(3):
            return str(_WORD_VALUE[m.group(3)])
        return str(_WORD_VALUE[m.group(1)] + (_WORD_VALUE[m.group(2)] if m.group(2) else 0))

    return _NUMBER_WORDS.sub(value, text)


def words(text: str) -> list[str]:
    """The text's tokens after NFKC, case folding and number words as digits."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.findall(r"[^\W_]+", _digits_for_words(text))


def squash(text: str) -> str:
    """Every separator removed: "Four-7 2, ONE" -> "4721"."""
    return "".join(words(text))


def _decoded(hint: str) -> list[str]:
    out = []
    for tok in _B64.findall(hint):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(tok + "=" * (-len(tok) % 4))
                out.append(raw.decode("utf-8"))
            except (binascii.Error, ValueError, UnicodeDecodeError):
                continue
    for tok in _HEX.findall(hint):
        try:
            out.append(bytes.fromhex(tok).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
    return out


def _sums(hint: str) -> list[str]:
    out = []
    for expr in _ARITH.findall(unicodedata.normalize("NFKC", hint)):
        terms = re.split(r"\s*([-+*x×])\s*", expr)
        if len(terms) > 41:
            continue
        # Products first, then sums and differences, on small integers only.
        nums, ops = [int(t) for t in terms[::2] if len(t) <= 12], terms[1::2]
        if len(nums) != len(ops) + 1:
            continue
        stack = [nums[0]]
        pending = []
        for op, n in zip(ops, nums[1:], strict=True):
            if op in "*x×":
                stack[-1] *= n
            else:
                pending.append(op)
                stack.append(n)
        total = stack[0]
        for op, n in zip(pending, stack[1:], strict=True):
            total = total + n if op == "+" else total - n
        out.append(str(total))
    return out


def _aligned(needle: str, toks: list[str]) -> bool:
    """`needle` is the concatenation of consecutive tokens: separators may split it, but
    it may not start or end inside a word ("at" is not in "what")."""
    for i in range(len(toks)):
        run = ""
        for t in toks[i:]:
            run += t
            if len(run) >= len(needle):
                if run == needle:
                    return True
                break
            if not needle.startswith(run):
                break
    return False


def _views(hint: str) -> tuple[list[tuple[str, list[str], int]]]:
    """(how, tokens, shortest solution judged) for every form of the hint the solution
    is looked for in. Token-free streams (initials, digits) only judge longer solutions:
    short strings turn up in them by chance."""
    text = unicodedata.normalize("NFKC", hint)
    toks = words(text)
    sentences = [s for s in re.split(r"[.!?;\n]+", text) if s.strip()]
    views = [
        ("the hint", toks, MIN_LENGTH),
        ("the hint reversed", [t[::-1] for t in reversed(toks)], 3),
        ("the hint in rot13", words(codecs.encode(text, "rot13")), MIN_LENGTH),
        ("the first letters of the hint's words", list("".join(t[0] for t in toks)), 4),
        (
            "the first letters of the hint's sentences",
            list("".join(w[0] for s in sentences if (w := words(s)))),
            4,
        ),
        ("the digits of the hint", re.findall(r"\d", "".join(toks)), 4),
    ]
    views += [("a base64 or hex token of the hint", words(d), MIN_LENGTH) for d in _decoded(text)]
    views += [("a sum written in the hint", [s], MIN_LENGTH) for s in _sums(hint)]
    return views


def _found(needle: str, views) -> str | None:
    for how, toks, shortest in views:
        if len(needle) >= shortest and _aligned(needle, toks):
            return how
    return None


def _codes(solution: list[str], observation: str) -> list[str]:
    """The solution's codes: its whitespace-separated pieces holding a digit ("4721",
    "b7", "2009-03-15" as "20090315"), two or more characters long, not given in the
    observation."""
    given = set(words(observation))
    pieces = (squash(p) for action in solution for p in action.split())
    return [
        c
        for c in dict.fromkeys(pieces)
        if len(c) >= MIN_LENGTH
        and c not in given
        and any(ch.isdigit() for ch in c)
        and (c.isdigit() or any(ch.isalpha() for ch in c))
    ]


def _in_order(needles: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(n == h for h in it) for n in needles)


def hint_leak(hint: str, solution: list[str], observation: str = "") -> str | None:
    """Why `hint` gives `solution` away, or None when no check here finds it.
    `observation` (the episode's first observation) says which codes are given anyway."""
    whole = squash(" ".join(solution))
    views = _views(hint)
    if len(whole) >= MIN_LENGTH and (how := _found(whole, views)):
        return f"{how} contains the whole solution"
    sol_words = words(" ".join(solution))
    if len(sol_words) >= 2 and len(whole) >= MIN_LENGTH and _in_order(sol_words, words(hint)):
        return "the solution's words all appear in order across the hint"
    # Codes of a one-action answer only: in a multi-step solution the hint may name an
    # entity of one step (a date, an id) and that is what a hint is for.
    for code in _codes(solution, observation) if len(solution) == 1 else ():
        if code != whole and (how := _found(code, views)):
            return f"{how} contains {code!r} from the solution"
    return None
