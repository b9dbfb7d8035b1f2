"""A lock whose code is typed slot by slot, one slot maybe hidden, level 1 of 6.

Family: Pattern Recognition
"""

import spade_micro


class CodeLevel1(spade_micro.CodeEnv):
    level = 1
