"""A dark corridor with a door on a hidden side, level 4 of 6.

Family: Spatial Reasoning
"""

from spade_micro import CorridorEnv


class CorridorLevel4(CorridorEnv):
    level = 4
