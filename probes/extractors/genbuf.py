"""The generation buffer ("Generation Buffer Progress: N/M"): its newest value, the line where it
last changed, and the newest line that showed it."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, FileInfo, settled
from rlhealth.probes.parse import trainer as tp


class GenerationBuffer(Extractor):
    keys = frozenset({"x_genbuf"})

    def __init__(self) -> None:
        self.last: tuple[int, int] | None = None
        self.last_change = None
        self.last_seen = None
        self.first: tuple | None = None
        """The part's first parsed value with its line (what merging it after others needs)."""

    def begin(self, file: FileInfo) -> None:
        super().begin(file)
        self.first = None

    def feed(self, hit, keys, occ) -> None:
        gb = tp.parse_gen_buffer(hit.text)
        if gb is not None:
            if self.first is None:
                self.first = (gb, occ)
            if gb != self.last:
                self.last = gb
                self.last_change = occ
            self.last_seen = occ

    def merge(self, later: GenerationBuffer) -> None:
        if later.last_seen is not None:
            first_value, first_occ = later.first
            if not (later.last_change is first_occ and first_value == self.last):
                self.last_change = later.last_change
            self.last = later.last
            self.last_seen = later.last_seen
            if self.first is None:
                self.first = later.first

    def result(self, read) -> None:
        read.genbuf_last = self.last
        read.genbuf_last_change = settled(self.last_change)
        read.genbuf_last_seen = settled(self.last_seen)
