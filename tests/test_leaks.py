"""hint_leak: the solution given away in any of the forms a hint was caught using."""

from __future__ import annotations

import base64
import codecs

import pytest

from spade_cli.envs.leaks import hint_leak

CODE = ["4721"]

LEAKS = [
    ("reversed", "Read this backwards: 1274.", CODE),
    ("base64", "Decode me: " + base64.b64encode(b"4721").decode(), CODE),
    ("rot13", "In rot13: " + codecs.encode("open sesame", "rot13"), ["open sesame"]),
    ("digits spelled out", "It is four seven two one.", CODE),
    ("number words", "Forty-seven, then twenty-one.", CODE),
    ("split across sentences", "It starts with 47. Then comes 21.", CODE),
    ("first letters", "Orange pears eat nuts.", ["open"]),
    ("separators", "Press 4-7-2-1.", CODE),
    ("full-width digits", "The code is ４７２１.", CODE),
    ("a sum", "Compute 4700 + 21.", CODE),
    ("a product and a sum", "It is 4 * 1000 + 721.", CODE),
    ("padded solution", "The code is 4721.", ["enter the code 4721 and press ok"]),
    ("hex", "Bytes: " + b"4721".hex(), CODE),
    ("words in order", "First go north, then east, then south.", ["north", "east", "south"]),
    ("case", "SAY BANANA", ["banana"]),
]


@pytest.mark.parametrize("how,hint,solution", LEAKS, ids=[c[0] for c in LEAKS])
def test_leaks_are_found(how, hint, solution):
    assert hint_leak(hint, solution) is not None


CLEAN = [
    ("a word inside a word", "Think about what comes next.", ["at"]),
    ("a reversed short word", "The key is on the table.", ["no"]),
    ("a different number", "Try dividing by three.", ["21"]),
    (
        "one step of many named",
        "Start by deleting event 17.",
        ['{"name": "delete", "id": 17}', "book"],
    ),
    ("a code the observation gives", "Use 4721 as the base.", ["add 4721 and 5"]),
    ("too short to judge", "Think of a vowel.", ["a"]),
]


@pytest.mark.parametrize("how,hint,solution", CLEAN, ids=[c[0] for c in CLEAN])
def test_honest_hints_pass(how, hint, solution):
    observation = "Add 4721 and 5." if how == "a code the observation gives" else ""
    assert hint_leak(hint, solution, observation) is None
