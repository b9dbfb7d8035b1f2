"""Stages of switches where a hidden rule says which one to press, level 2 of 6.

Family: Logical Deduction
"""

from spade_micro import SwitchEnv


class SwitchLevel2(SwitchEnv):
    level = 2
