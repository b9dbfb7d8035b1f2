"""Stages of switches where a hidden rule says which one to press, level 3 of 6.

Family: Logical Deduction
"""

import spade_micro


class SwitchLevel3(spade_micro.SwitchEnv):
    level = 3
