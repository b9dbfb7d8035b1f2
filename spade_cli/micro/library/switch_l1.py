"""Stages of switches where a hidden rule says which one to press, level 1 of 6.

Family: Logical Deduction
"""

from spade_micro import SwitchEnv


class SwitchLevel1(SwitchEnv):
    level = 1
