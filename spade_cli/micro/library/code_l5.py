"""A lock whose code is typed slot by slot, one slot maybe hidden, level 5 of 6.

Family: Pattern Recognition
"""

from spade_micro import CodeEnv


class CodeLevel5(CodeEnv):
    level = 5
