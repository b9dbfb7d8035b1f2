"""A dark corridor with a door on a hidden side, level 4 of 6.

Family: Spatial Reasoning
"""

import spade_micro


class CorridorLevel4(spade_micro.CorridorEnv):
    level = 4
