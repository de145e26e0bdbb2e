"""Attempt boundaries: the Iris setup lines of a finelog where a new attempt of the job starts
(the routing numbers a finelog's attempts by them)."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, settled


class Boundaries(Extractor):
    keys = frozenset({"x_boundary"})
    early = True

    def __init__(self) -> None:
        self.found: list = []

    def feed(self, hit, keys, occ) -> None:
        if self.file.is_finelog:
            self.found.append(occ)

    def merge(self, later: Boundaries) -> None:
        self.found.extend(later.found)

    def result(self, read) -> None:
        read.attempt_boundaries = [settled(o) for o in self.found]
