"""vLLM engine stats lines ("Avg generation throughput: ..."): per engine the newest samples, the
number of stats lines and the stats-line eras seen.

Most matching lines of a big bundle are stats lines, so they take a fast lane: a line matched by
``x_stats`` alone reaches ``feed_raw`` (C line engine: read by ``STATS_READER``, the
``_linescan.StatsReader`` of the stats line's description in probes/parse/vllm.py) or
``feed_text`` without a ``LineHit``, and only its engine and era are derived (memoised on what
they depend on); the sample, with its numbers and timestamp, is built only for the lines still
kept when the result is written. With the C line engine, ``sink`` hands those lines to
``_linescan.StatsSink``, which queues them inside the scan itself, as ``feed_raw`` would.
"""
from __future__ import annotations

import re
from collections import deque

from rlhealth.probes import scan as scan_mod
from rlhealth.probes.extract import Extractor, FileInfo
from rlhealth.probes.parse import vllm as vp
from rlhealth.probes.parse.timestamps import line_timestamp
from rlhealth.probes.scan import Scanner
from rlhealth.probes.textio import clean_line

STATS_SAMPLES_PER_ENGINE = 400
"""The newest stats lines kept per engine."""
ENGINE_HEAD_MAX_CHARS = 512
"""A stats line whose first ")" is further in is not memoised (its head would be no actor prefix)."""
ENGINE_CACHE_MAX = 4096
"""Memoised (head, index, era fields) -> (engine, era) entries per file before the memo restarts."""
STATS_READER = scan_mod._linescan.StatsReader(*vp.stats_reader_spec()) if scan_mod._linescan is not None else None
"""The C reader of ``vp.STATS_LINE`` (None without the C line engine): ``line(raw)`` and ``fields(text)``."""
STATS_SINK = True
"""Whether the C line engine queues stats lines itself (``_linescan.StatsSink``; False: every
stats line through ``feed_raw``, the same queues -- tests/unit/test_linescan.py compares them)."""


class Stats(Extractor):
    keys = frozenset({"x_stats"})
    raw_key = "x_stats"

    def __init__(self, reference: float | None, *, settle_each_file: bool = False) -> None:
        self.reference = reference
        self.settle_each_file = settle_each_file
        """Build the samples of the queued lines at the end of every file (a part scanned apart,
        in a reader process: that work is then done in parallel, and the in-order merge only
        moves samples), not only when the result is written."""
        self.stats: dict[str, deque] = {}
        """Per engine: ``StatsSample``s, or ``(text, source, line, engine, era)`` of the fast lane."""
        self.count = 0
        self.eras: set[str] = set()
        self.engine_cache: dict[tuple, tuple[str, str]] = {}
        self._sink = None

    def begin(self, file: FileInfo) -> None:
        super().begin(file)
        self.engine_cache = {}

    def __getstate__(self):
        return {"reference": self.reference, "settle_each_file": self.settle_each_file, "stats": self.stats,
                "count": self.count, "eras": self.eras, "engine_cache": {}, "_sink": None}

    # --- a line with other keys too: the plain parse
    def feed(self, hit, keys, occ) -> None:
        sample = vp.parse_stats(hit.text, self.file.source, hit.lineno, occ.ts)
        if sample is not None:
            self.count += 1
            self.eras.add(sample.era)
            self._queue(sample.engine).append(sample)

    def _queue(self, engine: str) -> deque:
        queue = self.stats.get(engine)
        if queue is None:
            queue = self.stats[engine] = deque(maxlen=STATS_SAMPLES_PER_ENGINE)
        return queue

    # --- the lane
    def feed_text(self, text: str, lineno: int) -> None:
        m = vp.stats_match(text)
        if m is None:
            return
        self._record(text, lineno, *self.engine_and_era(text, m))

    def feed_raw(self, raw: bytes | bytearray, lineno: int) -> None:
        """``feed_text(clean_line(raw), lineno)``, the match read by ``STATS_READER.line`` (memoised
        on the key it gives; the regex runs only for a memo miss)."""
        got = STATS_READER.line(raw) if STATS_READER is not None else False
        if got is False:                    # not plain ASCII (or no C reader): the Python path
            self.feed_text(clean_line(raw), lineno)
            return
        if got is None:
            return
        text, key, close = got
        if close > ENGINE_HEAD_MAX_CHARS:
            self._record(text, lineno, *vp.engine_and_era(text, vp.stats_match(text), self.file.source))
            return
        cache = self.engine_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= ENGINE_CACHE_MAX:
                cache.clear()
            found = cache[key] = vp.engine_and_era(text, vp.stats_match(text), self.file.source)
        self._record(text, lineno, *found)

    def _record(self, text: str, lineno: int, engine: str, era: str) -> None:
        self.count += 1
        self.eras.add(era)
        queue = self.stats.get(engine)
        if queue is None:
            queue = self.stats[engine] = deque(maxlen=STATS_SAMPLES_PER_ENGINE)
        queue.append((text, self.file.source, lineno, engine, era))

    def engine_and_era(self, text: str, m: re.Match) -> tuple[str, str]:
        """``vp.engine_and_era(text, m, source)``, memoised. Its result depends only on the text up
        to the first ")" (the actor prefix, if any, ends there), the ``Engine N`` index, whether
        the match has a Swapped field, and (V1 with an index) the 2026-era field names."""
        close = text.find(")")
        if close > ENGINE_HEAD_MAX_CHARS:
            return vp.engine_and_era(text, m, self.file.source)
        engine_idx, swapped = m.group("engine", "swapped")
        key = (text[:close + 1], engine_idx, swapped is None,
               swapped is None and engine_idx is not None and any(marker in text for marker in vp.ERA_MARKERS))
        cache = self.engine_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= ENGINE_CACHE_MAX:
                cache.clear()
            found = cache[key] = vp.engine_and_era(text, m, self.file.source)
        return found

    def sink(self, scanner: Scanner, max_line: int):
        """A ``_linescan.StatsSink`` queueing the current file's lines matched by ``x_stats`` alone
        as ``feed_raw`` queues them, or None (no such single pattern, or the sink is off)."""
        if scanner.stats_id is None or not STATS_SINK or STATS_READER is None:
            return None
        source = self.file.source

        def resolve(text: str) -> tuple[str, str]:
            return vp.engine_and_era(text, vp.stats_match(text), source)

        def new_queue(engine: str) -> deque:
            queue = self.stats[engine] = deque(maxlen=STATS_SAMPLES_PER_ENGINE)
            return queue

        self._sink = scan_mod._linescan.StatsSink(STATS_READER, scanner.stats_id, source, self.stats, self.eras, {},
                                                  resolve, new_queue, ENGINE_HEAD_MAX_CHARS, ENGINE_CACHE_MAX,
                                                  max_line)
        return self._sink

    def end(self) -> None:
        if self._sink is not None:      # what it queued before a failure stays, as the rest does
            self.count += self._sink.count
            self._sink = None
        if self.settle_each_file:
            self._settle()

    def merge(self, later: Stats) -> None:
        for engine, queue in later.stats.items():
            into = self.stats.get(engine)
            if into is None:
                into = self.stats[engine] = deque(maxlen=queue.maxlen)
            into.extend(queue)
        self.count += later.count
        self.eras |= later.eras

    def result(self, read) -> None:
        self._settle()
        read.stats = self.stats
        read.stats_count = self.count
        read.stats_eras = self.eras

    def _settle(self) -> None:
        """The samples of the queued lines (same values as ``vp.parse_stats``): only the ones still
        in a per-engine queue get a timestamp and a ``StatsSample``."""
        of_values = vp.sample_of_values
        reference = self.reference
        for engine, queue in self.stats.items():
            if not any(type(item) is tuple for item in queue):
                continue
            done = deque(maxlen=queue.maxlen)
            for item in queue:
                if type(item) is tuple:
                    text, source, line, key, era = item
                    values = STATS_READER.fields(text) if STATS_READER is not None else None
                    if type(values) is tuple:       # the C reading of the match's fields
                        item = of_values(text, values, key, era, source, line, line_timestamp(text, reference))
                    else:
                        item = vp.stats_sample(text, vp.stats_match(text), key, era, source, line,
                                               line_timestamp(text, reference))
                done.append(item)
            self.stats[engine] = done
