"""Gaps in a run of integers whose ends come from evidence (steps, world sizes, ranks).

A step or world size is read from file names and log lines, so it can be 10**40: the run
``lo..hi`` is never enumerated, only the values present are walked.
"""
from __future__ import annotations

from typing import Iterable


def gaps(present: Iterable[int], lo: int, hi: int, limit: int) -> tuple[int, list[int]]:
    """(how many integers of ``lo..hi`` inclusive are not in ``present``, the first ``limit`` of
    them in order): ``[s for s in range(lo, hi + 1) if s not in present]``'s length and head."""
    if hi < lo:
        return 0, []
    inside = sorted({s for s in present if isinstance(s, int) and not isinstance(s, bool) and lo <= s <= hi})
    count = (hi - lo + 1) - len(inside)
    first: list[int] = []
    expect = lo
    for s in inside + [hi + 1]:
        while expect < s and len(first) < limit:
            first.append(expect)
            expect += 1
        if len(first) >= limit:
            break
        expect = s + 1
    return count, first


def is_full_range(present: set, size: int) -> bool:
    """``present == set(range(size))`` without building that set."""
    return len(present) == size and all(isinstance(r, int) and 0 <= r < size for r in present)
