"""A dark corridor with a door on a hidden side, level 2 of 6.

Family: Spatial Reasoning
"""

import spade_micro


class CorridorLevel2(spade_micro.CorridorEnv):
    level = 2
