"""The evidence-bundle reader: the one replay path for offline and live diagnoses.

Reads a MarinSkyRL syncdown (Iris ``jobs/<cluster>/<user>/<job>/`` or Jupiter
``jobs/jsc-jupiter/slurm/<id>/``) plus rlhealth's own ``rlhealth/captures/<stamp>/``
(contract §2), never modifying anything. Every log file is scanned once with the
compiled signature + extractor database; its matched lines are fed to the extractors
(``rlhealth.probes.extract``: one measurement each, behind feed / merge / result; listed in
``rlhealth.probes.extractors``). The result (``BundleRead``) holds what each extractor measured
and a list of evidence problems; turning it into rule-engine facts is ``rlhealth.observe``'s
job. With a forked trial reader, the log files are shared with it (``_LogWork``): each file is
scanned into an extraction of its own, and those are merged in file order
(``Extraction.merge``): the same ``BundleRead`` as one in-order scan.
"""
from __future__ import annotations

import gc
import json
import os
import pickle
import re
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:   # the reader is handed the catalog; it never loads the rule base itself
    from rlhealth.catalog import Catalog, Signature
from rlhealth.facts import Occurrence, ProblemNote
from rlhealth.probes.backends import bundle_log_is_current_leg, layout_of_manifest, layout_of_path
from rlhealth.probes.capture import CAPTURES_DIR, capture_probe_policy
from rlhealth.probes.events import EventLog
from rlhealth.probes import extract
from rlhealth.probes.extract import Extraction, FileInfo, checked_keys  # noqa: F401 - checked_keys: the routing's, re-exported
from rlhealth.probes.extractors import extraction
from rlhealth.probes.extractors.engine_config import MAX_EAGER_LINES, add_gpu_name  # noqa: F401
from rlhealth.probes.extractors.rollouts import MAX_BATCH_COMPLETE  # noqa: F401
from rlhealth.probes.extractors.signatures import SignatureAgg, earlier  # noqa: F401 - the read's signature aggregates
from rlhealth.probes.extractors.stats import STATS_SAMPLES_PER_ENGINE  # noqa: F401
from rlhealth.probes.manifest import read_manifest
from rlhealth.probes.parse import MAX_COUNT_DIGITS
from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.parse.kubernetes import gpu_label_sightings
from rlhealth.probes.parse.nvidia_smi import parse_gpu_inventory
from rlhealth.probes.parse.timestamps import parse_iso
from rlhealth.probes import patterns as patterns_mod
from rlhealth.probes import scan as scan_mod
from rlhealth.probes.patterns import EXTRACTORS, scan_patterns  # noqa: F401 - EXTRACTORS: the pattern table, re-exported
from rlhealth.probes.parse import trials as tp_trials
from rlhealth.probes.parse.trials import BackgroundSummary, EarlyTrials, TrialSummary
from rlhealth.probes.scan import Pattern, Scanner
from rlhealth.probes.textio import JsonReadError, clean_line, read_json, safe_walk
from rlhealth.progress import ScanProgress

LOG_DIRS = ("pod_logs", "ray_vllm_logs", "slurm_logs", "ray_logs")
NON_LOG_SUFFIXES = (".json", ".jsonl", ".tsv", ".csv", ".parquet", ".pt", ".safetensors", ".gz", ".tar", ".png")
_SLURM_LEG_RE = re.compile(r"_(\d+)\.(?:out|err)$|^(?:slurm-)?(\d+)\.(?:out|err)(?:\.head)?$")   # .head: a probe's copy of the beginning


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
    weight_update_lines: list[tuple[float, str, int, str]] = field(default_factory=list)
    """Every dated weight-broadcast line as ``(ts, source, line, text)`` (file order, at most
    ``extractors.weights.MAX_WEIGHT_UPDATE_LINES``): the weight syncs that delimit the policy
    versions (steps) the coherence of agent output is judged per."""
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


# ----------------------------------------------------------------------- log files in parallel
PARALLEL_SCAN_MIN_BYTES = 32 * 1024 * 1024
"""Log bytes below which the diagnosing process scans every log file itself (the trial reader
then gets none: merging per-file outcomes would cost more than it saves)."""
MAX_PARALLEL_LOG_FILES = 1024
"""More log files than this are scanned in the diagnosing process only: every file's own scan is
held until the in-order merge (a few KiB each even when empty), and the file numbers travel as
4-byte tokens through one pipe written before the fork (well under its 64 KiB)."""


@dataclass
class _FileScan:
    """One log file routed on its own into a fresh ``Extraction`` (``part``), merged into the
    bundle's in file order (``Extraction.merge``). ``lines`` is None when reading it failed with
    ``error`` (what was routed before the failure is in ``part``, as in an in-order scan)."""
    index: int
    part: Extraction
    lines: int | None
    error: str | None


def _file_info(source: str, index: int, attempt: int | None, reference: float | None) -> FileInfo:
    return FileInfo(source, index, attempt, reference, is_finelog=source == "finelog.log" and attempt is None)


class _LogWork:
    """The log files of one bundle as work shared between the diagnosing process and its forked
    trial reader: file numbers, largest file first, as 4-byte tokens in one pipe written (and its
    write end closed) before the fork, so a 4-byte read claims one file and EOF means all claimed.
    Each claimed file is routed on its own (``scan_one``); the reader returns its ``_FileScan``s
    with its trial tally (pickled through the reader's pipe: each is bounded as the extractors'
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

    def scan_one(self, index: int, on_block: Callable[[int], None] | None = None) -> _FileScan:
        path, rel, attempt = self.plan[index]
        part = extraction(self.catalog, self.skip, self.reference, part=True)
        part.begin(_file_info(rel, index, attempt, self.reference))
        try:
            lines, error = part.scan(self.scanner, path, on_block), None
        except OSError as exc:
            lines, error = None, f"unreadable log: {exc.strerror or exc}"
        return _FileScan(index, part, lines, error)

    def scan_pickled(self, index: int) -> bytes:
        """``scan_one(index)`` pickled, as the reader sends it."""
        return pickle.dumps(self.scan_one(index), protocol=pickle.HIGHEST_PROTOCOL)

    def in_reader(self) -> dict[int, bytes]:
        """In the forked reader, once the trial chunks ran out: route claimed files until none is
        left, each pickled as soon as it is routed (``scan_pickled``: the pickling runs while the
        parent still scans, not all of it after the reader's last file, when the parent waits).
        A file that fails other than by OSError is left out: the parent routes it again in order
        (and meets the failure where an in-order scan would). ``received`` reads the result."""
        done: dict[int, bytes] = {}
        while (index := self.claim()) is not None:
            try:
                done[index] = self.scan_pickled(index)
            except Exception:  # noqa: BLE001 - see above
                continue
        return done


def received(extra: Any) -> dict[int, _FileScan]:
    """The files a reader routed (``_LogWork.in_reader``'s result, or None from a reader that
    failed), unpickled; a file whose part does not unpickle is left out (routed again in order)."""
    out: dict[int, _FileScan] = {}
    if not isinstance(extra, dict):
        return out
    for index, blob in extra.items():
        try:
            part = pickle.loads(blob) if isinstance(blob, bytes) else None
        except Exception:  # noqa: BLE001 - a torn part: the parent routes that file itself
            part = None
        if isinstance(part, _FileScan):
            out[index] = part
    return out


def _merge_file_scan(into: Extraction, part: _FileScan) -> bool:
    """Fold one file routed on its own into ``into`` exactly as if its lines had been routed after
    every line already there. False, leaving ``into`` untouched, when the part cannot decide it
    (the caller then routes the file again, in order)."""
    return into.merge(part.part)


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
                now_epoch: float | None = None, early_trials: EarlyTrials | None = None,
                when_scanned: Callable[[], None] | None = None) -> BundleRead:
    """Everything a diagnosis reads from the bundle at ``root``. ``early_trials``: a trial reader
    the caller started early (``EarlyTrials``), adopted here; the caller discards it after.
    ``when_scanned``: called once this process has scanned its share of the logs while forked
    readers still read theirs (not called when no reader was forked).

    The cyclic garbage collector is paused meanwhile (``collector_paused``)."""
    with collector_paused():
        return _read_bundle(root, catalog, capture_stamp, now_epoch, early_trials, when_scanned)


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off inside, as it was after. A read allocates many
    short-lived containers and keeps few, and builds no reference cycles worth collecting: each
    collection the allocations set off (gen0/gen1, over a hundred per GiB of logs) walks the young
    objects for nothing, about 4% of a scan's CPU. Reference counting frees as before; a
    collection on the next allocations after the read collects any cycle left."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_bundle(root: Path, catalog: Catalog, capture_stamp: str | None, now_epoch: float | None,
                 early_trials: EarlyTrials | None, when_scanned: Callable[[], None] | None) -> BundleRead:
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
        read.layout = layout_of_path(parts[i + 1:])
    # --- manifest
    manifest_path = root / "manifest.json"
    if manifest_path.exists() or manifest_path.is_symlink():
        try:
            manifest = read_json(manifest_path)
            if not isinstance(manifest, dict):
                raise JsonReadError("not a JSON object")
            read.manifest = manifest
            read.synced_at = parse_iso(manifest.get("synced_at")) or parse_iso(manifest.get("live_capture_at"))
            read.layout = layout_of_manifest(manifest, read.layout)
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
    if bundle_log_is_current_leg(read.layout):
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
        if rel in ("finelog.log", "finelog.stderr") and bundle_log_is_current_leg(read.layout):
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
            trials_job = BackgroundSummary(trace_root, aliases, int(catalog.thresholds["coherence_sample_pool_trials"]),
                                           since=_current_attempt_start(read),
                                           after=log_work.in_reader if log_work is not None else None,
                                           early=early_trials)
        except BaseException:
            if log_work is not None:
                log_work.close()
            raise
        if log_work is not None and not getattr(trials_job, "forked", False):
            log_work.close()
            log_work = None
    # --- logs: a map of extractions over the files (some in the forked reader) folded in file order
    into = extraction(catalog, skip, reference)
    progress = ScanProgress([path for path, _, _ in plan])
    on_block = progress.advance if progress.enabled else None
    parts: dict[int, _FileScan] = {}
    if log_work is not None:
        # this process claims files too (largest first); every file is merged in file order below
        while (index := log_work.claim()) is not None:
            progress.start_file(plan[index][1])
            try:
                parts[index] = log_work.scan_one(index, on_block)
            except Exception:  # noqa: BLE001 - routed again in order below, failing where it would
                pass
            trials_job.take_sent()      # a reader done with the trials: its tally taken now, not at the end
        log_work.close()
        if when_scanned is not None:
            when_scanned()
        progress.note("the trial reader finishes the other files and the trial directories")
        read.trials = trials_job.result(on_chunk=progress.trials if progress.enabled else None, outputs=False)
        for extra in trials_job.after_results:
            parts.update((i, p) for i, p in received(extra).items() if i not in parts)
    for index, (path, rel, attempt) in enumerate(plan):
        part = parts.pop(index, None)
        if part is not None and _merge_file_scan(into, part):
            if part.error is None:
                read.lines_read += part.lines
                read.log_files.append(rel)
            else:
                read.problems.append(ProblemNote(source=rel, reason=part.error))
            continue
        progress.start_file(rel)
        into.begin(_file_info(rel, index, attempt, reference))
        try:
            read.lines_read += into.scan(scanner, path, on_block)
            read.log_files.append(rel)
        except OSError as exc:
            read.problems.append(ProblemNote(source=rel, reason=f"unreadable log: {exc.strerror or exc}"))
    into.result(read)
    # --- trials (read in a forked process while the logs are scanned; see BackgroundSummary)
    if trials_job is not None:
        read.trace_dir_exists = True
        if read.trials is None:
            read.trials = trials_job.result(on_chunk=progress.trials if progress.enabled else None, outputs=False)
        # the coherence sample: the newest trials of each step, the steps delimited by the weight syncs
        thr = catalog.thresholds
        syncs = [ts for ts, *_ in tp_trials.weight_syncs(read.weight_update_lines, thr["weight_sync_group_s"])]
        trials_job.read_outputs(read.trials, (int(thr["salad_sample_trials"]), int(thr["coherence_step_max_samples"]), syncs))
    progress.close()
    return read


def _parallel_log_work(root: Path, plan: list[tuple[Path, str, int | None]], catalog: Catalog,
                       reference: float | None, skip: dict[str, re.Pattern], scanner: Scanner) -> _LogWork | None:
    """The log files as work a forked trial reader can share (``_LogWork``), when worth it: two
    to MAX_PARALLEL_LOG_FILES files, PARALLEL_SCAN_MIN_BYTES in all, the fast routing on. None otherwise."""
    if not extract.FAST_ROUTING or not 2 <= len(plan) <= MAX_PARALLEL_LOG_FILES:
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


def scan_log_file(path: Path, source: str, *, attempt: int | None = None, split_at_boundaries: bool = False,
                  catalog: Catalog) -> BundleRead:
    """One log file routed exactly as ``read_bundle`` routes it: signature occurrences (first per
    attempt), metric records in every serialization (WANDB_MIRROR JSON and the legacy python-dict
    blocks), step progress. ``split_at_boundaries``: attempts are numbered at the Iris boundary
    lines (0 before the first), as for a bundle's finelog; otherwise every line is ``attempt``.
    Every metric record is kept (no first-occurrence merge: the caller sees repeats)."""
    read = BundleRead(root=Path(path).parent)
    skip = {k: re.compile(s.skip_if_line_matches) for k, s in catalog.signatures.items() if s.skip_if_line_matches}
    into = extraction(catalog, skip, None, first_record_per_step=False)
    into.begin(FileInfo(source, 0, None if split_at_boundaries else attempt, None, is_finelog=split_at_boundaries))
    read.lines_read = into.scan(scanner_for(catalog), Path(path))
    read.log_files.append(source)
    into.result(read)
    return read


def scan_signatures(files: list[tuple[Path, str]], catalog: Catalog,
                    reference_epoch: float | None = None) -> BundleRead:
    """Scan log files as ONE attempt with the diagnosis' scanner and routing: every signature the
    catalog recognised (after suppression and skip rules), with occurrences. Yearless timestamps
    take their year from ``reference_epoch`` (None: 1970, still ordered within the files)."""
    read = BundleRead(root=Path("."))
    scanner = scanner_for(catalog)
    skip = {k: re.compile(s.skip_if_line_matches) for k, s in catalog.signatures.items() if s.skip_if_line_matches}
    into = extraction(catalog, skip, reference_epoch, first_record_per_step=False)
    for index, (path, rel) in enumerate(files):
        into.begin(FileInfo(rel, index, 1, reference_epoch))
        try:
            into.scan(scanner, path)
        except OSError:
            continue
    into.result(read)
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
            add_gpu_name(read.gpu_names, kind, name, Occurrence(source=rel, line=line, text=clean_line(lines[line - 1]).strip()))


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
