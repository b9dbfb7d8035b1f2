"""Stages of switches where a hidden rule says which one to press, level 6 of 6.

Family: Logical Deduction
"""

from spade_micro import SwitchEnv


class SwitchLevel6(SwitchEnv):
    level = 6
