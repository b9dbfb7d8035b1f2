"""A lock whose code is typed slot by slot, one slot maybe hidden, level 6 of 6.

Family: Pattern Recognition
"""

import spade_micro


class CodeLevel6(spade_micro.CodeEnv):
    level = 6
