"""A dark corridor with a door on a hidden side, level 5 of 6.

Family: Spatial Reasoning
"""

import spade_micro


class CorridorLevel5(spade_micro.CorridorEnv):
    level = 5
