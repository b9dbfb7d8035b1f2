"""Stages of switches where a hidden rule says which one to press, level 4 of 6.

Family: Logical Deduction
"""

import spade_micro


class SwitchLevel4(spade_micro.SwitchEnv):
    level = 4
