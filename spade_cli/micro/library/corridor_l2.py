"""A dark corridor with a door on a hidden side, level 2 of 6.

Family: Spatial Reasoning
"""

from spade_micro import CorridorEnv


class CorridorLevel2(CorridorEnv):
    level = 2
