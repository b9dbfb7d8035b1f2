"""A dark corridor with a door on a hidden side, level 6 of 6.

Family: Spatial Reasoning
"""

from spade_micro import CorridorEnv


class CorridorLevel6(CorridorEnv):
    level = 6
