"""Does a design exercise the skill it was asked for? A static check, for worlds whose
environments are subclasses of one family per skill (the micro world).

The designer is prompted with a target skill, and its reward is centred on that skill's
mean. In a world of families that differ in how much the hint helps, a designer can earn
more by writing another skill's family than by writing its own well: its designs then
drift to the family that pays best, and the agent trains on one skill (docs/evidence.md).
The published validity check does not look at the skill; `validate.skill = "micro"`
(spade-validate --skill micro) rejects such a design as `off_skill`.

The check reads the code's syntax tree on the host and executes nothing: the family
classes a design names (imported, subclassed or referenced as an attribute) must be
exactly its skill's family. A design that names no family (a class of its own, or one
fetched by a computed name) is off skill too: nothing shows which skill it exercises.
It holds a designer that drifts, not one that hides: a computed name beside the target
family's name passes, as it would the published check.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from .. import pyparse
from .shared_checks import Rejected


def named_families(code: str, families: Mapping[str, str]) -> set[str]:
    """The family class names (the values of `families`) that `code` names anywhere."""
    names = set(families.values())
    found: set[str] = set()
    for node in ast.walk(pyparse.parse(code)):
        if isinstance(node, ast.Name) and node.id in names:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found.update(a.name for a in node.names if a.name in names)
    return found


def check_on_skill(code: str, skill: str | None, families: Mapping[str, str]) -> None:
    """`off_skill` unless the only family `code` names is the one of `skill`
    (`families`: skill name -> family class name). A record without a target skill, or
    with one the world has no family for, is not judged."""
    want = families.get(skill or "")
    if want is None:
        return
    found = named_families(code, families)
    if found != {want}:
        named = ", ".join(sorted(found)) or "no family"
        raise Rejected("off_skill", f"the target skill {skill} is {want}'s; the code names {named}")
