"""Failure-shaped events (``rlhealth.probes.events``) as an extractor: a traceback, a logged
exception, an abort, a fatal signal or exit status read from the lines at and after a line the
``x_event`` trigger matched, kept bounded in an ``EventLog``."""
from __future__ import annotations

from rlhealth.probes import events as events_mod
from rlhealth.probes.events import EventLog
from rlhealth.probes.extract import Extractor, FileInfo, continued_record_ts
from rlhealth.probes.parse.timestamps import line_timestamp
from rlhealth.probes.textio import clean_line

MAX_OPEN_EVENTS = 256
"""Processes (line prefixes) of one file whose newest event span is remembered at once."""


class Events(Extractor):
    keys = frozenset({"x_event"})
    early = True

    def __init__(self) -> None:
        self.log = EventLog()
        self.open_events: dict[str | None, events_mod.LogEvent] = {}
        """The newest event of each process (line prefix) of the current file; that process's
        lines up to its ``last_line`` belong to it (interleaved ranks keep their own tracebacks)."""
        self.open_until = 0
        """No event of ``open_events`` ends after this line (a line after it needs no ``peel``)."""

    def begin(self, file: FileInfo) -> None:
        super().begin(file)
        self.open_events = {}
        self.open_until = 0

    def __getstate__(self):
        return {"log": self.log, "open_events": {}, "open_until": 0}

    def open_event(self, hit) -> events_mod.LogEvent | None:
        """The event whose lines hold ``hit`` (same process), if any."""
        if hit.lineno > self.open_until or not self.open_events:
            return None
        ev = self.open_events.get(events_mod.peel(hit.text).process)
        return ev if ev is not None and ev.first_line <= hit.lineno <= ev.last_line else None

    def feed(self, hit, keys, occ) -> None:
        """Read the event starting at ``hit`` (its traceback from the lines after it)."""
        if self.open_event(hit) is not None:
            return
        head = hit.preceding_bytes(4096).rsplit(b"\n", 2)
        preceding = clean_line(head[-2]) if len(head) >= 2 else None
        file = self.file
        ev = events_mod.event_at(hit.text, hit.lineno, hit.following_lines(events_mod.MAX_TRACEBACK_LINES,
                                                                             events_mod.MAX_TRACEBACK_BYTES),
                                 preceding, file.source)
        if ev is None:
            return
        ts = events_mod.line_time(hit.text, line_timestamp, file.reference) if occ.ts is not None else None
        if ts is None:
            ts = continued_record_ts(hit, file.reference)
        ev.ts, ev.attempt, ev.file_index = ts, occ.attempt, file.index
        if ev.text is hit.text:
            ev.at = hit.at
        if len(self.open_events) >= MAX_OPEN_EVENTS:
            self.open_events.clear()
            self.open_until = 0
        self.open_events[ev.process] = ev
        self.open_until = max(self.open_until, ev.last_line)
        self.log.add(ev)

    def merge(self, later: Events) -> None:
        self.log.merge(later.log)

    def result(self, read) -> None:
        read.events = self.log
