"""The comparison the run-against-run tests rest on (helpers.mismatch)."""

from __future__ import annotations

from .helpers import mismatch


def test_records_agree_to_a_thousandth_in_floats_and_exactly_elsewhere():
    a = [{"id": "c1", "turns": [{"action": "left", "logprobs": [-8.36315, -0.5]}], "n": 2}]
    assert (
        mismatch(a, [{**a[0], "turns": [{"action": "left", "logprobs": [-8.3632, -0.5]}]}]) is None
    )
    other = [{**a[0], "turns": [{"action": "right", "logprobs": [-8.36315, -0.5]}]}]
    assert mismatch(a, other) == "[0].turns[0].action: 'left' != 'right'"
    assert mismatch(a, [{**a[0], "turns": [{"action": "left", "logprobs": [-8.4, -0.5]}]}])
    assert mismatch(a, [{**a[0], "n": 3}]) == "[0].n: 2 != 3"
    assert mismatch(a, [{"id": "c1"}]).startswith("[0]: keys")
    assert mismatch([("a", 0.5)], [("a", 0.5004)]) is None
    assert mismatch([("a", 0.5)], [("a", None)]) == "[0][1]: 0.5 != None"
    assert mismatch(a, a + a) == ": 1 items != 2"
