"""Stages of switches where a hidden rule says which one to press, level 5 of 6.

Family: Logical Deduction
"""

from spade_micro import SwitchEnv


class SwitchLevel5(SwitchEnv):
    level = 5
