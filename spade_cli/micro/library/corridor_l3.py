"""A dark corridor with a door on a hidden side, level 3 of 6.

Family: Spatial Reasoning
"""

from spade_micro import CorridorEnv


class CorridorLevel3(CorridorEnv):
    level = 3
