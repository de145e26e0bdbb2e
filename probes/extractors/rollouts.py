"""What the trainer logs about its rollouts: batch completion lines (successful, failed and masked
instances), the exception breakdown of failed ones, and whether truncated importance sampling
(``use_tis``) is on."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, settled
from rlhealth.probes.parse import trainer as tp

MAX_BATCH_COMPLETE = 200
"""Batch-completion lines kept (the newest ones)."""


class Rollouts(Extractor):
    keys = frozenset({"x_batch", "x_excbreak", "x_use_tis"})

    def __init__(self) -> None:
        self.batch_complete: list = []
        self.exc_breakdown: dict[str, int] = {}
        self.exc_breakdown_occ = None
        self.use_tis: bool | None = None

    def feed(self, hit, keys, occ) -> None:
        text = hit.text
        if "x_batch" in keys:
            parsed = tp.parse_batch_complete(text)
            if parsed is not None:
                self.batch_complete.append((parsed, occ))
                if len(self.batch_complete) > MAX_BATCH_COMPLETE:
                    self.batch_complete.pop(0)
        if "x_excbreak" in keys:
            parsed = tp.parse_exception_breakdown(text)
            if parsed:
                for name, n in parsed.items():
                    self.exc_breakdown[name] = self.exc_breakdown.get(name, 0) + n
                self.exc_breakdown_occ = occ
        if "x_use_tis" in keys:
            value = tp.parse_use_tis(text)
            if value is not None:
                self.use_tis = value

    def merge(self, later: Rollouts) -> None:
        self.batch_complete.extend(later.batch_complete)
        if len(self.batch_complete) > MAX_BATCH_COMPLETE:
            del self.batch_complete[:len(self.batch_complete) - MAX_BATCH_COMPLETE]
        for name, n in later.exc_breakdown.items():
            self.exc_breakdown[name] = self.exc_breakdown.get(name, 0) + n
        if later.exc_breakdown_occ is not None:
            self.exc_breakdown_occ = later.exc_breakdown_occ
        if later.use_tis is not None:
            self.use_tis = later.use_tis

    def result(self, read) -> None:
        read.batch_complete = [(parsed, settled(o)) for parsed, o in self.batch_complete]
        read.exc_breakdown = self.exc_breakdown
        read.exc_breakdown_occ = settled(self.exc_breakdown_occ)
        read.use_tis = self.use_tis
