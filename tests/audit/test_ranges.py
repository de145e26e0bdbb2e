"""``rlhealth.audit.ranges``: the gaps of a run of integers without enumerating it."""
from __future__ import annotations

import random

from rlhealth.audit.ranges import gaps, is_full_range


def _naive(present, lo, hi, limit):
    missing = [s for s in range(lo, hi + 1) if s not in present]
    return len(missing), missing[:limit]


def test_gaps_equal_the_enumeration():
    rng = random.Random(0)
    for _ in range(2000):
        lo = rng.randint(-5, 20)
        hi = lo + rng.randint(-3, 60)
        present = {rng.randint(lo - 5, hi + 5) for _ in range(rng.randint(0, 40))}
        limit = rng.randint(0, 10)
        assert gaps(present, lo, hi, limit) == _naive(present, lo, hi, limit)


def test_gaps_of_a_huge_run_are_counted_not_enumerated():
    hi = 10 ** 40
    count, first = gaps({1, 2, 5, hi}, 1, hi, 3)
    assert count == hi - 4 and first == [3, 4, 6]
    assert gaps({"x", True, 2}, 1, 3, 5) == (2, [1, 3])      # garbled members are not steps


def test_is_full_range():
    assert is_full_range({0, 1, 2}, 3) and not is_full_range({0, 1, 3}, 3) and not is_full_range({0, 1}, 3)
    assert is_full_range(set(), 0) and not is_full_range({0}, 10 ** 30)
