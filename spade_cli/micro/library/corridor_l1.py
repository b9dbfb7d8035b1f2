"""A dark corridor with a door on a hidden side, level 1 of 6.

Family: Spatial Reasoning
"""

import spade_micro


class CorridorLevel1(spade_micro.CorridorEnv):
    level = 1
