"""A dark corridor with a door on a hidden side, level 1 of 6.

Family: Spatial Reasoning
"""

from spade_micro import CorridorEnv


class CorridorLevel1(CorridorEnv):
    level = 1
