"""A lock whose code is typed slot by slot, one slot maybe hidden, level 1 of 6.

Family: Pattern Recognition
"""

from spade_micro import CodeEnv


class CodeLevel1(CodeEnv):
    level = 1
