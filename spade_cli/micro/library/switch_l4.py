"""Stages of switches where a hidden rule says which one to press, level 4 of 6.

Family: Logical Deduction
"""

from spade_micro import SwitchEnv


class SwitchLevel4(SwitchEnv):
    level = 4
