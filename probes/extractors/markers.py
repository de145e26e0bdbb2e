"""One-off marker lines, the first of each: the trainer's generator initialised
(``x_generator_init``) and the source revision it runs (``x_source_rev``)."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, settled

MARKERS = {"x_generator_init": "generator_init", "x_source_rev": "source_rev"}
"""Pattern key -> the ``BundleRead`` field holding its first line."""


class Markers(Extractor):
    keys = frozenset(MARKERS)

    def __init__(self) -> None:
        self.first: dict[str, object] = {}

    def feed(self, hit, keys, occ) -> None:
        for key in MARKERS:
            if key in keys and key not in self.first:
                self.first[key] = occ

    def merge(self, later: Markers) -> None:
        for key, occ in later.first.items():
            self.first.setdefault(key, occ)

    def result(self, read) -> None:
        for key, name in MARKERS.items():
            setattr(read, name, settled(self.first.get(key)))
