"""Stages of switches where a hidden rule says which one to press, level 5 of 6.

Family: Logical Deduction
"""

import spade_micro


class SwitchLevel5(spade_micro.SwitchEnv):
    level = 5
