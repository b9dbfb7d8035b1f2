"""Cutting a long document down to a window the designer prompt can hold.

The rule (docs/commands/spade-sample-docs.md): a document of at most W characters is kept whole.
A longer one gets a window of at most W characters:

1. a nominal start s is drawn uniformly from [0, total - W] with the document's own
   random stream (seed, document id), so the same document always gets the same window
   under one seed, wherever and in whichever job it is found (`--excerpt-at start`
   fixes s = 0 instead);
2. the start moves back to the nearest paragraph start (after a blank line) within W/4
   characters before s, else to the nearest line start there, else forward to the next
   word start within W/4;
3. the end is start + W (at most the document's end), moved back to the last line end
   within its last W/4 characters, else to the last whitespace there.

So an excerpt is between W/2 and W characters, starts at a paragraph, line or word
boundary and ends at a line or word boundary whenever the text has one nearby.
Offsets are Python string indices (code points) into the full text.
"""

from __future__ import annotations

import random
import re

_SPACE = re.compile(r"\s")


def excerpt_window(
    text: str, width: int, rng: random.Random, at: str = "random"
) -> tuple[int, int]:
    """(start, end) of the excerpt of `text`; (0, len(text)) when it fits."""
    total = len(text)
    if width <= 0 or total <= width:
        return 0, total
    slack = max(1, width // 4)
    s = 0 if at == "start" else rng.randrange(total - width + 1)
    start = s
    if s > 0:
        lo = max(0, s - slack)
        p = text.rfind("\n\n", lo, s + 1)
        if p >= 0:
            start = p + 2
        else:
            p = text.rfind("\n", lo, s + 1)
            if p >= 0:
                start = p + 1
            elif m := _SPACE.search(text, s, min(total, s + slack)):
                start = m.end()
    end = min(total, start + width)
    if end < total:
        p = text.rfind("\n", end - slack, end)
        if p > start:
            end = p
        else:
            spaces = [m.start() for m in _SPACE.finditer(text, end - slack, end)]
            if spaces and spaces[-1] > start:
                end = spaces[-1]
    return start, end
