"""What the log scan measures: one extractor a measurement, all behind one interface.

An ``Extractor`` reads the matched lines of the pattern keys it claims (``keys``), one file at a
time (``begin`` names the file, ``feed`` gives it a line, ``end`` closes the file), folds a later
part's extractor of the same kind into itself exactly as if that part's lines had been fed after
its own (``merge``; ``mergeable`` says beforehand when the later part alone cannot decide it), and
writes its fields of the ``BundleRead`` (``result``). The extractors of one read are listed in
``rlhealth.probes.extractors``; a new measurement is one module there (and its pattern in
``probes/patterns.py``).

``Extraction`` is the one routing of a file's matched lines to them: it keys a line (prefiltered
patterns checked), reads its time and attempt, and calls the ``feed`` of each extractor that
claims one of its keys. Scanning a bundle is then a plain map (an ``Extraction`` per file part,
in any process) and an in-order fold of ``Extraction.merge``; a part whose merge is undecidable
is routed again, in order, into the fold.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from rlhealth.facts import Occurrence
from rlhealth.probes import scan as scan_mod
from rlhealth.probes.parse.timestamps import line_timestamp
from rlhealth.probes.patterns import EXTRACTOR_PREFILTERS, EXTRACTORS
from rlhealth.probes.scan import LineHit, Scanner, actor_prefix, strip_actor_prefix
from rlhealth.probes.textio import clean_line

if TYPE_CHECKING:
    from rlhealth.probes.bundle import BundleRead
    from rlhealth.probes.extractors.failures import Events

FAST_ROUTING = True
"""Route lines matched by one lane key alone (``Extractor.raw_key``: the stats lines) without a
``LineHit``, and keep the first metric record of a step only (False: every line through
``Extraction.route``, every record kept -- the plain path the equivalence tests compare with)."""


# ----------------------------------------------------------------------------- occurrences
class PendingOccurrence:
    """An occurrence as the routing records it (the fields ``earlier`` and the extractors read);
    the ``Occurrence`` model is built only for the ones an extractor still holds when its result
    is written (``settled``), once per occurrence (shared references stay shared)."""
    __slots__ = ("source", "line", "text", "ts", "attempt", "at", "_model")

    def __init__(self, source: str, line: int, text: str, ts: float | None, attempt: int | None,
                 at: int | None = None):
        self.source, self.line, self.text, self.ts, self.attempt, self.at = source, line, text, ts, attempt, at
        self._model = None

    def model(self) -> Occurrence:
        if self._model is None:
            self._model = Occurrence(source=self.source, line=self.line, text=self.text, ts=self.ts, attempt=self.attempt,
                                     at=self.at)
        return self._model

    def __getstate__(self):
        return (self.source, self.line, self.text, self.ts, self.attempt, self.at)

    def __setstate__(self, state):
        self.source, self.line, self.text, self.ts, self.attempt, self.at = state
        self._model = None


def settled(value):
    """``value`` with a pending occurrence replaced by its ``Occurrence`` (anything else as is)."""
    return value.model() if type(value) is PendingOccurrence else value


# ----------------------------------------------------------------------------- the interface
@dataclass(frozen=True)
class FileInfo:
    """The file an extractor is being fed: its name in the bundle, its place in the scan order,
    its attempt (None: a finelog, numbered at its boundary lines) and the year reference of its
    yearless timestamps."""
    source: str
    index: int
    attempt: int | None
    reference: float | None
    is_finelog: bool = False


class Extractor:
    """One measurement of the matched log lines (see the module docstring)."""

    keys: frozenset[str] = frozenset()
    """The pattern keys whose lines this extractor reads."""
    early = False
    """Fed before the line's occurrence gets the time of the event it continues (the extractors
    that read that event: the failure events and the attempt boundaries)."""
    raw_key: str | None = None
    """A key whose lines, when matched by it alone, come through ``feed_raw`` / ``feed_text``
    (no ``LineHit``) on the fast path."""

    def claims(self, key: str) -> bool:
        return key in self.keys

    def begin(self, file: FileInfo) -> None:
        """The lines fed next are of ``file`` (per-file state starts over)."""
        self.file = file

    def feed(self, hit: LineHit, keys: frozenset[str], occ: PendingOccurrence) -> None:
        """One matched line: its keys, and its occurrence (time and attempt) as the routing read it."""
        raise NotImplementedError

    def feed_raw(self, raw: bytes | bytearray, lineno: int) -> None:
        """A line matched by ``raw_key`` alone, as scanned bytes."""
        raise NotImplementedError

    def feed_text(self, text: str, lineno: int) -> None:
        """A line matched by ``raw_key`` alone, as cleaned text."""
        raise NotImplementedError

    def sink(self, scanner: Scanner, max_line: int):
        """A C sink (``_linescan.StatsSink``) that takes this extractor's ``raw_key`` lines inside
        the scan itself, or None."""
        return None

    def end(self) -> None:
        """The current file is done (also after it failed mid-read)."""

    def mergeable(self, later: Extractor) -> bool:
        """Whether ``merge(later)`` can give the in-order outcome (decided before any merge)."""
        return True

    def merge(self, later: Extractor) -> None:
        """Fold in the same extractor of a part scanned apart, as if its lines came after these."""
        raise NotImplementedError

    def result(self, read: BundleRead) -> None:
        """Write this measurement's fields of ``read`` (occurrences settled)."""
        raise NotImplementedError


# ----------------------------------------------------------------------------- the routing
_PREFILTER_CHECKS = {k: re.compile(EXTRACTORS[k].encode()) for k in EXTRACTOR_PREFILTERS}


def checked_keys(keys: tuple[str, ...], line: bytes) -> tuple[str, ...]:
    """``keys`` of a scanned line without the prefiltered extractors whose whole pattern the line
    does not match."""
    return tuple(k for k in keys if k not in _PREFILTER_CHECKS or _PREFILTER_CHECKS[k].search(line))


class Extraction:
    """The extractors of one read, and the routing of one file's matched lines to them."""

    def __init__(self, extractors: list[Extractor], events: Events):
        self.extractors = list(extractors)
        self.events = events
        """The failure events (one of ``extractors``): a line's time falls back on the event it continues."""
        self.file: FileInfo | None = None
        self.boundaries = 0
        self._plans: dict[tuple, tuple] = {}
        self._lanes: dict[tuple, Extractor] = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_plans"], state["_lanes"] = {}, {}
        return state

    def begin(self, file: FileInfo) -> None:
        self.file = file
        self.boundaries = 0
        for ex in self.extractors:
            ex.begin(file)
        self._lanes = {(ex.raw_key,): ex for ex in self.extractors if ex.raw_key is not None}

    def end(self) -> None:
        for ex in self.extractors:
            ex.end()

    def _plan(self, key_tuple: tuple[str, ...]) -> tuple:
        """What a line with these keys needs: (keys, has signature keys, early feeds, other feeds).
        Memoised per key tuple."""
        plan = self._plans.get(key_tuple)
        if plan is None:
            keys = frozenset(key_tuple)
            takers = [ex for ex in self.extractors if any(ex.claims(k) for k in keys)]
            plan = self._plans[key_tuple] = (keys, any(not k.startswith("x_") for k in keys),
                                             [ex.feed for ex in takers if ex.early],
                                             [ex.feed for ex in takers if not ex.early])
        return plan

    def route(self, hit: LineHit) -> None:
        """One matched line of the current file."""
        key_tuple = hit.keys
        if FAST_ROUTING:
            lane = self._lanes.get(key_tuple)
            if lane is not None:
                lane.feed_text(hit.text, hit.lineno)
                return
        if not _PREFILTER_CHECKS.keys().isdisjoint(key_tuple):
            key_tuple = checked_keys(key_tuple, hit.line_bytes())
            if not key_tuple:
                return
        keys, has_signatures, early, late = self._plan(key_tuple)
        file = self.file
        text = hit.text
        ts = line_timestamp(text, file.reference)
        if file.is_finelog:
            if "x_boundary" in keys:
                self.boundaries += 1
            attempt = self.boundaries
        else:
            attempt = file.attempt
        occ = PendingOccurrence(file.source, hit.lineno, text, ts, attempt, hit.at)
        for feed in early:
            feed(hit, keys, occ)
        if ts is None and has_signatures:
            in_event = self.events.open_event(hit)
            ts = in_event.ts if in_event is not None and in_event.ts is not None else continued_record_ts(hit, file.reference)
            if ts is not None:
                occ = PendingOccurrence(file.source, hit.lineno, text, ts, attempt, hit.at)
        for feed in late:
            feed(hit, keys, occ)

    def scan(self, scanner: Scanner, path: Path, on_block: Callable[[int], None] | None = None) -> int:
        """Route every matched line of ``path`` (the file ``begin`` named). Returns the number of
        lines read; raises OSError as the read does. ``on_block`` is told the byte count of each
        block scanned (the scan's progress line) on the fast routing."""
        try:
            if not FAST_ROUTING:
                return scanner.scan_file(path, self.file.source, self.route)
            return self._scan_fast(scanner, path, on_block)
        finally:
            self.end()

    def _scan_fast(self, scanner: Scanner, path: Path, on_block: Callable[[int], None] | None = None) -> int:
        """``scanner.scan_file(path, source, self.route)``, without building a ``LineHit`` for the
        lines a lane key matched alone (and those a lane's C sink takes inside the scan)."""
        max_line = scan_mod.MAX_LINE_BYTES
        source = self.file.source
        lanes = self._lanes
        c_engine = scan_mod.LINE_ENGINE == "c"
        sink = None
        if c_engine and len(lanes) == 1:     # the C line engine takes one sink: the one lane's
            sink = next(iter(lanes.values())).sink(scanner, max_line)
        route = self.route
        lineno = 0
        for block, end, count, hits in scanner.iter_blocks(path, sink=sink):
            for start, line_end, index, keys in hits:
                line = block[start:line_end]
                lane = lanes.get(keys)
                if lane is not None:
                    raw = line if len(line) <= max_line else line[:max_line]
                    if c_engine:
                        lane.feed_raw(raw, lineno + index + 1)
                    else:
                        lane.feed_text(clean_line(raw), lineno + index + 1)
                else:
                    text, at = scanner.hit_text(line, keys)
                    route(LineHit(source=source, lineno=lineno + index + 1, keys=keys, text=text,
                                  block=block, end=line_end, block_end=end, at=at))
            lineno += count
            if on_block is not None:
                on_block(end)
        return lineno

    def mergeable(self, later: Extraction) -> bool:
        return all(a.mergeable(b) for a, b in zip(self.extractors, later.extractors))

    def merge(self, later: Extraction) -> bool:
        """Fold in a part scanned apart, in order; False (nothing changed) when a part cannot decide it."""
        if not self.mergeable(later):
            return False
        for a, b in zip(self.extractors, later.extractors):
            a.merge(b)
        return True

    def result(self, read: BundleRead) -> None:
        for ex in self.extractors:
            ex.result(read)


# ----------------------------------------------------------------------------- line times
CONTINUATION_LOOKBACK_LINES = 200
CONTINUATION_LOOKBACK_BYTES = 32 * 1024
# Lines that continue the record above them rather than start one: traceback frames and source
# lines (indented), the traceback header, chained-exception separators, caret markers, blanks.
_CONTINUATION_LINE = re.compile(r"^(?:\s|$|Traceback \(most recent call last\)|During handling of the above exception|"
                                r"The above exception was the direct cause|\^+\s*$)")
# A logger prefix repeated on every line of a logged traceback: vLLM's "ERROR 03-13 06:55:20
# [async_llm.py:710] " (V1) / "ERROR 06-22 20:16:34 async_llm_engine.py:52] " (V0).
LOGGED_TRACE_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9:]{8} (?:\[[^\]]{1,200}\]|\S+:[0-9]+\]) ?")


def continued_record_ts(hit: LineHit, reference_epoch: float | None) -> float | None:
    """The time of a line without a timestamp of its own: that of the record it continues -- the
    nearest earlier timestamped line of the same file and the same stream (Ray actor / torchrun
    rank prefix) reached across continuation lines only (a traceback's exception line after its
    frames, a message right after its logger line, a "what():" after a glog line). A line after a
    line of another stream, or after an untimestamped line of another record, has none."""
    stream = actor_prefix(hit.text)
    head = hit.preceding_bytes(CONTINUATION_LOOKBACK_BYTES).decode("utf-8", "replace")
    lines = head.split("\n")[:-1]          # the last element is the hit line itself
    for line in reversed(lines[-CONTINUATION_LOOKBACK_LINES:]):
        line = clean_line(line)
        if actor_prefix(line) != stream:
            return None
        ts = line_timestamp(line, reference_epoch)
        if ts is not None:
            return ts
        if not _CONTINUATION_LINE.match(LOGGED_TRACE_PREFIX.sub("", strip_actor_prefix(line), count=1)):
            return None
    return None

