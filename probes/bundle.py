"""The evidence-bundle reader: the one replay path for offline and live diagnoses.

Reads a MarinSkyRL syncdown (Iris ``jobs/<cluster>/<user>/<job>/`` or Jupiter
``jobs/jsc-jupiter/slurm/<id>/``) plus rlhealth's own ``rlhealth/captures/<stamp>/``
(contract §2), never modifying anything. Every log file is scanned once with the
compiled signature + extractor database; matched lines are routed to the pure
parsers. The result (``BundleRead``) holds parsed summaries and a list of evidence
problems; turning it into rule-engine facts is ``rlhealth.observe``'s job. With a forked trial
reader, the log files are shared with it (``_LogWork``) and their per-file outcomes merged in file
order (``_merge_file_scan``): the same ``BundleRead`` as one in-order scan.
"""
from __future__ import annotations

import json
import os
import re
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # the reader is handed the catalog; it never loads the rule base itself
    from rlhealth.catalog import Catalog, Signature
from rlhealth.facts import Occurrence, ProblemNote
from rlhealth.probes.capture import CAPTURES_DIR, capture_probe_policy
from rlhealth.probes import events as events_mod
from rlhealth.probes.events import EventLog
from rlhealth.probes.manifest import read_manifest
from rlhealth.probes.parse import MAX_COUNT_DIGITS
from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.parse import vllm as vp
from rlhealth.probes.parse.kubernetes import gpu_label_sightings
from rlhealth.probes.parse.nvidia_smi import gpu_name_from_line, parse_gpu_inventory
from rlhealth.probes.parse.timestamps import line_timestamp, parse_iso
from rlhealth.probes import patterns as patterns_mod
from rlhealth.probes import scan as scan_mod
from rlhealth.probes.patterns import EXTRACTOR_PREFILTERS, EXTRACTORS, scan_patterns
from rlhealth.probes.parse.trials import BackgroundSummary, TrialSummary
from rlhealth.probes.scan import LineHit, Pattern, Scanner, actor_prefix, stats_fields, stats_line, strip_actor_prefix
from rlhealth.probes.textio import JsonReadError, clean_line, read_json, safe_walk
from rlhealth.progress import human_bytes, scan_progress

LOG_DIRS = ("pod_logs", "ray_vllm_logs", "slurm_logs", "ray_logs")
NON_LOG_SUFFIXES = (".json", ".jsonl", ".tsv", ".csv", ".parquet", ".pt", ".safetensors", ".gz", ".tar", ".png")
MAX_KEPT_OCCURRENCES = 3
STATS_SAMPLES_PER_ENGINE = 400
"""The newest stats lines kept per engine."""
MAX_EAGER_LINES = 50
"""enforce_eager evidence lines kept (the first ones)."""
MAX_BATCH_COMPLETE = 200
"""Batch-completion lines kept (the newest ones)."""
MAX_PHASE_COSTS = 500
"""Phase durations kept per phase (the newest ones)."""
MAX_OPEN_EVENTS = 256
"""Processes (line prefixes) of one file whose newest event span is remembered at once."""

_PREFILTER_CHECKS = {k: re.compile(EXTRACTORS[k].encode()) for k in EXTRACTOR_PREFILTERS}


def checked_keys(keys: tuple[str, ...], line: bytes) -> tuple[str, ...]:
    """``keys`` of a scanned line without the prefiltered extractors whose whole pattern the line
    does not match."""
    return tuple(k for k in keys if k not in _PREFILTER_CHECKS or _PREFILTER_CHECKS[k].search(line))


TRAINER_PROGRESS_KEYS = frozenset({"x_wandb", "x_dict_end", "x_step_progress", "x_phase", "x_resumed"})
_SLURM_LEG_RE = re.compile(r"_(\d+)\.(?:out|err)$|^(?:slurm-)?(\d+)\.(?:out|err)$")
_EXCEPTION_LINE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt|Abort)\b.*")
# A logger prefix repeated on every line of a logged traceback: vLLM's "ERROR 03-13 06:55:20
# [async_llm.py:710] " (V1) / "ERROR 06-22 20:16:34 async_llm_engine.py:52] " (V0).
_LOGGED_TRACE_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9:]{8} (?:\[[^\]]{1,200}\]|\S+:[0-9]+\]) ?")


@dataclass
class SignatureAgg:
    """Occurrences of one signature: count, a few kept, first per attempt."""
    signature: Signature
    count: int = 0
    kept: list[Occurrence] = field(default_factory=list)
    last: Occurrence | None = None
    first_by_attempt: dict[int, Occurrence] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)

    def add(self, occ: Occurrence) -> None:
        self.count += 1
        self.files.add(occ.source)
        if len(self.kept) < MAX_KEPT_OCCURRENCES:
            self.kept.append(occ)
        self.last = occ
        key = occ.attempt if occ.attempt is not None else -1
        prior = self.first_by_attempt.get(key)
        if prior is None or earlier(occ, prior):
            self.first_by_attempt[key] = occ

    @property
    def first(self) -> Occurrence | None:
        best = None
        for occ in self.kept + ([self.last] if self.last else []):
            if best is None or earlier(occ, best):
                best = occ
        return best


def earlier(a: Occurrence, b: Occurrence) -> bool:
    """True when ``a`` happened before ``b``: by timestamp, else by line within one file."""
    if a.ts is not None and b.ts is not None and a.ts != b.ts:
        return a.ts < b.ts
    if a.source == b.source:
        return a.line < b.line
    return False   # no common clock across files: keep the first seen


@dataclass
class BundleRead:
    """Everything read from one bundle, before facts are derived."""
    root: Path
    layout: str = "unknown"
    manifest: dict | None = None
    capture_dir: Path | None = None
    capture: dict | None = None
    captured_at: float | None = None
    synced_at: float | None = None
    state: dict | None = None
    job_info: dict | None = None
    gpu_health: dict | None = None
    """``gpu_health.json`` of the capture: per node, per GPU ECC / retired-page / row-remap
    measurements and kernel Xid events, each with the raw file and line it was read from."""
    flight_recorder: dict | None = None
    """``flight_recorder/summary.json`` of the capture: per rank the collective it waits in."""
    gpu_polls: list[dict] = field(default_factory=list)
    pods: dict | None = None
    stacks: list[tuple[str, str]] = field(default_factory=list)
    problems: list[ProblemNote] = field(default_factory=list)
    log_files: list[str] = field(default_factory=list)
    lines_read: int = 0
    signatures: dict[str, SignatureAgg] = field(default_factory=dict)
    suppressed: dict[str, int] = field(default_factory=dict)
    attempt_boundaries: list[Occurrence] = field(default_factory=list)
    leg_ids: list[str] = field(default_factory=list)
    metric_records: list[tp.MetricRecord] = field(default_factory=list)
    malformed_metric_lines: int = 0
    malformed_example: Occurrence | None = None
    eval_records: int = 0
    step_progress: tuple[int, int] | None = None
    step_progress_occ: Occurrence | None = None
    last_trainer_line: Occurrence | None = None
    trainer_lines: int = 0
    phases_open: dict[str, Occurrence] = field(default_factory=dict)
    phase_costs: dict[str, list[float]] = field(default_factory=dict)
    steps_finished: int = 0
    genbuf_last: tuple[int, int] | None = None
    genbuf_last_change: Occurrence | None = None
    genbuf_last_seen: Occurrence | None = None
    stats: dict[str, deque] = field(default_factory=dict)
    stats_count: int = 0
    stats_eras: set[str] = field(default_factory=set)
    eager_lines: list[tuple[bool, Occurrence]] = field(default_factory=list)
    engine_model: tuple[str, Occurrence] | None = None
    """The served model from the first vLLM engine init line (``... with config: model='X'``)."""
    gpu_names: list[tuple[str, str, Occurrence]] = field(default_factory=list)
    """GPU product names as the evidence states them: ``("nvidia_smi" | "node_label", name, where)``
    from nvidia-smi output (the capture's raw GPU inventories, nvidia-smi lines in logs) and the
    GPU product labels of the job's pods / nodes; the first sighting of each name per file."""
    batch_complete: list[tuple[dict, Occurrence]] = field(default_factory=list)
    exc_breakdown: dict[str, int] = field(default_factory=dict)
    exc_breakdown_occ: Occurrence | None = None
    use_tis: bool | None = None
    weight_reload: int = 0
    weight_updates: int = 0
    """Engine-log lines of a weight broadcast into the engines (``update_weights``, ``update_named_weights``)."""
    weight_update_first: Occurrence | None = None
    weight_reload_finished: int = 0
    """Lines closing a weight reload (``finish_weight_reload``, vLLM ``finalize_layerwise_reload``)."""
    generator_init: Occurrence | None = None
    source_rev: Occurrence | None = None
    trials: TrialSummary | None = None
    trace_dir_exists: bool = False
    events: EventLog = field(default_factory=EventLog)
    """Failure-shaped events of the logs (``rlhealth.probes.events``), bounded per attempt."""
    current_leg_missing: bool = False
    launch_material: list[tuple[str, str]] = field(default_factory=list)
    """Slurm batch scripts / resolved configuration files the bundle carries (probes/manifest.py)."""
    """Jupiter: the bundle's own Slurm job (the current chain leg) has no log yet (e.g. pending)."""

    @property
    def newest_evidence(self) -> float | None:
        values = [v for v in (self.captured_at, self.synced_at) if v is not None]
        return max(values) if values else None


_TOKEN_RX: dict[tuple[str, str, bool], re.Pattern] = {}


def _token_regexes(catalog: Catalog) -> dict[str, re.Pattern]:
    """Each signature's pattern as a Python regex (its whole-word check, ``events.token_match``)."""
    out = {}
    for k, sig in catalog.signatures.items():
        key = (k, sig.pattern, sig.caseless)
        rx = _TOKEN_RX.get(key)
        if rx is None:
            rx = _TOKEN_RX[key] = re.compile(sig.pattern, re.IGNORECASE if sig.caseless else 0)
        out[k] = rx
    return out


def _catalog_patterns(catalog: Catalog) -> tuple[Pattern, ...]:
    return scan_patterns([(s.id, s.pattern, s.caseless) for s in catalog.signatures.values()])


def scanner_for(catalog: Catalog) -> Scanner:
    """The catalog's scanner; joins any compilation started (so no thread of it is left running
    when a reader forks)."""
    return patterns_mod.scanner(_catalog_patterns(catalog))


def _is_log(path: Path) -> bool:
    name = path.name.lower()
    return not name.endswith(NON_LOG_SUFFIXES) and not name.startswith(".")


def list_captures(root: Path) -> list[Path]:
    base = root / CAPTURES_DIR
    try:
        return sorted((p for p in base.iterdir() if p.is_dir() and not p.is_symlink()), key=lambda p: p.name)
    except OSError:
        return []


FAST_ROUTING = True
"""Route ``x_stats``-only lines through ``_Router._stats_fast`` (False: the plain per-line path;
the equivalence tests compare both)."""
_STATS_ONLY = ("x_stats",)
ENGINE_HEAD_MAX_CHARS = 512
"""A stats line whose first ")" is further in is not memoised (its head would be no actor prefix)."""
STATS_SINK = True
"""Whether the C line engine routes stats lines itself (``_linescan.StatsSink``; False: every stats
line through ``_stats_raw``, the same queues -- tests/unit/test_linescan.py compares them)."""
ENGINE_CACHE_MAX = 4096
"""Memoised (head, index, era fields) -> (engine, era) entries per file before the memo restarts."""


def _finish_stats(read: BundleRead, reference_epoch: float | None) -> None:
    """Build the samples of the stats lines kept by the fast path (same values as parse_stats).

    The fast path queues ``(text, source, line, engine, era)`` tuples; only the ones still in a
    per-engine deque at the end get a timestamp and a ``StatsSample`` (their engine and era are
    the memoised ``vp.engine_and_era`` the routing already derived)."""
    sample = vp.StatsSample
    for engine, queue in read.stats.items():
        if not any(type(item) is tuple for item in queue):
            continue
        done = deque(maxlen=queue.maxlen)
        for item in queue:
            if type(item) is tuple:
                text, source, line, key, era = item
                fields = stats_fields(text) if stats_fields is not None else None
                if type(fields) is tuple:       # the C reading of the match's groups
                    prompt, gen, running, waiting, kv = fields
                    item = sample(key, line_timestamp(text, reference_epoch), prompt, gen, running, waiting, kv,
                                  source, line, era, text)
                else:
                    item = vp.stats_sample(text, vp.stats_match(text), key, era, source, line,
                                           line_timestamp(text, reference_epoch))
            done.append(item)
        read.stats[engine] = done


class _PendingOccurrence:
    """An occurrence as the fast routing records it (the fields ``earlier`` and the routing read);
    the ``Occurrence`` model is built only for the ones the bundle read still holds when the scan
    ends (``_settle_occurrences``), once per occurrence (shared references stay shared)."""
    __slots__ = ("source", "line", "text", "ts", "attempt", "_model")

    def __init__(self, source: str, line: int, text: str, ts: float | None, attempt: int | None):
        self.source, self.line, self.text, self.ts, self.attempt = source, line, text, ts, attempt
        self._model = None

    def model(self) -> Occurrence:
        if self._model is None:
            self._model = Occurrence(source=self.source, line=self.line, text=self.text, ts=self.ts, attempt=self.attempt)
        return self._model


def _settled(value):
    return value.model() if type(value) is _PendingOccurrence else value


def _settle_occurrences(read: BundleRead) -> None:
    """Replace every pending occurrence the routing left in ``read`` by its ``Occurrence``."""
    for agg in read.signatures.values():
        agg.kept = [_settled(o) for o in agg.kept]
        agg.last = _settled(agg.last)
        agg.first_by_attempt = {k: _settled(o) for k, o in agg.first_by_attempt.items()}
    read.attempt_boundaries = [_settled(o) for o in read.attempt_boundaries]
    read.phases_open = {k: _settled(o) for k, o in read.phases_open.items()}
    for name in ("malformed_example", "step_progress_occ", "last_trainer_line", "genbuf_last_change",
                 "genbuf_last_seen", "exc_breakdown_occ", "generator_init", "source_rev", "weight_update_first"):
        setattr(read, name, _settled(getattr(read, name)))
    read.eager_lines = [(value, _settled(o)) for value, o in read.eager_lines]
    read.batch_complete = [(parsed, _settled(o)) for parsed, o in read.batch_complete]
    if read.engine_model is not None:
        read.engine_model = (read.engine_model[0], _settled(read.engine_model[1]))
    read.gpu_names = [(kind, name, _settled(o)) for kind, name, o in read.gpu_names]


class _Router:
    """Routes matched lines of one file to signature aggregation and parsers."""

    def __init__(self, read: BundleRead, catalog: Catalog, reference_epoch: float | None,
                 source: str, attempt: int | None, skip_patterns: dict[str, re.Pattern],
                 seen_steps: set[int] | None = None):
        self.read = read
        # Steps that already have a metric record (shared by the routers of one bundle): only the
        # first record of a step is kept, the one ``observe`` uses ("first occurrence of a step
        # wins across the chain"), so memory follows the number of steps, not of copies.
        self.seen_steps = seen_steps if FAST_ROUTING else None
        self.catalog = catalog
        self.ref = reference_epoch
        self.source = source
        self.attempt = attempt
        self.skip = skip_patterns
        self.is_finelog = source == "finelog.log" and attempt is None
        self.boundaries = 0
        self.engine_cache: dict[tuple, tuple[str, str]] = {}
        self.plans: dict[tuple, tuple] = {}
        self.agg_class = SignatureAgg
        # What merging this file's outcome after other files' needs (see _merge_file_scan): the
        # first parsed generation-buffer value with its line, and the first step-progress value
        # with whether anything else on that line counted as progress.
        self.genbuf_first: tuple[tuple[int, int], Any] | None = None
        self.first_step_progress: tuple[tuple[int, int], bool] | None = None
        self.phases_finished: set[str] = set()
        self.file_index = 0
        self.open_events: dict[str | None, events_mod.LogEvent] = {}
        """The newest event of each process (line prefix) of this file; that process's lines up to
        its ``last_line`` belong to it (interleaved ranks keep their own tracebacks)."""
        self.token_rx = _token_regexes(catalog)

    def _open_event(self, hit: LineHit) -> events_mod.LogEvent | None:
        """The event whose lines hold ``hit`` (same process), if any."""
        if not self.open_events:
            return None
        ev = self.open_events.get(events_mod.peel(hit.text).process)
        return ev if ev is not None and ev.first_line <= hit.lineno <= ev.last_line else None

    def _event(self, hit: LineHit, ts: float | None, attempt: int | None) -> None:
        """Read the event starting at ``hit`` (its traceback from the lines after it)."""
        if self._open_event(hit) is not None:
            return
        head = hit.preceding_bytes(4096).rsplit(b"\n", 2)
        preceding = clean_line(head[-2]) if len(head) >= 2 else None
        ev = events_mod.event_at(hit.text, hit.lineno, hit.following_lines(events_mod.MAX_TRACEBACK_LINES,
                                                                             events_mod.MAX_TRACEBACK_BYTES),
                                 preceding, self.source)
        if ev is None:
            return
        ts = events_mod.line_time(hit.text, line_timestamp, self.ref) if ts is not None else None
        if ts is None:
            ts = _continued_record_ts(hit, self.ref)
        ev.ts, ev.attempt, ev.file_index = ts, attempt, self.file_index
        if len(self.open_events) >= MAX_OPEN_EVENTS:
            self.open_events.clear()
        self.open_events[ev.process] = ev
        self.read.events.add(ev)

    def _plan(self, key_tuple: tuple[str, ...]) -> tuple[frozenset, list[str], frozenset, bool, bool]:
        """What a line with these keys needs: (keys, its signatures sorted, the signatures they
        suppress, has trainer-progress keys, has other extractor keys). Memoised per key tuple."""
        plan = self.plans.get(key_tuple)
        if plan is None:
            keys = frozenset(key_tuple)
            sig_keys = sorted(k for k in keys if not k.startswith("x_"))
            suppressed = frozenset(s for k in sig_keys for s in self.catalog.signatures[k].suppresses)
            extractors = {k for k in keys if k.startswith("x_")}
            plan = self.plans[key_tuple] = (keys, sig_keys, suppressed, bool(keys & TRAINER_PROGRESS_KEYS),
                                            bool(extractors - TRAINER_PROGRESS_KEYS))
        return plan

    def __call__(self, hit: LineHit) -> None:
        if hit.keys == _STATS_ONLY and FAST_ROUTING:
            self._stats_fast(hit)
            return
        read = self.read
        key_tuple = hit.keys
        if not _PREFILTER_CHECKS.keys().isdisjoint(key_tuple):
            key_tuple = checked_keys(key_tuple, hit.line_bytes())
            if not key_tuple:
                return
        keys, sig_keys, suppressed, trainer_keys, other_extractors = self._plan(key_tuple)
        text = hit.text
        ts = line_timestamp(text, self.ref) if keys else None
        if self.is_finelog and "x_boundary" in keys:
            self.boundaries += 1
            read.attempt_boundaries.append(Occurrence(source=self.source, line=hit.lineno, text=text, ts=ts,
                                                      attempt=self.boundaries))
        attempt = self.boundaries if self.is_finelog else self.attempt
        if "x_event" in keys:
            self._event(hit, ts, attempt)
        in_event = self._open_event(hit)
        if ts is None and sig_keys:
            ts = in_event.ts if in_event is not None and in_event.ts is not None else _continued_record_ts(hit, self.ref)
        if FAST_ROUTING:
            occ = _PendingOccurrence(self.source, hit.lineno, text, ts, attempt)
        else:
            occ = Occurrence(source=self.source, line=hit.lineno, text=text, ts=ts, attempt=attempt)
        if sig_keys:
            for k in sig_keys:
                sig = self.catalog.signatures[k]
                if k in self.token_rx and not events_mod.token_match(self.token_rx[k], text):
                    continue            # the wording inside a longer word: no occurrence
                if k in suppressed or (k in self.skip and self.skip[k].search(text)) or (
                        in_event is not None and in_event.grade == "note" and in_event.thread == "background"):
                    read.suppressed[k] = read.suppressed.get(k, 0) + 1
                    continue
                if in_event is not None and k not in in_event.names:
                    in_event.names.append(k)
                if sig.detail_after == "exception_line":
                    detail = self._exception_line(hit)
                    if detail is not None:
                        occ_k = Occurrence(source=self.source, line=detail[0], text=detail[1], ts=ts, attempt=attempt)
                        read.signatures.setdefault(k, self.agg_class(sig)).add(occ_k)
                        continue
                read.signatures.setdefault(k, self.agg_class(sig)).add(occ)
        if trainer_keys:
            self._trainer(hit, keys, occ)
        if not other_extractors:
            return
        if "x_stats" in keys:
            sample = vp.parse_stats(text, self.source, hit.lineno, ts)
            if sample is not None:
                read.stats_count += 1
                read.stats_eras.add(sample.era)
                read.stats.setdefault(sample.engine, deque(maxlen=STATS_SAMPLES_PER_ENGINE)).append(sample)
        if "x_engine_model" in keys and read.engine_model is None:
            model = vp.model_from_init_line(text)
            if model:
                read.engine_model = (model, occ)
        if "x_gpu_name" in keys:
            name = gpu_name_from_line(text)
            if name:
                _add_gpu_name(read, "nvidia_smi", name, occ)
        if "x_eager" in keys:
            value = vp.eager_from_line(text)
            if value is not None and len(read.eager_lines) < MAX_EAGER_LINES:
                read.eager_lines.append((value, occ))
        if "x_genbuf" in keys:
            gb = tp.parse_gen_buffer(text)
            if gb is not None:
                if self.genbuf_first is None:
                    self.genbuf_first = (gb, occ)
                if gb != read.genbuf_last:
                    read.genbuf_last = gb
                    read.genbuf_last_change = occ
                read.genbuf_last_seen = occ
        if "x_batch" in keys:
            parsed = tp.parse_batch_complete(text)
            if parsed is not None:
                read.batch_complete.append((parsed, occ))
                if len(read.batch_complete) > MAX_BATCH_COMPLETE:
                    read.batch_complete.pop(0)
        if "x_excbreak" in keys:
            parsed = tp.parse_exception_breakdown(text)
            if parsed:
                for name, n in parsed.items():
                    read.exc_breakdown[name] = read.exc_breakdown.get(name, 0) + n
                read.exc_breakdown_occ = occ
        if "x_use_tis" in keys:
            value = tp.parse_use_tis(text)
            if value is not None:
                read.use_tis = value
        if "x_weight_reload" in keys:
            read.weight_reload += 1
        if "x_weight_update" in keys:
            read.weight_updates += 1
            if read.weight_update_first is None:
                read.weight_update_first = occ
        if "x_weight_reload_done" in keys:
            read.weight_reload_finished += 1
        if "x_generator_init" in keys and read.generator_init is None:
            read.generator_init = occ
        if "x_source_rev" in keys and read.source_rev is None:
            read.source_rev = occ

    def scan(self, scanner: Scanner, path: Path) -> int:
        """``scanner.scan_file(path, source, self)``, without building a ``LineHit`` for the
        lines whose only key is ``x_stats``. Returns the number of lines read."""
        if not FAST_ROUTING:
            return scanner.scan_file(path, self.source, self)
        max_line = scan_mod.MAX_LINE_BYTES
        source = self.source
        stats_raw = self._stats_raw if scan_mod.LINE_ENGINE == "c" else None
        stats_text = self._stats_text
        sink = self._stats_sink(scanner, max_line) if stats_raw is not None and STATS_SINK else None
        lineno = 0
        try:
            for block, end, count, hits in scanner.iter_blocks(path, sink=sink):
                for start, line_end, index, keys in hits:
                    raw = block[start:line_end]
                    if len(raw) > max_line:
                        raw = raw[:max_line]
                    if keys == _STATS_ONLY:
                        if stats_raw is not None:
                            stats_raw(raw, lineno + index + 1)
                        else:
                            stats_text(clean_line(raw), lineno + index + 1)
                    else:
                        self(LineHit(source=source, lineno=lineno + index + 1, keys=keys, text=clean_line(raw),
                                     block=block, end=line_end, block_end=end))
                lineno += count
        finally:
            if sink is not None:        # what it recorded before a failure stays, as the rest does
                self.read.stats_count += sink.count
        return lineno

    def _stats_sink(self, scanner: Scanner, max_line: int):
        """A ``_linescan.StatsSink`` routing this file's lines matched by ``x_stats`` alone as
        ``_stats_raw`` routes them (into this read's queues), or None (no such single pattern)."""
        if scanner.stats_id is None:
            return None
        read, source = self.read, self.source

        def resolve(text: str) -> tuple[str, str]:
            return vp.engine_and_era(text, vp.stats_match(text), source)

        def new_queue(engine: str) -> deque:
            queue = read.stats[engine] = deque(maxlen=STATS_SAMPLES_PER_ENGINE)
            return queue

        return scan_mod._linescan.StatsSink(scanner.stats_id, source, read.stats, read.stats_eras, {}, resolve, new_queue,
                                   ENGINE_HEAD_MAX_CHARS, ENGINE_CACHE_MAX, max_line)

    def _record(self, step: int, metrics: dict[str, float], line: int, ts: float | None, serialization: str) -> None:
        if self.seen_steps is not None:
            if step in self.seen_steps:
                return
            self.seen_steps.add(step)
            metrics = {sys.intern(k): v for k, v in tp.diagnosis_metrics(metrics).items()}
        self.read.metric_records.append(tp.MetricRecord(step=step, metrics=metrics, source=self.source, line=line,
                                                        ts=ts, serialization=serialization))

    def _stats_fast(self, hit: LineHit) -> None:
        self._stats_text(hit.text, hit.lineno)

    def _stats_text(self, text: str, lineno: int) -> None:
        """A line whose only key is ``x_stats`` (the bulk of all matching lines).

        Same outcome as ``vp.parse_stats`` + the deque append in ``__call__``, but the sample
        with its numbers and the line timestamp is only built for the lines that
        survive in the per-engine deque (``_finish_stats``); here only the engine key and era are
        derived, memoised on what they depend on (``_engine_and_era``).
        """
        m = vp.stats_match(text)
        if m is None:
            return
        self._stats_record(text, lineno, *self._engine_and_era(text, m))

    def _stats_raw(self, raw: bytes | bytearray, lineno: int) -> None:
        """``_stats_text(clean_line(raw), lineno)``, the match read by ``_linescan.stats_line`` (the
        memo key built from what it reports; the regex runs only for a memo miss)."""
        got = stats_line(raw)
        if got is False:                    # not plain ASCII: the Python path
            self._stats_text(clean_line(raw), lineno)
            return
        if got is None:
            return
        text, engine_idx, swapped, newer, close = got
        if close > ENGINE_HEAD_MAX_CHARS:
            self._stats_record(text, lineno, *vp.engine_and_era(text, vp.stats_match(text), self.source))
            return
        key = (text[:close + 1], engine_idx, not swapped, not swapped and engine_idx is not None and newer)
        cache = self.engine_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= ENGINE_CACHE_MAX:
                cache.clear()
            found = cache[key] = vp.engine_and_era(text, vp.stats_match(text), self.source)
        self._stats_record(text, lineno, *found)

    def _stats_record(self, text: str, lineno: int, engine: str, era: str) -> None:
        read = self.read
        read.stats_count += 1
        read.stats_eras.add(era)
        queue = read.stats.get(engine)
        if queue is None:
            queue = read.stats[engine] = deque(maxlen=STATS_SAMPLES_PER_ENGINE)
        queue.append((text, self.source, lineno, engine, era))

    def _engine_and_era(self, text: str, m: re.Match) -> tuple[str, str]:
        """``vp.engine_and_era(text, m, source)``, memoised. Its result depends only on the text up
        to the first ")" (the actor prefix, if any, ends there), the ``Engine N`` index, whether
        the match has a Swapped field, and (V1 with an index) the 2026-era field names."""
        close = text.find(")")
        if close > ENGINE_HEAD_MAX_CHARS:
            return vp.engine_and_era(text, m, self.source)
        engine_idx, swapped = m.group("engine", "swapped")
        key = (text[:close + 1], engine_idx, swapped is None,
               swapped is None and engine_idx is not None and ("MM cache hit rate" in text or "External prefix" in text))
        cache = self.engine_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= ENGINE_CACHE_MAX:
                cache.clear()
            found = cache[key] = vp.engine_and_era(text, m, self.source)
        return found

    def _exception_line(self, hit: LineHit) -> tuple[int, str] | None:
        """The exception line closing a traceback that starts at ``hit`` (same block)."""
        for offset, line in enumerate(hit.following_lines(limit=300), start=1):
            body = _LOGGED_TRACE_PREFIX.sub("", strip_actor_prefix(line), count=1)
            if not body.strip() or body.startswith((" ", "\t")) or body.startswith("Traceback"):
                continue
            if _EXCEPTION_LINE_RE.match(body) or ": " in body:
                return hit.lineno + offset, line
            return None
        return None

    def _trainer(self, hit: LineHit, keys: set[str], occ: Occurrence) -> None:
        read = self.read
        text = hit.text
        progressed = False
        step_progress_changed = False
        if "x_wandb" in keys:
            parsed = tp.parse_wandb_mirror(text)
            if parsed is not None:
                kind, step, metrics = parsed
                if kind == "train":
                    if metrics is None:
                        read.malformed_metric_lines += 1
                        if read.malformed_example is None:
                            read.malformed_example = occ
                    else:
                        self._record(step, metrics, hit.lineno, occ.ts, "wandb-json")
                        progressed = True
                else:
                    read.eval_records += 1
        if "x_dict_end" in keys and "x_wandb" not in keys:
            metrics = tp.parse_dict_block(hit.preceding_bytes(64 * 1024).decode("utf-8", "replace"))
            if metrics is not None:
                step = int(metrics.get("trainer/global_step", 0))
                ts = occ.ts
                if ts is None:
                    block_head = hit.preceding_bytes(64 * 1024).decode("utf-8", "replace")
                    start = block_head.rfind("{'")
                    ts = line_timestamp(block_head[max(0, start - 400):start], self.ref) if start >= 0 else None
                self._record(step, metrics, hit.lineno, ts, "python-dict")
                progressed = True
            else:
                read.malformed_metric_lines += 1
                if read.malformed_example is None:
                    read.malformed_example = occ
        if "x_step_progress" in keys:
            sp = tp.parse_step_progress(text)
            if sp is not None:
                if read.step_progress is None or sp != read.step_progress:
                    step_progress_changed = True
                if self.first_step_progress is None:
                    self.first_step_progress = (sp, None)
                read.step_progress = sp
                read.step_progress_occ = occ
        if "x_phase" in keys:
            ph = tp.parse_phase(text)
            if ph is not None:
                what, phase, cost = ph
                if what == "Started":
                    read.phases_open[phase] = occ
                else:
                    read.phases_open.pop(phase, None)
                    self.phases_finished.add(phase)
                    if cost is not None:
                        costs = read.phase_costs.setdefault(phase, [])
                        costs.append(cost)
                        if len(costs) > MAX_PHASE_COSTS:
                            del costs[0]
                    if phase == "step":
                        read.steps_finished += 1
                progressed = True
        if "x_resumed" in keys:
            progressed = True
        if self.first_step_progress is not None and self.first_step_progress[1] is None:
            self.first_step_progress = (self.first_step_progress[0], progressed)
        progressed = progressed or step_progress_changed
        if progressed:
            read.trainer_lines += 1
            if occ.ts is not None and (read.last_trainer_line is None or read.last_trainer_line.ts is None
                                       or occ.ts >= read.last_trainer_line.ts):
                read.last_trainer_line = occ
            elif read.last_trainer_line is None:
                read.last_trainer_line = occ


# ----------------------------------------------------------------------- log files in parallel
PARALLEL_SCAN_MIN_BYTES = 32 * 1024 * 1024
"""Log bytes below which the diagnosing process scans every log file itself (the trial reader
then gets none: merging per-file outcomes would cost more than it saves)."""
MAX_FIRST_CHAINS = 8
"""Per signature and attempt, how many record-early occurrences a file scanned on its own keeps a
first-occurrence fold for (``_ChainedAgg``); a merge that would need one more rescans the file."""
MAX_PARALLEL_LOG_FILES = 1024
"""More log files than this are scanned in the diagnosing process only: every file's own scan is
held until the in-order merge (a few KiB each even when empty), and the file numbers travel as
4-byte tokens through one pipe written before the fork (well under its 64 KiB)."""


class _ChainedAgg(SignatureAgg):
    """The ``SignatureAgg`` of one file scanned on its own, which still knows what
    ``first_by_attempt`` becomes when the file's occurrences come after those of earlier files.

    In order, an occurrence replaces the first P held so far (from an earlier file, so another
    source) only if both have timestamps and it is earlier; P therefore only decides where the
    in-file fold starts: at the first occurrence timestamped before P. That occurrence sets a new
    earliest timestamp in the file ("record-early"); ``chains[attempt]`` holds, for each
    record-early occurrence in file order, ``[it, the fold of ``earlier`` from it to the end]``.
    """

    def __init__(self, signature):
        super().__init__(signature)
        self.chains: dict[int, list[list]] = {}
        self.overflow: set[int] = set()

    def add(self, occ) -> None:
        super().add(occ)
        key = occ.attempt if occ.attempt is not None else -1
        chains = self.chains.get(key)
        if chains is None:
            chains = self.chains[key] = []
        for chain in chains:
            if earlier(occ, chain[1]):
                chain[1] = occ
        if occ.ts is not None and (not chains or occ.ts < chains[-1][0].ts):
            if len(chains) < MAX_FIRST_CHAINS:
                chains.append([occ, occ])
            else:
                self.overflow.add(key)

    def first_after(self, key: int, prior):
        """``first_by_attempt[key]`` had the file been routed after ``prior`` was the first;
        ``_UNDECIDED`` when the fold it needs was not kept."""
        if prior is None:
            return self.first_by_attempt[key]
        if prior.ts is None:
            return prior
        for start, first in self.chains.get(key, ()):
            if start.ts < prior.ts:
                return first
        return _UNDECIDED if key in self.overflow else prior


_UNDECIDED = object()


@dataclass
class _FileScan:
    """One log file routed on its own into a fresh ``BundleRead`` (``read``), merged into the
    bundle's in file order by ``_merge_file_scan``. ``lines`` is None when reading it failed with
    ``error`` (what was routed before the failure is in ``read``, as in an in-order scan)."""
    index: int
    read: BundleRead
    lines: int | None
    error: str | None
    genbuf_first: tuple | None
    first_step_progress: tuple | None
    phases_finished: set[str]


class _LogWork:
    """The log files of one bundle as work shared between the diagnosing process and its forked
    trial reader: file numbers, largest file first, as 4-byte tokens in one pipe written (and its
    write end closed) before the fork, so a 4-byte read claims one file and EOF means all claimed.
    Each claimed file is routed on its own (``scan_one``); the reader returns its ``_FileScan``s
    with its trial tally (pickled through the reader's pipe: each is bounded as the router's
    state is -- capped deques and lists, one record per step)."""

    def __init__(self, root: Path, plan: list[tuple[Path, str, int | None]], sizes: list[int], catalog: Catalog,
                 reference: float | None, skip: dict[str, re.Pattern], scanner: Scanner):
        self.root, self.plan, self.catalog = root, plan, catalog
        self.reference, self.skip, self.scanner = reference, skip, scanner
        order = sorted(range(len(plan)), key=lambda i: (-sizes[i], i))
        read_end, write_end = os.pipe()
        try:
            os.write(write_end, b"".join(i.to_bytes(4, "little") for i in order))
        except OSError:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.tokens: int | None = read_end

    def claim(self) -> int | None:
        token = os.read(self.tokens, 4)
        return int.from_bytes(token, "little") if len(token) == 4 else None

    def close(self) -> None:
        if self.tokens is not None:
            os.close(self.tokens)
            self.tokens = None

    def scan_one(self, index: int) -> _FileScan:
        path, rel, attempt = self.plan[index]
        part = BundleRead(root=self.root)
        router = _Router(part, self.catalog, self.reference, rel, attempt, self.skip, set())
        router.agg_class = _ChainedAgg
        router.file_index = index
        try:
            lines, error = router.scan(self.scanner, path), None
        except OSError as exc:
            lines, error = None, f"unreadable log: {exc.strerror or exc}"
        return _FileScan(index, part, lines, error, router.genbuf_first, router.first_step_progress,
                         router.phases_finished)

    def in_reader(self) -> dict[int, _FileScan]:
        """In the forked reader, once the trial chunks ran out: route claimed files until none is
        left. A file that fails other than by OSError is left out: the parent routes it again in
        order (and meets the failure where an in-order scan would)."""
        done: dict[int, _FileScan] = {}
        while (index := self.claim()) is not None:
            try:
                part = self.scan_one(index)
            except Exception:  # noqa: BLE001 - see above
                continue
            for agg in part.read.signatures.values():
                agg.signature = None      # the parent has the catalog; no need to pickle it
            done[index] = part
        return done


def _merge_file_scan(read: BundleRead, part: _FileScan, seen_steps: set[int], catalog: Catalog) -> bool:
    """Add one file routed on its own to ``read`` exactly as if its lines had been routed after
    every line already in ``read`` (what ``_Router`` does to each ``BundleRead`` field, in order).
    Returns False, leaving ``read`` untouched, when the per-file outcome cannot decide it (the
    caller then routes the file again, in order)."""
    src = part.read
    # --- first, what depends on the state before the file (decided before anything changes)
    if (part.first_step_progress is not None and not part.first_step_progress[1]
            and read.step_progress == part.first_step_progress[0]):
        return False      # its first step-progress line repeated the last one: no progress in order
    firsts: dict[tuple[str, int], Any] = {}
    for k, agg in src.signatures.items():
        prior_agg = read.signatures.get(k)
        for key in agg.first_by_attempt:
            prior = prior_agg.first_by_attempt.get(key) if prior_agg is not None else None
            chosen = agg.first_after(key, prior)
            if chosen is _UNDECIDED:
                return False
            firsts[(k, key)] = chosen
    # --- the file's outcome
    for k, agg in src.signatures.items():
        into = read.signatures.get(k)
        if into is None:
            into = read.signatures[k] = SignatureAgg(catalog.signatures[k])
        into.count += agg.count
        into.files |= agg.files
        room = MAX_KEPT_OCCURRENCES - len(into.kept)
        if room > 0:
            into.kept.extend(agg.kept[:room])
        if agg.last is not None:
            into.last = agg.last
        for key in agg.first_by_attempt:
            into.first_by_attempt[key] = firsts[(k, key)]
    for k, n in src.suppressed.items():
        read.suppressed[k] = read.suppressed.get(k, 0) + n
    read.events.merge(src.events)
    read.attempt_boundaries.extend(src.attempt_boundaries)
    # metrics: the first record of a step across the bundle (each file kept its own first)
    for record in src.metric_records:
        if record.step not in seen_steps:
            seen_steps.add(record.step)
            read.metric_records.append(record)
    read.malformed_metric_lines += src.malformed_metric_lines
    if read.malformed_example is None:
        read.malformed_example = src.malformed_example
    read.eval_records += src.eval_records
    if src.step_progress is not None:
        read.step_progress, read.step_progress_occ = src.step_progress, src.step_progress_occ
    # the newest timestamped progress line (ties: the later), else the first one
    read.trainer_lines += src.trainer_lines
    newest = src.last_trainer_line
    if newest is not None:
        held = read.last_trainer_line
        if held is None or (newest.ts is not None and (held.ts is None or newest.ts >= held.ts)):
            read.last_trainer_line = newest
    # open phases: one finished in the file left the dict (a later start re-enters it at the end);
    # one only started keeps its place
    phases = {k: src.phases_open.get(k, occ) for k, occ in read.phases_open.items() if k not in part.phases_finished}
    for k, occ in src.phases_open.items():
        if k not in phases:
            phases[k] = occ
    read.phases_open = phases
    for phase, costs in src.phase_costs.items():
        into_costs = read.phase_costs.setdefault(phase, [])
        into_costs.extend(costs)
        if len(into_costs) > MAX_PHASE_COSTS:
            del into_costs[:len(into_costs) - MAX_PHASE_COSTS]
    read.steps_finished += src.steps_finished
    if src.genbuf_last_seen is not None:
        first_value, first_occ = part.genbuf_first
        if not (src.genbuf_last_change is first_occ and first_value == read.genbuf_last):
            read.genbuf_last_change = src.genbuf_last_change
        read.genbuf_last = src.genbuf_last
        read.genbuf_last_seen = src.genbuf_last_seen
    for engine, queue in src.stats.items():
        into_queue = read.stats.get(engine)
        if into_queue is None:
            into_queue = read.stats[engine] = deque(maxlen=queue.maxlen)
        into_queue.extend(queue)
    read.stats_count += src.stats_count
    read.stats_eras |= src.stats_eras
    room = MAX_EAGER_LINES - len(read.eager_lines)
    if room > 0:
        read.eager_lines.extend(src.eager_lines[:room])
    if read.engine_model is None:
        read.engine_model = src.engine_model
    for kind, name, occ in src.gpu_names:
        _add_gpu_name(read, kind, name, occ)
    read.batch_complete.extend(src.batch_complete)
    if len(read.batch_complete) > MAX_BATCH_COMPLETE:
        del read.batch_complete[:len(read.batch_complete) - MAX_BATCH_COMPLETE]
    for name, n in src.exc_breakdown.items():
        read.exc_breakdown[name] = read.exc_breakdown.get(name, 0) + n
    if src.exc_breakdown_occ is not None:
        read.exc_breakdown_occ = src.exc_breakdown_occ
    if src.use_tis is not None:
        read.use_tis = src.use_tis
    read.weight_reload += src.weight_reload
    read.weight_updates += src.weight_updates
    read.weight_reload_finished += src.weight_reload_finished
    if src.weight_update_first is not None and (read.weight_update_first is None or (
            src.weight_update_first.ts or 0) < (read.weight_update_first.ts or 0)):
        read.weight_update_first = src.weight_update_first
    if read.generator_init is None:
        read.generator_init = src.generator_init
    if read.source_rev is None:
        read.source_rev = src.source_rev
    return True


def _log_files(root: Path, capture_dir: Path | None) -> list[tuple[Path, str]]:
    files: list[tuple[Path, str]] = []
    for name in ("finelog.log", "finelog.stderr"):
        p = root / name
        if p.is_file():
            files.append((p, name))
    for d in LOG_DIRS:
        base = root / d
        if base.is_dir() and not base.is_symlink():
            for p in safe_walk(base):
                if _is_log(p):
                    files.append((p, p.relative_to(root).as_posix()))
    if capture_dir is not None:
        events = capture_dir / "events.json"
        if events.is_file() and not events.is_symlink():
            # the pods' Kubernetes events (written one field a line): reasons and messages such as
            # "The node was low on resource: memory" are scanned like log lines
            files.append((events, events.relative_to(root).as_posix()))
        for d in ("pod_logs", "slurm", "logs"):
            base = capture_dir / d
            if base.is_dir():
                for p in safe_walk(base):
                    if _is_log(p) and not p.name.endswith((".json",)):
                        files.append((p, p.relative_to(root).as_posix()))
    return files


def _slurm_leg(rel: str) -> str | None:
    name = rel.rsplit("/", 1)[-1]
    m = _SLURM_LEG_RE.search(name)
    if not m:
        return None
    return m.group(1) or m.group(2)


def read_bundle(root: Path, catalog: Catalog, *, capture_stamp: str | None = None,
                now_epoch: float | None = None) -> BundleRead:
    """Everything a diagnosis reads from the bundle at ``root``."""
    root = Path(root)
    read = BundleRead(root=root)
    if not root.exists():
        read.problems.append(ProblemNote(source=str(root), reason="bundle path does not exist"))
        return read
    if not root.is_dir():
        read.problems.append(ProblemNote(source=str(root), reason="bundle path is not a directory"))
        return read
    parts = root.resolve().parts
    if "jobs" in parts:
        i = len(parts) - 1 - parts[::-1].index("jobs")
        tail = parts[i + 1:]
        if len(tail) == 3 and tail[1] == "slurm":
            read.layout = "jupiter"
        elif len(tail) == 3:
            read.layout = "iris"
    # --- manifest
    manifest_path = root / "manifest.json"
    if manifest_path.exists() or manifest_path.is_symlink():
        try:
            manifest = read_json(manifest_path)
            if not isinstance(manifest, dict):
                raise JsonReadError("not a JSON object")
            read.manifest = manifest
            read.synced_at = parse_iso(manifest.get("synced_at")) or parse_iso(manifest.get("live_capture_at"))
            if manifest.get("cluster") == "jsc-jupiter" or str(manifest.get("job_id", "")).startswith("/slurm/"):
                read.layout = "jupiter"
            elif read.layout == "unknown" and manifest.get("cluster"):
                read.layout = "iris"
            _manifest_artifact_errors(read, manifest)
        except JsonReadError as exc:
            read.problems.append(ProblemNote(source="manifest.json", reason=str(exc)))
    # --- capture
    captures = list_captures(root)
    chosen = None
    if capture_stamp:
        chosen = next((c for c in captures if c.name == capture_stamp), None)
        if chosen is None:
            read.problems.append(ProblemNote(source=f"{CAPTURES_DIR}/{capture_stamp}", reason="requested capture does not exist"))
    elif captures:
        chosen = captures[-1]
    if chosen is not None:
        _read_capture(read, chosen)
    if chosen is not None:
        _capture_gpu_names(read, chosen, catalog.sets.get("gpu_node_label_keys") or [])
    if read.manifest is None and read.capture is None and "manifest.json" not in [p.source for p in read.problems]:
        read.problems.append(ProblemNote(source="manifest.json", reason="no manifest.json and no rlhealth capture"))
    scanner = scanner_for(catalog)      # before the trial reader: no compile thread when it forks
    reference = read.newest_evidence or now_epoch
    skip = {k: re.compile(s.skip_if_line_matches) for k, s in catalog.signatures.items() if s.skip_if_line_matches}
    files = _log_files(root, read.capture_dir)
    legs = sorted({leg for _, rel in files if (leg := _slurm_leg(rel))}, key=lambda x: int(x))
    bundle_leg = None
    if read.layout == "jupiter":
        job_id = str((read.manifest or {}).get("job_id") or "") if isinstance(read.manifest, dict) else ""
        tail = job_id.rsplit("/", 1)[-1]
        bundle_leg = tail if tail.isdigit() and len(tail) <= MAX_COUNT_DIGITS else root.name    # int() below
        has_finelog = any(rel == "finelog.log" for _, rel in files)
        if legs and bundle_leg not in legs and bundle_leg.isdigit():
            if has_finelog:      # the finelog is the bundle's own (current) chain leg
                legs = sorted(set(legs) | {bundle_leg}, key=lambda x: int(x))
            else:
                read.current_leg_missing = True
    read.leg_ids = legs
    plan: list[tuple[Path, str, int | None]] = []
    for path, rel in files:
        leg = _slurm_leg(rel)
        if rel in ("finelog.log", "finelog.stderr") and read.layout == "jupiter":
            leg = bundle_leg if bundle_leg in legs else (legs[-1] if legs else None)
        plan.append((path, rel, legs.index(leg) + 1 if leg in legs else None))
    # --- trials, started now: they need nothing from the logs. The forked trial reader, once the
    # trial directories are all claimed, claims log files too (``_LogWork``).
    trials_job = None
    log_work = None
    trace_root = root / "trace_jobs"
    if trace_root.is_dir() and not trace_root.is_symlink():
        log_work = _parallel_log_work(root, plan, catalog, reference, skip, scanner)
        aliases = dict(catalog.trial_exceptions.get("message_aliases") or {})
        try:
            trials_job = BackgroundSummary(trace_root, aliases, int(catalog.thresholds["salad_sample_trials"]),
                                           since=_current_attempt_start(read),
                                           after=log_work.in_reader if log_work is not None else None)
        except BaseException:
            if log_work is not None:
                log_work.close()
            raise
        if log_work is not None and not getattr(trials_job, "forked", False):
            log_work.close()
            log_work = None
    # --- logs
    seen_steps: set[int] = set()
    progress = scan_progress(len(files))
    parts: dict[int, _FileScan] = {}
    if log_work is not None:
        # this process claims files too (largest first); every file is merged in file order below
        claimed = 0
        while (index := log_work.claim()) is not None:
            if progress.enabled:
                progress.update(claimed, plan[index][1])
            claimed += 1
            try:
                parts[index] = log_work.scan_one(index)
            except Exception:  # noqa: BLE001 - routed again in order below, failing where it would
                pass
        log_work.close()
        read.trials = trials_job.result()
        for extra in trials_job.after_results:
            if isinstance(extra, dict):
                parts.update((i, p) for i, p in extra.items() if isinstance(p, _FileScan) and i not in parts)
    scanned_bytes = 0
    for index, (path, rel, attempt) in enumerate(plan):
        part = parts.pop(index, None)
        if part is not None and _merge_file_scan(read, part, seen_steps, catalog):
            if part.error is None:
                read.lines_read += part.lines
                read.log_files.append(rel)
            else:
                read.problems.append(ProblemNote(source=rel, reason=part.error))
            continue
        if progress.enabled and log_work is None:
            progress.update(index, f"{rel} ({human_bytes(scanned_bytes)} scanned)")
        router = _Router(read, catalog, reference, rel, attempt, skip, seen_steps)
        router.file_index = index
        try:
            read.lines_read += router.scan(scanner, path)
            read.log_files.append(rel)
        except OSError as exc:
            read.problems.append(ProblemNote(source=rel, reason=f"unreadable log: {exc.strerror or exc}"))
        if progress.enabled:
            try:
                scanned_bytes += path.stat().st_size
            except OSError:
                pass
    progress.close()
    _finish_stats(read, reference)
    _settle_occurrences(read)
    # --- trials (read in a forked process while the logs are scanned; see BackgroundSummary)
    if trials_job is not None:
        read.trace_dir_exists = True
        if read.trials is None:
            read.trials = trials_job.result()
    return read


def _parallel_log_work(root: Path, plan: list[tuple[Path, str, int | None]], catalog: Catalog,
                       reference: float | None, skip: dict[str, re.Pattern], scanner: Scanner) -> _LogWork | None:
    """The log files as work a forked trial reader can share (``_LogWork``), when worth it: two
    to MAX_PARALLEL_LOG_FILES files, PARALLEL_SCAN_MIN_BYTES in all, the fast routing on. None otherwise."""
    if not FAST_ROUTING or not 2 <= len(plan) <= MAX_PARALLEL_LOG_FILES:
        return None
    sizes = []
    for path, _, _ in plan:
        try:
            sizes.append(os.stat(path).st_size)
        except OSError:
            sizes.append(0)
    if sum(sizes) < PARALLEL_SCAN_MIN_BYTES:
        return None
    if max(sizes) >= scan_mod.NUMPY_MIN_BYTES:
        scanner.preload_numpy()     # imported once before the fork: its pages stay shared
    try:
        return _LogWork(root, plan, sizes, catalog, reference, skip, scanner)
    except OSError:
        return None


CONTINUATION_LOOKBACK_LINES = 200
CONTINUATION_LOOKBACK_BYTES = 32 * 1024
# Lines that continue the record above them rather than start one: traceback frames and source
# lines (indented), the traceback header, chained-exception separators, caret markers, blanks.
_CONTINUATION_LINE = re.compile(r"^(?:\s|$|Traceback \(most recent call last\)|During handling of the above exception|"
                                r"The above exception was the direct cause|\^+\s*$)")


def _continued_record_ts(hit: LineHit, reference_epoch: float | None) -> float | None:
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
        if not _CONTINUATION_LINE.match(_LOGGED_TRACE_PREFIX.sub("", strip_actor_prefix(line), count=1)):
            return None
    return None


def scan_log_file(path: Path, source: str, *, attempt: int | None = None, split_at_boundaries: bool = False,
                  catalog: Catalog) -> BundleRead:
    """One log file routed exactly as ``read_bundle`` routes it: signature occurrences (first per
    attempt), metric records in every serialization (WANDB_MIRROR JSON and the legacy python-dict
    blocks), step progress. ``split_at_boundaries``: attempts are numbered at the Iris boundary
    lines (0 before the first), as for a bundle's finelog; otherwise every line is ``attempt``.
    Every metric record is kept (no first-occurrence merge: the caller sees repeats)."""
    read = BundleRead(root=Path(path).parent)
    skip = {k: re.compile(s.skip_if_line_matches) for k, s in catalog.signatures.items() if s.skip_if_line_matches}
    router = _Router(read, catalog, None, source, None if split_at_boundaries else attempt, skip)
    router.is_finelog = split_at_boundaries
    read.lines_read = router.scan(scanner_for(catalog), Path(path))
    read.log_files.append(source)
    _finish_stats(read, None)
    _settle_occurrences(read)
    return read


def scan_signatures(files: list[tuple[Path, str]], catalog: Catalog,
                    reference_epoch: float | None = None) -> BundleRead:
    """Scan log files as ONE attempt with the diagnosis' scanner and routing: every signature the
    catalog recognised (after suppression and skip rules), with occurrences. Yearless timestamps
    take their year from ``reference_epoch`` (None: 1970, still ordered within the files)."""
    read = BundleRead(root=Path("."))
    scanner = scanner_for(catalog)
    skip = {k: re.compile(s.skip_if_line_matches) for k, s in catalog.signatures.items() if s.skip_if_line_matches}
    for index, (path, rel) in enumerate(files):
        router = _Router(read, catalog, reference_epoch, rel, 1, skip)
        router.file_index = index
        try:
            router.scan(scanner, path)
        except OSError:
            continue
    _settle_occurrences(read)
    return read


@dataclass
class LiveSignals:
    """What the captured logs of a live attempt say about a hang, for deciding which evidence to
    fetch before it disappears (flight-recorder dumps): the first hang-severity signature and the
    newest trainer progress line (with its timestamp when the line has one)."""
    hang: Occurrence | None
    hang_signature: str | None
    newest_progress_ts: float | None
    newest_progress_at: str | None     # "<source>:<line>"


def live_signals(files: list[tuple[Path, str]], catalog: Catalog) -> LiveSignals:
    read = scan_signatures(files, catalog)
    hang, hang_id = None, None
    for sig_id in sorted(read.signatures):
        agg = read.signatures[sig_id]
        first = agg.first
        if agg.signature.severity == "hang" and first is not None and (hang is None or earlier(first, hang)):
            hang, hang_id = first, sig_id
    stamped = [(occ.ts, f"{occ.source}:{occ.line}") for occ in [read.last_trainer_line] if occ is not None and occ.ts is not None]
    stamped += [(r.ts, f"{r.source}:{r.line}") for r in read.metric_records if r.ts is not None]
    ts, at = max(stamped) if stamped else (None, None)
    return LiveSignals(hang=hang, hang_signature=hang_id, newest_progress_ts=ts, newest_progress_at=at)


def _probe_failures(read: BundleRead, rel: str, probes: Any) -> None:
    """Failed probes recorded in capture.json become evidence problems (rules/capture_probes.yaml)."""
    if not isinstance(probes, list):
        return
    policy = capture_probe_policy()
    last: dict[tuple[str, str], dict] = {}
    for record in probes:
        if isinstance(record, dict) and isinstance(record.get("name"), str):
            key = (record["name"], str(record.get("api") or record.get("argv")))
            last[key] = record
    for (name, _), record in sorted(last.items()):
        error = record.get("error")
        if not error or name in policy["informational"]:
            continue
        rule = next((r for r in policy["required"] if name.startswith(r["prefix"])), None)
        what = rule["what"] if rule else name
        cause, sep, fix = str(error).partition("; next action: ")
        text = cause[:200] + (f"; next action: {fix[:400]}" if sep else "")
        read.problems.append(ProblemNote(source=f"{rel}/capture.json", reason=f"probe '{name}' failed ({what}): {text}",
                                         gate=rule["gate"] if rule else "none"))


def _manifest_artifact_errors(read: BundleRead, manifest: dict) -> None:
    """The watcher's own record of the sync (``rlhealth.probes.manifest``): failed artifacts, a
    finelog tail, sync-error files, skipped trace objects, the launch material for the mode."""
    read_manifest(read, manifest)

MAX_GPU_NAME_SIGHTINGS = 20


def _add_gpu_name(read: BundleRead, kind: str, name: str, occ: Occurrence) -> None:
    if len(read.gpu_names) < MAX_GPU_NAME_SIGHTINGS and not any(
            k == kind and n == name and o.source == occ.source for k, n, o in read.gpu_names):
        read.gpu_names.append((kind, name, occ))


def _capture_gpu_names(read: BundleRead, cap: Path, label_keys: list[str]) -> None:
    """GPU product names in the capture: the raw nvidia-smi inventories the live probes wrote
    (``raw/exec/<pod>/nvidia-smi.inventory.csv``, ``raw/nvidia-smi-inventory_<node>_<job>.csv``)
    and the GPU product labels in ``pods.json`` / ``nodes.json``."""
    inventories = sorted(cap.glob("raw/exec/*/nvidia-smi.inventory.csv")) + sorted(cap.glob("raw/nvidia-smi-inventory_*.csv"))
    for path, kind in [(p, "nvidia_smi") for p in inventories] + [(cap / n, "node_label") for n in ("pods.json", "nodes.json")]:
        try:
            if not path.is_file() or path.is_symlink() or path.stat().st_size > 64 * 1024 * 1024:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        rel = path.relative_to(read.root).as_posix()
        if kind == "nvidia_smi":
            sightings = [(row["line"], row["name"]) for row in parse_gpu_inventory(text)]
        else:
            sightings = [(line, value) for line, _, value in gpu_label_sightings(text, label_keys)]
        lines = text.split("\n")       # the parsers number lines by "\n", as the quote test reads them
        for line, name in sightings:
            _add_gpu_name(read, kind, name, Occurrence(source=rel, line=line, text=clean_line(lines[line - 1]).strip()))


def _current_attempt_start(read: BundleRead) -> float | None:
    """Start of the current attempt when the controller state says so and earlier attempts exist."""
    attempts = read.state.get("attempts") if isinstance(read.state, dict) else None
    if not isinstance(attempts, list) or len(attempts) < 2 or not isinstance(attempts[-1], dict):
        return None
    return parse_iso(attempts[-1].get("started_at"))


def _read_capture(read: BundleRead, cap: Path) -> None:
    rel = cap.relative_to(read.root).as_posix()
    read.capture_dir = cap
    try:
        capture = read_json(cap / "capture.json")
        if not isinstance(capture, dict):
            raise JsonReadError("not a JSON object")
        read.capture = capture
        read.captured_at = parse_iso(capture.get("captured_at"))
    except JsonReadError as exc:
        read.problems.append(ProblemNote(source=f"{rel}/capture.json", reason=str(exc)))
        try:
            read.captured_at = parse_iso(re.sub(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z.*$",
                                                r"\1-\2-\3T\4:\5:\6Z", cap.name))
        except re.error:
            pass
    if isinstance(read.capture, dict):
        _probe_failures(read, rel, read.capture.get("probes"))
    for name, attr in (("state.json", "state"), ("job.json", "job_info"), ("pods.json", "pods"),
                       ("gpu_health.json", "gpu_health"), ("flight_recorder/summary.json", "flight_recorder")):
        p = cap / name
        if p.exists():
            try:
                value = read_json(p)
                if not isinstance(value, dict):
                    raise JsonReadError("not a JSON object")
                setattr(read, attr, value)
            except JsonReadError as exc:
                read.problems.append(ProblemNote(source=f"{rel}/{name}", reason=str(exc)))
    polls = cap / "gpu_polls.jsonl"
    if polls.exists():
        bad = 0
        try:
            with open(polls, "rb") as handle:
                for raw in handle:
                    if len(read.gpu_polls) > 200_000:
                        break
                    try:
                        row = json.loads(raw)
                        if isinstance(row, dict) and "gpu" in row:
                            read.gpu_polls.append(row)
                        else:
                            bad += 1
                    except ValueError:
                        bad += 1
        except OSError as exc:
            read.problems.append(ProblemNote(source=f"{rel}/gpu_polls.jsonl", reason=f"unreadable: {exc}"))
        if bad and not read.gpu_polls:
            read.problems.append(ProblemNote(source=f"{rel}/gpu_polls.jsonl", reason=f"{bad} malformed lines, no usable poll",
                                             gate="resources"))
    stacks = cap / "stacks"
    if stacks.is_dir():
        for p in sorted(stacks.glob("*.txt")):
            try:
                with open(p, "rb") as handle:
                    read.stacks.append((p.relative_to(read.root).as_posix(), handle.read(256 * 1024).decode("utf-8", "replace")))
            except OSError:
                continue
