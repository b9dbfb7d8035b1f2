"""Stages of switches where a hidden rule says which one to press, level 3 of 6.

Family: Logical Deduction
"""

from spade_micro import SwitchEnv


class SwitchLevel3(SwitchEnv):
    level = 3
