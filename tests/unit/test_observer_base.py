"""Helpers every observer leans on: ``finite`` (the values statistics may use) and ``as_count``
(a count from untrusted JSON)."""
from __future__ import annotations

import math
from array import array

import pytest

from rlhealth.observers.base import as_count, finite


def test_finite_drops_none_nan_and_infinities_only():
    values = [1.0, float("nan"), float("inf"), -math.inf, None, 3, "x", 2.5, True, 0.0]
    assert finite(values) == [1.0, 3, "x", 2.5, True, 0.0]
    assert finite(array("d", [1.0, math.nan, math.inf, -2.0])) == [1.0, -2.0]
    assert finite(iter([None, 4.0])) == [4.0]


@pytest.mark.parametrize("value,expected", [
    (3, 3), (3.9, 3), ("12", 12), (" 7 ", 7), (-2, None), (0, 0),
    (None, None), (True, None), (math.inf, None), (math.nan, None), (1e999, None), ("abc", None), ("1.5", None),
    ("١٢", None), ([], None), ({}, None),
    pytest.param("9" * 300, int("9" * 300), id="300-digits"), pytest.param("9" * 301, None, id="301-digits"),
    pytest.param("9" * 5_000, None, id="5000-digits"), pytest.param(10 ** 400, None, id="10**400"), (1e308, None),
])
def test_as_count(value, expected):
    assert as_count(value, default=None) == expected
    assert as_count(value) == (0 if expected is None else expected)


def test_as_key_makes_garbled_ids_hashable_and_keeps_the_rest():
    from rlhealth.observers.base import as_key

    assert as_key([1, "a"]) == '[1, "a"]' and as_key({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert as_key(3) == 3 and as_key("3") == "3" and as_key(None) is None
    assert len({as_key(v) for v in ([1], [1], {"x": 0}, 1)}) == 3
