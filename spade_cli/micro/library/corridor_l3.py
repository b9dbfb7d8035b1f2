"""A dark corridor with a door on a hidden side, level 3 of 6.

Family: Spatial Reasoning
"""

import spade_micro


class CorridorLevel3(spade_micro.CorridorEnv):
    level = 3
