"""A dark corridor with a door on a hidden side, level 6 of 6.

Family: Spatial Reasoning
"""

import spade_micro


class CorridorLevel6(spade_micro.CorridorEnv):
    level = 6
