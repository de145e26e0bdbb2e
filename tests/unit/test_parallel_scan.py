"""The log files scanned one by one and merged in file order (``probes.bundle._LogWork``,
``Extraction.merge``: the path a forked trial reader shares the logs through) give exactly what one
in-order scan gives: every ``BundleRead`` field (order included) and byte-identical reports.

Compared on every incident (each bundle hard-linked into a copy with a ``trace_jobs/`` so the
parallel path is taken), with the files routed by "the reader" (scanned, pickled and unpickled as
they travel through the reader's pipe), by the diagnosing process, and split between them; on
generated multi-file bundles built for the cross-file cases (the same engine's stats in two files,
a metric step in two files, first-seen values only in a later file, step progress and generation
buffer values repeated across files, phases opened in one file and closed in the next, capped
lists filled by several files, first occurrences whose timestamps go backwards, a vanished file, a
file failing mid-read); and with a real forked reader, including one that dies and one that fails
on a file (the diagnosing process routes those files itself).
"""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import time
from array import array
from collections import deque
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import BaseModel

from rlhealth.catalog import Signature, load_catalog
from rlhealth.diagnose import diagnose
from rlhealth.probes import bundle as bundle_mod
from rlhealth.probes import extract as extract_mod
from rlhealth.probes.extractors import extraction
from rlhealth.probes.extractors import signatures as signatures_mod
from rlhealth.probes.events import EventLog, LogEvent
from rlhealth.probes import scan as scan_mod
from rlhealth.probes.parse import trials as trials_mod
from rlhealth.render import render
from rlhealth.usage import parse_now

from corpus import incident_dirs, load_expected

NOW = datetime(2026, 8, 3, 12, 5, tzinfo=timezone.utc)


# ----------------------------------------------------------------------------- canonical form
def canonical(value):
    """Every field, in order (dicts as item lists, sets sorted): equal iff the reads are equal."""
    if isinstance(value, Signature):
        return ("signature", value.id)
    if isinstance(value, EventLog):
        return ("events", sorted((repr(k), n, canonical(first), canonical(last)) for k, (n, first, last) in value.by_key.items()),
                value.total, value.dropped)
    if isinstance(value, LogEvent):
        return ("event", [(name, canonical(getattr(value, name))) for name in LogEvent.__slots__])
    if isinstance(value, BaseModel):
        return (type(value).__name__, canonical(value.model_dump()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, [(f.name, canonical(getattr(value, f.name))) for f in dataclasses.fields(value)])
    if isinstance(value, dict):
        return ("dict", [(canonical(k), canonical(v)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(repr(canonical(v)) for v in value))
    if isinstance(value, (list, tuple, deque, array)):
        return (type(value).__name__, [canonical(v) for v in value], getattr(value, "maxlen", None))
    if isinstance(value, Path):
        return ("path", str(value))
    assert value is None or isinstance(value, (str, int, float, bool)), type(value)
    return value


SCAN_FIELDS = {
    "lines_read", "log_files", "problems", "signatures", "suppressed", "attempt_boundaries", "metric_records",
    "malformed_metric_lines", "malformed_example", "eval_records", "step_progress", "step_progress_occ",
    "last_trainer_line", "trainer_lines", "phases_open", "phase_costs", "steps_finished", "genbuf_last",
    "genbuf_last_change", "genbuf_last_seen", "stats", "stats_count", "stats_eras", "eager_lines", "engine_model",
    "gpu_names", "batch_complete", "exc_breakdown", "exc_breakdown_occ", "use_tis", "weight_reload",
    "weight_updates", "weight_update_first", "weight_update_lines", "weight_reload_finished",
    "generator_init", "source_rev", "events"}
"""The ``BundleRead`` fields the log scan writes: ``lines_read``, ``log_files``, ``problems`` by
``read_bundle``, every other one by the ``result`` of exactly one extractor (which merges it)."""
NOT_SCANNED = {
    "root", "layout", "manifest", "capture_dir", "capture", "captured_at", "synced_at", "state", "job_info",
    "gpu_health", "flight_recorder", "gpu_polls", "pods", "stacks", "leg_ids", "trials", "trace_dir_exists",
    "current_leg_missing", "launch_material"}


def test_every_bundle_read_field_is_merged_or_not_scanned():
    """A new ``BundleRead`` field fails here until it is merged (and listed above) or listed as
    not written by the log routing."""
    assert {f.name for f in dataclasses.fields(bundle_mod.BundleRead)} == SCAN_FIELDS | NOT_SCANNED
    assert not SCAN_FIELDS & NOT_SCANNED


class _Unset(list):
    """A field value no extractor wrote (a list: ``gpu_names`` is extended from what is there)."""


def test_every_scanned_field_is_written_by_exactly_one_extractor():
    """Each extractor's ``result`` writes its own fields; together, every field the scan writes
    except the read's own bookkeeping. A new field an extractor writes fails here until listed."""
    written: dict[str, str] = {}
    for ex in extraction(load_catalog(), {}, None).extractors:
        read = bundle_mod.BundleRead(root=Path("."))
        unset = {name: _Unset() for name in SCAN_FIELDS}
        for name, value in unset.items():
            setattr(read, name, value)
        ex.result(read)
        for name in SCAN_FIELDS:
            if getattr(read, name) is not unset[name]:
                assert name not in written, (name, written.get(name), type(ex).__name__)
                written[name] = type(ex).__name__
    assert set(written) == SCAN_FIELDS - {"lines_read", "log_files", "problems"}


# ----------------------------------------------------------------------------- paths
class _Merges:
    def __init__(self):
        self.merged = self.rescanned = 0


def _use_path(monkeypatch, mode: str, merges: _Merges | None = None, reader_share: float = 1.0):
    """``mode``: "sequential" (one in-order scan), "reader" (the stand-in reader claims a share of the
    files first; its scans are pickled and unpickled), "parent" (the diagnosing process scans all)."""
    monkeypatch.setattr(extract_mod, "FAST_ROUTING", True)
    monkeypatch.setattr(bundle_mod, "PARALLEL_SCAN_MIN_BYTES", 1 << 62 if mode == "sequential" else 0)

    class InProcessTrials:
        def __init__(self, trace_root, aliases, sample_size, *, since=None, workers=4, after=None, early=None):
            self.args = (trace_root, aliases, sample_size, since)
            self.forked = after is not None
            self.after_results = []
            if self.forked and mode == "reader":
                work = after.__self__
                share = {}
                for _ in range(max(1, int(len(work.plan) * reader_share))):
                    index = work.claim()
                    if index is None:
                        break
                    share[index] = work.scan_pickled(index)
                self.after_results = [pickle.loads(pickle.dumps(share))]

        def result(self, on_chunk=None, *, outputs=True):
            trace_root, aliases, sample_size, since = self.args
            self.summary = trials_mod.BackgroundSummary(trace_root, aliases, sample_size, workers=1, since=since)
            return self.summary.result(on_chunk, outputs=outputs)

        def take_sent(self):
            pass            # nothing forked: nothing is sent

        def read_outputs(self, summary, select=None):
            self.summary.read_outputs(summary, select)

    monkeypatch.setattr(bundle_mod, "BackgroundSummary", InProcessTrials)
    if merges is not None:
        _count_merges(monkeypatch, merges)


def _count_merges(monkeypatch, merges: _Merges) -> None:
    merge = bundle_mod._merge_file_scan

    def counted(into, part):
        done = merge(into, part)
        if done:
            merges.merged += 1
        else:
            merges.rescanned += 1
        return done

    monkeypatch.setattr(bundle_mod, "_merge_file_scan", counted)


def _read(bundle: Path, now: datetime = NOW):
    return canonical(bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=now.timestamp()))


def _with_trace_dir(src: Path, dst: Path) -> Path:
    """A hard-linked copy of a bundle that has a ``trace_jobs/`` (so the trial reader, and with it
    the parallel log path, is used)."""
    shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    (dst / "trace_jobs").mkdir(exist_ok=True)
    return dst


# ----------------------------------------------------------------------------- the incident corpus
def test_incidents_identical_reads_and_reports(tmp_path, monkeypatch):
    incidents = incident_dirs()
    assert len(incidents) >= 28
    merges = _Merges()
    differ = []
    for i, d in enumerate(incidents):
        expected = load_expected(d)
        now, mode_arg = parse_now(expected["now"]), expected.get("mode_arg")
        bundle = _with_trace_dir(d / "bundle", tmp_path / f"{i:03d}" / "jobs" / "c" / "u" / d.name)
        outcomes = {}
        for mode, share in (("sequential", 1.0), ("reader", 1.0), ("reader", 0.5), ("parent", 1.0)):
            with monkeypatch.context() as m:
                _use_path(m, mode, merges if mode != "sequential" else None, share)
                report = diagnose(bundle, now=now, mode_override=mode_arg)
                outcomes[(mode, share)] = (_read(bundle, now), render(report, "json"), render(report, "markdown"))
        if len(set(map(repr, outcomes.values()))) != 1:
            differ.append(d.name)
    assert differ == []
    # the merge really ran: every file of every bundle with two log files or more, in the 3 merging
    # paths, each read twice (the diagnosis and the read compared)
    listed = [bundle_mod._log_files(d / "bundle", (bundle_mod.list_captures(d / "bundle") or [None])[-1]) for d in incidents]
    multi = [len(files) for files in listed if len(files) >= 2]
    assert len(multi) >= 8
    assert merges.merged + merges.rescanned == 6 * sum(multi) and merges.rescanned < merges.merged / 10


# ----------------------------------------------------------------------------- cross-file cases
ENGINE = "(AsyncVLLMInferenceEngine pid=3100, ip=10.1.0.11)"
ENTRY = "(skyrl_entrypoint pid=4120)"


def _iso(second: int) -> str:
    return f"2026-08-03 10:{second // 60:02d}:{second % 60:02d}.000"


def _lg(second: int | None, msg: str, level: str = "INFO") -> str:
    stamp = _iso(second) if second is not None else "no time here"
    return f"{ENTRY} {stamp} | {level:<8} | skyrl_train.trainer:train:412 - {msg}"


def _stats(second: int, gen: float) -> str:
    return (f"{ENGINE} INFO 08-03 10:{second // 60:02d}:{second % 60:02d} [loggers.py:259] Engine 000: Avg prompt throughput: "
            f"10.0 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: 50 reqs, Waiting: 0 reqs, "
            f"GPU KV cache usage: 30.0%, Prefix cache hit rate: 40.0%")


def _wandb(second: int, step: int, loss: float) -> str:
    metrics = {"policy/policy_loss": loss, "trainer/global_step": step, "reward/avg_raw_reward": 0.5}
    return _lg(second, f"WANDB_MIRROR kind=train step={step} metrics={json.dumps(metrics, sort_keys=True)}")


def _cross_file_bundle(root: Path) -> Path:
    """finelog.log then pod_logs/a.log ... d.log (the scan's file order)."""
    bundle = root / "jobs" / "cw-us-east-02a" / "u" / "cross"
    (bundle / "pod_logs").mkdir(parents=True)
    (bundle / "trace_jobs").mkdir()
    (bundle / "manifest.json").write_text(json.dumps({"cluster": "cw-us-east-02a", "job_id": "/u/cross",
                                                      "synced_at": "2026-08-03T12:00:00Z"}))
    finelog = ["task=/u/cross/0 | [iris setup] step 1/2"]
    finelog += [_lg(10, "Started: 'step'"), _lg(11, "Started: 'generate'"), _lg(12, "Started: 'ref'")]
    finelog += [_wandb(20 + s, s, 0.01 * s) for s in range(1, 6)]
    finelog += [_lg(30, "Training Step Progress: 5 / 100"), _lg(31, "Generation Buffer Progress: 7/32 [00:01<?, ?it/s]")]
    finelog += [_lg(32, "Heartbeat monitor timed out", "ERROR"), _lg(33, "Batch generation complete: 31/32 successful, 1 failed instances, 1 masked")]
    finelog += [_lg(34, "Exception breakdown: {'VerifierTimeoutError': 1}", "WARNING"), _stats(35, 2500.0)]
    finelog += [_lg(36 + i % 20, "enforce_eager=True") for i in range(30)]
    finelog += ["task=/u/cross/0 | [iris setup] step 1/2", _lg(200, "Heartbeat monitor timed out", "ERROR")]
    a = [_stats(40 + i % 20, 2600.0 + i) for i in range(300)]            # the same engine as in the finelog
    a += [_wandb(60, 5, 9.9), _wandb(61, 6, 0.06)]                      # step 5 again (the finelog's wins)
    a += [_lg(62, "Training Step Progress: 5 / 100"), _lg(63, "Generation Buffer Progress: 7/32 [00:02<?, ?it/s]")]
    a += [_lg(64, "Finished: 'generate', time cost: 3.00s"), _lg(65, "Started: 'generate'"), _lg(66, "Started: 'step'")]
    a += [_lg(67 + i % 30, "Batch generation complete: 32/32 successful, 0 failed instances, 0 masked") for i in range(190)]
    a += [_lg(70, "Exception breakdown: {'AgentTimeoutError': 2, 'VerifierTimeoutError': 1}", "WARNING")]
    a += [_lg(71 + i % 20, "enforce_eager=False") for i in range(30)]
    a += [_lg(45, "Heartbeat monitor timed out", "ERROR")]
    # in order, the untimestamped first one (no line before it) cannot replace a.log's first (another
    # file, no common clock), 25 does (earlier), 50 does not, 15 does
    b = [_lg(None, "Heartbeat monitor timed out", "ERROR"), _lg(25, "Heartbeat monitor timed out", "ERROR"),
         _lg(50, "Heartbeat monitor timed out", "ERROR"), _lg(15, "Heartbeat monitor timed out", "ERROR")]
    b += ["[core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B', enforce_eager=False",
         _lg(80, "TerminalBenchGenerator initialized: Concurrent trials: 256"), _lg(81, "MarinSkyRL now at 3f9c2a1e7b"),
         _lg(82, "'use_tis': True"), _lg(82, "update_weights: received 18867 tensors via NCCL broadcast"),
         _lg(83, "finish_weight_reload done"), "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)",
         _lg(84, "Generation Buffer Progress: 8/32 [00:03<?, ?it/s]"), _lg(85, "Generation Buffer Progress: 8/32 [00:04<?, ?it/s]"),
         _lg(86, "Finished: 'ref', time cost: 1.00s"), _lg(87, "Training Step Progress: 6 / 100")]
    b += [_stats(88 + i % 10, 2700.0 + i) for i in range(200)]
    b += [_lg(90 + i % 5, "Batch generation complete: 30/32 successful, 2 failed instances, 0 masked") for i in range(20)]
    c = [_lg(None, "Training Step Progress: 6 / 100"), _lg(95, "Generation Buffer Progress: 8/32 [00:05<?, ?it/s]"),
         _lg(96, "MarinSkyRL now at 0000000"), "[core.py:93] Initializing a V1 LLM engine with config: model='other'"]
    d = [_lg(97, "Generation Buffer Progress: 8/32 [00:06<?, ?it/s]")]        # no change after b.log's 8/32
    d += [_lg(5, "update_weights: received 18867 tensors via NCCL broadcast")]  # dated before b.log's: still not the first
    for name, lines in (("finelog.log", finelog), ("pod_logs/a.log", a), ("pod_logs/b.log", b), ("pod_logs/c.log", c),
                        ("pod_logs/d.log", d)):
        (bundle / name).write_text("\n".join(lines) + "\n")
    return bundle


def _all_paths(bundle: Path, monkeypatch, block_bytes: int | None = None) -> dict:
    outcomes = {}
    for mode, share in (("sequential", 1.0), ("reader", 1.0), ("reader", 0.5), ("parent", 1.0)):
        with monkeypatch.context() as m:
            _use_path(m, mode, None, share)
            if block_bytes is not None:
                original = scan_mod.Scanner.iter_blocks
                m.setattr(scan_mod.Scanner, "iter_blocks",
                          lambda self, path, bb=block_bytes, sink=None: original(self, path, bb, sink=sink))
            report = diagnose(bundle, now=NOW)
            outcomes[(mode, share)] = (_read(bundle), render(report, "json"), render(report, "markdown"))
    return outcomes


def _same(outcomes: dict) -> None:
    first = outcomes[("sequential", 1.0)]
    for key, got in outcomes.items():
        assert got[0] == first[0], key
        assert got[1] == first[1] and got[2] == first[2], key


def test_cross_file_state_merges_as_in_order(tmp_path, monkeypatch):
    bundle = _cross_file_bundle(tmp_path)
    merges = _Merges()
    with monkeypatch.context() as m:
        _use_path(m, "reader", merges)
        read = bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=NOW.timestamp())
    # the case is what it claims to be
    assert read.log_files == ["finelog.log", "pod_logs/a.log", "pod_logs/b.log", "pod_logs/c.log", "pod_logs/d.log"]
    assert len(read.stats) == 1 and len(next(iter(read.stats.values()))) == bundle_mod.STATS_SAMPLES_PER_ENGINE
    assert read.stats_count == 501
    assert [r.step for r in read.metric_records] == [1, 2, 3, 4, 5, 6]
    assert read.metric_records[4].source == "finelog.log"
    assert read.engine_model[0] == "Qwen/Qwen3-8B" and read.generator_init.source == "pod_logs/b.log"
    assert read.source_rev.source == "pod_logs/b.log" and read.use_tis is True and read.weight_reload == 1
    assert read.weight_updates == 2 and read.weight_reload_finished == 1 and read.weight_update_first.source == "pod_logs/b.log"
    assert len(read.eager_lines) == bundle_mod.MAX_EAGER_LINES and len(read.batch_complete) == bundle_mod.MAX_BATCH_COMPLETE
    assert read.exc_breakdown == {"VerifierTimeoutError": 2, "AgentTimeoutError": 2}
    assert read.genbuf_last_change.source == "pod_logs/b.log" and read.genbuf_last_seen.source == "pod_logs/d.log"
    assert list(read.phases_open) == ["step", "generate"] and read.phases_open["step"].source == "pod_logs/a.log"
    heartbeat = read.signatures["nccl_heartbeat_monitor_timeout"]
    assert heartbeat.count == 7 and heartbeat.first_by_attempt[1].source == "finelog.log"
    first = heartbeat.first_by_attempt[-1]
    assert first.source == "pod_logs/b.log" and first.ts == datetime(2026, 8, 3, 10, 0, 15, tzinfo=timezone.utc).timestamp()
    # step progress "5 / 100" and "6 / 100" repeat at the start of a.log and c.log: those two are
    # routed again in order; the others merge
    assert (merges.merged, merges.rescanned) == (3, 2)
    _same(_all_paths(bundle, monkeypatch))


def test_first_occurrence_needing_a_fold_not_kept_rescans(tmp_path, monkeypatch):
    """More record-early occurrences than MAX_FIRST_CHAINS, and the prior first falls beyond them."""
    bundle = _cross_file_bundle(tmp_path)
    (bundle / "pod_logs" / "a.log").write_text(_lg(60, "Heartbeat monitor timed out", "ERROR") + "\n")
    # record-early at 100, 95, ... 65 (the 8 kept), then 55 < 60: the one a merge would need
    (bundle / "pod_logs" / "b.log").write_text("\n".join(
        _lg(100 - i, "Heartbeat monitor timed out", "ERROR") for i in range(0, 90, 5)) + "\n")
    (bundle / "pod_logs" / "c.log").unlink()
    (bundle / "pod_logs" / "d.log").unlink()
    merges = _Merges()
    with monkeypatch.context() as m:
        _use_path(m, "reader", merges)
        bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=NOW.timestamp())
    assert merges.rescanned == 1
    with monkeypatch.context() as m:
        m.setattr(signatures_mod, "MAX_FIRST_CHAINS", 64)
        merges = _Merges()
        _use_path(m, "reader", merges)
        bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=NOW.timestamp())
        assert merges.rescanned == 0
    _same(_all_paths(bundle, monkeypatch))


def test_small_blocks_same(tmp_path, monkeypatch):
    _same(_all_paths(_cross_file_bundle(tmp_path), monkeypatch, block_bytes=4096))


def test_vanished_file_same_problem(tmp_path, monkeypatch):
    bundle = _cross_file_bundle(tmp_path)
    listed = bundle_mod._log_files

    def with_a_vanished_file(root, capture_dir):
        files = listed(root, capture_dir)
        return files[:2] + [(root / "pod_logs" / "gone.log", "pod_logs/gone.log")] + files[2:]

    monkeypatch.setattr(bundle_mod, "_log_files", with_a_vanished_file)
    outcomes = _all_paths(bundle, monkeypatch)
    _same(outcomes)
    assert "pod_logs/gone.log" in outcomes[("sequential", 1.0)][1] and "unreadable log" in outcomes[("sequential", 1.0)][1]


def test_file_failing_mid_read_same(tmp_path, monkeypatch):
    """What was routed before the failure stays (as in order), the file is an unreadable log."""
    bundle = _cross_file_bundle(tmp_path)
    original = scan_mod.Scanner.iter_blocks

    def failing(self, path, block_bytes=scan_mod.BLOCK_BYTES, sink=None):
        blocks = 0
        for item in original(self, path, 4096, sink=sink):
            yield item
            blocks += 1
            if Path(path).name == "a.log" and blocks == 3:
                raise OSError(5, "Input/output error")

    monkeypatch.setattr(scan_mod.Scanner, "iter_blocks", failing)
    outcomes = _all_paths(bundle, monkeypatch)
    _same(outcomes)
    read = outcomes[("sequential", 1.0)][0]
    assert "unreadable log: Input/output error" in repr(read) and "pod_logs/a.log" in repr(read)


# ----------------------------------------------------------------------------- a real forked reader
def _forking(monkeypatch):
    monkeypatch.setattr(extract_mod, "FAST_ROUTING", True)
    monkeypatch.setattr(bundle_mod, "PARALLEL_SCAN_MIN_BYTES", 0)
    monkeypatch.setattr(trials_mod, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(trials_mod, "PROCESS_CHUNK", 1)
    monkeypatch.setattr(trials_mod, "may_fork", lambda: True)     # idle threads other tests left behind
    monkeypatch.setattr(trials_mod, "cpus", lambda: 2)


def _bundle_with_trials(tmp_path: Path) -> Path:
    bundle = _cross_file_bundle(tmp_path)
    for i in range(4):
        trial = bundle / "trace_jobs" / f"t{i}"
        trial.mkdir()
        (trial / "result.json").write_text(json.dumps({"trial_name": f"t{i}", "verifier_result": {"rewards": {"reward": 1.0}}}))
    return bundle


def _sequential_outcome(bundle: Path, monkeypatch):
    with monkeypatch.context() as m:
        _use_path(m, "sequential")
        report = diagnose(bundle, now=NOW)
        return _read(bundle), render(report, "json"), render(report, "markdown")


def test_forked_reader_shares_the_logs(tmp_path, monkeypatch):
    bundle = _bundle_with_trials(tmp_path)
    expected = _sequential_outcome(bundle, monkeypatch)
    results = []
    with monkeypatch.context() as m:
        _forking(m)
        original = trials_mod.BackgroundSummary.result

        def result(self, **kw):
            summary = original(self, **kw)
            results.extend(self.after_results)
            return summary

        m.setattr(trials_mod.BackgroundSummary, "result", result)
        _reader_claims_first(m)
        report = diagnose(bundle, now=NOW)
    got = (_read(bundle), render(report, "json"), render(report, "markdown"))
    assert got == expected
    assert len(results) == 1 and isinstance(results[0], dict) and results[0]     # the reader routed files


def _reader_claims_first(m) -> None:
    """This process waits before each claim of a log file, so the reader (done with its few trials)
    claims some."""
    parent = os.getpid()
    claim = bundle_mod._LogWork.claim
    m.setattr(bundle_mod._LogWork, "claim", lambda self: (time.sleep(0.2) if os.getpid() == parent else None) or claim(self))


@pytest.mark.parametrize("failure", ["dies", "raises"])
def test_a_failing_reader_loses_no_file(tmp_path, monkeypatch, failure):
    """A reader that dies after claiming a file, or fails on every file it claims: the diagnosing
    process routes those files itself, in order."""
    bundle = _bundle_with_trials(tmp_path)
    expected = _sequential_outcome(bundle, monkeypatch)
    parent = os.getpid()
    with monkeypatch.context() as m:
        _forking(m)
        scan_one = bundle_mod._LogWork.scan_one

        def failing(self, index):
            if os.getpid() != parent:
                if failure == "dies":
                    os._exit(7)
                raise RuntimeError("reader bug")
            return scan_one(self, index)

        m.setattr(bundle_mod._LogWork, "scan_one", failing)
        _reader_claims_first(m)
        merges = _Merges()
        _count_merges(m, merges)
        report = diagnose(bundle, now=NOW)
    got = (_read(bundle), render(report, "json"), render(report, "markdown"))
    assert got == expected
    assert merges.merged < 4        # the files the reader claimed were routed again, in order


def test_small_bundle_forks_nothing(monkeypatch):
    """Below the thresholds no reader is forked and the log files are not made claimable work."""
    d = next(d for d in incident_dirs() if d.name.endswith("nan-loss"))
    monkeypatch.setattr(bundle_mod, "_LogWork", None)                     # would fail if used
    monkeypatch.setattr(trials_mod.multiprocessing, "get_context", None)  # would fail if a reader forked
    report = diagnose(d / "bundle", now=parse_now(load_expected(d)["now"]))
    assert report.verdict


def test_when_scanned_follows_this_process_share_with_the_collector_paused(tmp_path, monkeypatch):
    """``read_bundle``'s ``when_scanned`` is called once, after this process scanned its share and
    before the reader's results are gathered; the garbage collector is off during the whole read
    and as it was after it."""
    import gc
    bundle = _bundle_with_trials(tmp_path)
    calls = []
    with monkeypatch.context() as m:
        _forking(m)
        gathered = trials_mod.BackgroundSummary.result
        m.setattr(trials_mod.BackgroundSummary, "result",
                  lambda self, **kw: calls.append(("gathered", gc.isenabled())) or gathered(self, **kw))
        assert gc.isenabled()
        bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=NOW.timestamp(),
                               when_scanned=lambda: calls.append(("scanned", gc.isenabled())))
        assert gc.isenabled()
        gc.disable()
        try:
            bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=NOW.timestamp())
            assert not gc.isenabled()       # a caller's own choice stands
        finally:
            gc.enable()
    assert calls[:2] == [("scanned", False), ("gathered", False)]


def test_when_scanned_not_called_without_a_reader(tmp_path):
    bundle = _cross_file_bundle(tmp_path)
    calls = []
    bundle_mod.read_bundle(bundle, load_catalog(), now_epoch=NOW.timestamp(), when_scanned=lambda: calls.append(1))
    assert calls == []


def test_a_torn_part_from_the_reader_is_routed_again(tmp_path, monkeypatch):
    """A file whose pickled part does not unpickle (``received`` leaves it out) is routed by the
    diagnosing process in order: the same read and report as one in-order scan."""
    bundle = _cross_file_bundle(tmp_path)
    expected = _sequential_outcome(bundle, monkeypatch)
    with monkeypatch.context() as m:
        _use_path(m, "reader")
        scan_pickled = bundle_mod._LogWork.scan_pickled
        m.setattr(bundle_mod._LogWork, "scan_pickled",
                  lambda self, index: b"\x80\x05torn" if index == 0 else scan_pickled(self, index))
        report = diagnose(bundle, now=NOW)
        got = (_read(bundle), render(report, "json"), render(report, "markdown"))
    assert got == expected
    assert bundle_mod.received({0: b"\x80\x05torn", 1: 7}) == {} and bundle_mod.received(None) == {}
