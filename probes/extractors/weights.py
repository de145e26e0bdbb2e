"""Weight syncs into the inference engines: broadcast lines (``update_weights``,
``update_named_weights``; the first one kept), weight reloads started and finished."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, settled


class Weights(Extractor):
    keys = frozenset({"x_weight_reload", "x_weight_update", "x_weight_reload_done"})

    def __init__(self) -> None:
        self.reload = 0
        self.updates = 0
        self.update_first = None
        self.reload_finished = 0

    def feed(self, hit, keys, occ) -> None:
        if "x_weight_reload" in keys:
            self.reload += 1
        if "x_weight_update" in keys:
            self.updates += 1
            if self.update_first is None:
                self.update_first = occ
        if "x_weight_reload_done" in keys:
            self.reload_finished += 1

    def merge(self, later: Weights) -> None:
        self.reload += later.reload
        self.updates += later.updates
        self.reload_finished += later.reload_finished
        if self.update_first is None:
            self.update_first = later.update_first

    def result(self, read) -> None:
        read.weight_reload = self.reload
        read.weight_updates = self.updates
        read.weight_update_first = settled(self.update_first)
        read.weight_reload_finished = self.reload_finished
