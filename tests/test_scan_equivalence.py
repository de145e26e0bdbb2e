"""The fast scanning path gives exactly what the straightforward path gives.

Fast path: ``Scanner.iter_blocks`` (memoryview blocks, seek instead of carry copies, numpy
newline positions), ``_Router.scan`` (no ``LineHit`` for stats-only lines, stats samples and
their timestamps built only for the lines kept), trials read in forked processes while the
logs are scanned. Straightforward path: the original block scanner below (carry + data, one
``bytes.count`` per match), ``Scanner.scan_file`` + ``_Router.__call__`` for every line,
trials read one by one in-process.

Compared: every matching line (line number, keys, text, line end, the lines after it and the
bytes before it, as the parsers see them) over the incident corpus, a generated bench bundle
and edge-case files, at the default block size and at tiny ones (many block boundaries; with
a small ``MAX_LINE_BYTES`` also giant-line segmentation); and the final reports (JSON and
Markdown) byte for byte. No timing here.
"""
from __future__ import annotations

import os
import sys
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import pytest

from rlhealth.catalog import load_catalog
from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.probes import bundle as bundle_mod
from rlhealth.probes import scan as scan_mod
from rlhealth.probes.parse import trials as trials_mod
from rlhealth.probes.scan import LineHit
from rlhealth.probes.textio import clean_line
from rlhealth.render import render

from corpus import incident_dirs, load_expected

REPO = Path(__file__).resolve().parents[1]
INCIDENTS = incident_dirs()


# ----------------------------------------------------------------------------- reference scanner
def reference_scan_file(self, path, source, on_hit, block_bytes=scan_mod.BLOCK_BYTES):
    """The original ``Scanner.scan_file``: carry + data blocks, bytes.count per match."""
    keys = [p.key for p in self.patterns]
    lineno = 0
    carry = b""
    with open(path, "rb") as handle:
        while True:
            data = handle.read(block_bytes)
            eof = not data
            block = carry + data
            carry = b""
            if not block:
                break
            if eof:
                cut = len(block)
            else:
                nl = block.rfind(b"\n")
                if nl < 0:
                    if len(block) < scan_mod.MAX_LINE_BYTES:
                        carry = block
                        continue
                    cut = len(block)
                else:
                    cut = nl + 1
                    carry = block[cut:]
                    block = block[:cut]
            lineno = _reference_block(self, block, source, lineno, keys, on_hit)
            if eof:
                break
    return lineno


def _reference_block(self, block, source, lineno, keys, on_hit):
    matches = []

    def on_match(pid, _from, to, _flags, _ctx):
        matches.append((to, pid))
        return 0

    self._db.scan(block, match_event_handler=on_match)
    if matches:
        matches.sort()
        pos = 0
        current = lineno
        i = 0
        while i < len(matches):
            to = matches[i][0]
            anchor = max(0, to - 1)
            line_start = block.rfind(b"\n", 0, anchor) + 1
            current += block.count(b"\n", pos, line_start)
            pos = line_start
            line_end = block.find(b"\n", line_start)
            if line_end < 0:
                line_end = len(block)
            ids = set()
            while i < len(matches) and matches[i][0] - 1 <= line_end:
                ids.add(matches[i][1])
                i += 1
            raw = block[line_start:line_end]
            on_hit(LineHit(source=source, lineno=current + 1, keys=tuple(sorted(keys[k] for k in ids)),
                           text=clean_line(raw[:scan_mod.MAX_LINE_BYTES]), block=block, end=line_end))
    return lineno + block.count(b"\n")


def _observed(hit: LineHit) -> tuple:
    """Everything a router can read from a hit."""
    return (hit.source, hit.lineno, hit.keys, hit.text, hit.end, tuple(hit.following_lines(limit=300)),
            hit.preceding_bytes(64 * 1024))


def _hits(scan, scanner, path, block_bytes):
    out = []
    lines = scan(scanner, path, "f", lambda h: out.append(_observed(h)), block_bytes=block_bytes)
    return lines, out


# ----------------------------------------------------------------------------- inputs
@pytest.fixture(scope="module")
def bench_bundle(tmp_path_factory) -> Path:
    """A small generated bench bundle (same generator as bench/: 3 h of job in 3 MiB of logs, 300 trials)."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gen
    finally:
        sys.path.remove(str(REPO / "bench"))
    root, _ = gen.generate(tmp_path_factory.mktemp("bench"), "t", 3 * 1024 * 1024, 300, hours=3.0)
    return root


def _edge_files(tmp: Path) -> list[Path]:
    tb = (b"2026-08-01 12:00:00.000 | ERROR    | x:y:1 - Traceback (most recent call last):\n"
          b'  File "a.py", line 1, in <module>\n    f()\nRuntimeError: boom\n')
    stats = (b"(AsyncVLLMInferenceEngine pid=7, ip=10.0.0.1) INFO 08-01 12:00:01 [loggers.py:259] Engine 000: Avg prompt "
             b"throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs, "
             b"GPU KV cache usage: 5.0%, Prefix cache hit rate: 6.0%\n")
    files = {
        "crlf.log": (tb + stats).replace(b"\n", b"\r\n") * 40,
        "no_trailing_newline.log": stats * 30 + tb + b"Traceback (most recent call last) at the very end",
        "giant.log": stats + b"x" * (3 * 1024 * 1024) + b" CUDA out of memory " + b"y" * 5000 + b"\n" + stats + tb,
        "binary.log": b"\x00\xff\xfe" + stats + b"\x00\x01\x02 Traceback (most recent call last)\xff\n" + bytes(range(256)) + b"\n" + stats,
        "empty.log": b"",
        "ansi.log": b"\x1b[0;36m(Worker_TP0 pid=1)\x1b[0;0m " + stats + b"\x1b[31m" + tb + b"\x1b[0m\n",
        "multiline_dict.log": b"Step 3:\n{'async/staleness_max': 0,\n 'reward/avg_raw_reward': '0.5',\n 'trainer/global_step': 3}\n" * 50,
        "cross_line.log": b"WorkNCCL(SeqNum=1, OpType=ALLREDUCE\n) ran for 600000 milliseconds before timing out\n" * 20,
    }
    out = []
    for name, data in files.items():
        p = tmp / name
        p.write_bytes(data)
        out.append(p)
    return out


def _all_log_files(tmp: Path, bench_root: Path) -> list[Path]:
    files = _edge_files(tmp)
    files += [p for p, _ in bundle_mod._log_files(bench_root, None)]
    for d in INCIDENTS:
        files += [p for p, _ in bundle_mod._log_files(d / "bundle", None)]
        files += sorted((d / "bundle").glob("rlhealth/captures/*/**/*.log"))
    return files


# ----------------------------------------------------------------------------- scanner level
@pytest.mark.parametrize("block_bytes,max_line", [(scan_mod.BLOCK_BYTES, scan_mod.MAX_LINE_BYTES),
                                                  (64 * 1024, scan_mod.MAX_LINE_BYTES),
                                                  (4096, 2048), (97, 4096), (1, 64)])
def test_scanner_matches_reference(tmp_path, bench_bundle, monkeypatch, block_bytes, max_line):
    monkeypatch.setattr(scan_mod, "MAX_LINE_BYTES", max_line)
    scanner = bundle_mod.scanner_for(load_catalog())
    files = _all_log_files(tmp_path, bench_bundle)
    if block_bytes < 4096:   # the byte-at-a-time reference is slow on MiBs
        files = [p for p in files if p.stat().st_size <= 256 * 1024]
    assert len(files) > 20
    for path in files:
        expected = _hits(reference_scan_file, scanner, path, block_bytes)
        got = _hits(type(scanner).scan_file, scanner, path, block_bytes)
        assert got == expected, path


def test_scanner_sees_lines_in_every_edge_file(tmp_path):
    """The edge files do produce hits (so the comparison above is not vacuous)."""
    scanner = bundle_mod.scanner_for(load_catalog())
    for path in _edge_files(tmp_path):
        lines, hits = _hits(type(scanner).scan_file, scanner, path, scan_mod.BLOCK_BYTES)
        assert (hits != []) == (path.name != "empty.log"), path.name


# ----------------------------------------------------------------------------- report level
def _reference_path(monkeypatch, block_bytes=None):
    """Plain routing, the reference scanner, trials read one by one in this process."""
    monkeypatch.setattr(bundle_mod, "FAST_ROUTING", False)
    if block_bytes is None:
        monkeypatch.setattr(scan_mod.Scanner, "scan_file", reference_scan_file)
    else:
        monkeypatch.setattr(scan_mod.Scanner, "scan_file",
                            lambda self, path, source, on_hit, block_bytes_=block_bytes, **_:
                            reference_scan_file(self, path, source, on_hit, block_bytes=block_bytes_))

    class Sync:
        def __init__(self, trace_root, aliases, sample_size, *, since=None, workers=4, log_bytes=0):
            self.args = (trace_root, aliases, sample_size, since)

        def result(self):
            trace_root, aliases, sample_size, since = self.args
            return trials_mod.summarize_trials(trace_root, aliases, sample_size, workers=1, since=since)

    monkeypatch.setattr(bundle_mod, "BackgroundSummary", Sync)


def _fast_path(monkeypatch, block_bytes=None):
    monkeypatch.setattr(bundle_mod, "FAST_ROUTING", True)
    monkeypatch.setattr(trials_mod, "PROCESS_MIN_TRIALS", 1)       # processes even for tiny corpora
    monkeypatch.setattr(trials_mod, "_may_fork", lambda: True)     # idle threads other tests left behind
    monkeypatch.setattr(trials_mod, "PROCESS_CHUNK", 3)
    if block_bytes is not None:
        original = scan_mod.Scanner.iter_blocks
        monkeypatch.setattr(scan_mod.Scanner, "iter_blocks",
                            lambda self, path, block_bytes_=block_bytes: original(self, path, block_bytes_))


def _reports(bundle: Path, now: datetime, mode: str | None) -> tuple[str, str]:
    report = diagnose(bundle, now=now, mode_override=mode)
    return render(report, "json"), render(report, "markdown")


def _cases(bench_root: Path):
    for d in INCIDENTS:
        expected = load_expected(d)
        yield d.name, d, Path("bundle"), parse_now(expected["now"]), expected.get("mode_arg")
    yield "bench", bench_root.parent, Path(bench_root.name), datetime(2026, 8, 3, 12, 5, tzinfo=timezone.utc), None


def _largest_incidents(n: int) -> set[str]:
    size = {d.name: sum(p.stat().st_size for p, _ in bundle_mod._log_files(d / "bundle", None)) for d in INCIDENTS}
    return set(sorted(size, key=lambda k: -size[k])[:n])


@pytest.mark.parametrize("block_bytes", [None, 4096])
def test_reports_identical(bench_bundle, monkeypatch, block_bytes):
    """Every incident (default blocks) / the bench bundle and the 8 largest incidents (4 KiB blocks)."""
    assert len(INCIDENTS) >= 28
    subset = None if block_bytes is None else _largest_incidents(8) | {"bench"}
    differ = []
    compared = 0
    for name, cwd, bundle, now, mode in _cases(bench_bundle):
        if subset is not None and name not in subset:
            continue
        monkeypatch.chdir(cwd)
        with monkeypatch.context() as m:
            _reference_path(m, block_bytes)
            expected = _reports(bundle, now, mode)
        with monkeypatch.context() as m:
            _fast_path(m, block_bytes)
            got = _reports(bundle, now, mode)
        compared += 1
        if got != expected:
            differ.append(name)
    assert compared >= (len(INCIDENTS) + 1 if subset is None else 9)
    assert differ == []


def test_bench_bundle_is_healthy_and_read(bench_bundle):
    """The generated bundle exercises the paths compared above."""
    catalog = load_catalog()
    read = bundle_mod.read_bundle(bench_bundle, catalog, now_epoch=datetime(2026, 8, 3, 12, 5, tzinfo=timezone.utc).timestamp())
    assert read.stats_count > 100 and len(read.metric_records) > 5 and read.trials.completed > 200
    assert {"v0", "v1", "v1-2026", "v1-early"} <= read.stats_eras
    assert "python_traceback" in read.suppressed or "benign_shm_broadcast_wait" in read.signatures


# ----------------------------------------------------------------------------- trials
def test_trials_processes_equal_sequential(bench_bundle, monkeypatch):
    trace = bench_bundle / "trace_jobs"
    sequential = trials_mod.summarize_trials(trace, {}, 50, workers=1)
    monkeypatch.setattr(trials_mod, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(trials_mod, "PROCESS_CHUNK", 7)
    monkeypatch.setattr(trials_mod, "_may_fork", lambda: True)     # idle threads other tests left behind
    monkeypatch.setattr(trials_mod, "_cpus", lambda: 2)
    parallel = trials_mod.summarize_trials(trace, {}, 50, workers=2)
    background = trials_mod.BackgroundSummary(trace, {}, 50)
    assert len(background._readers) == 1
    assert asdict(parallel) == asdict(sequential)
    assert asdict(background.result()) == asdict(sequential)
    assert sequential.completed > 200 and sequential.coherence_sampled > 0


def test_trials_background_falls_back_when_the_child_fails(bench_bundle, monkeypatch):
    trace = bench_bundle / "trace_jobs"
    expected = trials_mod.summarize_trials(trace, {}, 50, workers=1)
    monkeypatch.setattr(trials_mod, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(trials_mod, "_cpus", lambda: 2)
    monkeypatch.setattr(trials_mod, "_may_fork", lambda: True)
    monkeypatch.setattr(trials_mod, "_reader_child", lambda send, *a: os._exit(3))
    reread = []
    in_process = trials_mod.BackgroundSummary._tally_in_process
    monkeypatch.setattr(trials_mod.BackgroundSummary, "_tally_in_process",
                        lambda self: reread.append(1) or in_process(self))
    assert asdict(trials_mod.BackgroundSummary(trace, {}, 50, workers=2).result()) == asdict(expected)
    assert reread == [1]
