"""Weight syncs into the inference engines: broadcast lines (``update_weights``,
``update_named_weights``; the first one kept, and every dated one up to MAX_WEIGHT_UPDATE_LINES:
the syncs that delimit the policy versions the coherence of agent output is judged per), weight
reloads started and finished."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, settled

MAX_WEIGHT_UPDATE_LINES = 20000
"""Dated weight-broadcast lines kept (the first ones, in file order): a run logs one per engine per step."""


class Weights(Extractor):
    keys = frozenset({"x_weight_reload", "x_weight_update", "x_weight_reload_done"})

    def __init__(self) -> None:
        self.reload = 0
        self.updates = 0
        self.update_first = None
        self.update_lines: list[tuple[float, str, int, str]] = []
        self.reload_finished = 0

    def feed(self, hit, keys, occ) -> None:
        if "x_weight_reload" in keys:
            self.reload += 1
        if "x_weight_update" in keys:
            self.updates += 1
            if self.update_first is None:
                self.update_first = occ
            if occ.ts is not None and len(self.update_lines) < MAX_WEIGHT_UPDATE_LINES:
                self.update_lines.append((occ.ts, occ.source, occ.line, occ.text))
        if "x_weight_reload_done" in keys:
            self.reload_finished += 1

    def merge(self, later: Weights) -> None:
        self.reload += later.reload
        self.updates += later.updates
        self.reload_finished += later.reload_finished
        if self.update_first is None:
            self.update_first = later.update_first
        room = MAX_WEIGHT_UPDATE_LINES - len(self.update_lines)
        if room > 0:
            self.update_lines.extend(later.update_lines[:room])

    def result(self, read) -> None:
        read.weight_reload = self.reload
        read.weight_updates = self.updates
        read.weight_update_first = settled(self.update_first)
        read.weight_update_lines = self.update_lines
        read.weight_reload_finished = self.reload_finished
