"""A dark corridor with a door on a hidden side, level 5 of 6.

Family: Spatial Reasoning
"""

from spade_micro import CorridorEnv


class CorridorLevel5(CorridorEnv):
    level = 5
