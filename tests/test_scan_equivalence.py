"""The fast scanning path gives exactly what the straightforward path gives.

Fast path: ``Scanner.iter_blocks`` (memoryview blocks, seek instead of carry copies, matching
lines from the C line engine or numpy newline positions), ``Extraction.scan`` (no ``LineHit`` for
stats-only lines, read by ``_linescan.StatsReader.line``; stats samples and their timestamps built only
for the lines kept), trials read in forked processes while the
logs are scanned, the forked reader then routing log files too (merged in file order; the cases of
that merge are in tests/unit/test_parallel_scan.py). Straightforward path: the original block scanner below (carry + data, one
``bytes.count`` per match), ``Scanner.scan_file`` + ``Extraction.route`` for every line,
trials read one by one in-process.

Compared: every matching line (line number, keys, text, line end, the lines after it and the
bytes before it, as the parsers see them) over the incident corpus, a generated bench bundle
and edge-case files, at the default block size and at tiny ones (many block boundaries; with
a small ``MAX_LINE_BYTES`` also giant-line segmentation); and the final reports (JSON and
Markdown) byte for byte. Line level: the per-line fast forms (clean_line on plain ASCII,
line_timestamp's hint/ASCII patterns/day starts, the ASCII stats patterns, the memoised stats
engine/era) against their straightforward forms over every distinct corpus line and fuzzed lines.
No timing here.
"""
from __future__ import annotations

import json
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
from rlhealth.probes import extract as extract_mod
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
    keys = [p.key for p in scan_mod.expression_patterns(self.patterns)]
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
            hit_keys = tuple(sorted({keys[k] for k in ids}))   # the distinct keys (a pattern may be several expressions)
            # the text of one line (its cap and the match position of a long line): Scanner.hit_text
            text, at = self.hit_text(raw, hit_keys)
            on_hit(LineHit(source=source, lineno=current + 1, keys=hit_keys, text=text, block=block, end=line_end, at=at))
    return lineno + block.count(b"\n")


def _observed(hit: LineHit) -> tuple:
    """Everything a router can read from a hit."""
    return (hit.source, hit.lineno, hit.keys, hit.text, hit.at, hit.end, tuple(hit.following_lines(limit=300)),
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
    monkeypatch.setattr(extract_mod, "FAST_ROUTING", False)
    if block_bytes is None:
        monkeypatch.setattr(scan_mod.Scanner, "scan_file", reference_scan_file)
    else:
        monkeypatch.setattr(scan_mod.Scanner, "scan_file",
                            lambda self, path, source, on_hit, block_bytes_=block_bytes, **_:
                            reference_scan_file(self, path, source, on_hit, block_bytes=block_bytes_))

    class Sync:
        forked = False

        def __init__(self, trace_root, aliases, sample_size, *, since=None, workers=4, after=None, early=None):
            self.args = (trace_root, aliases, sample_size, since)

        def result(self, on_chunk=None, *, outputs=True):
            trace_root, aliases, sample_size, since = self.args
            self.summary = trials_mod.BackgroundSummary(trace_root, aliases, sample_size, workers=1, since=since)
            return self.summary.result(on_chunk, outputs=outputs)

        def read_outputs(self, summary, select=None):
            self.summary.read_outputs(summary, select)

    monkeypatch.setattr(bundle_mod, "BackgroundSummary", Sync)


def _fast_path(monkeypatch, block_bytes=None):
    monkeypatch.setattr(extract_mod, "FAST_ROUTING", True)
    monkeypatch.setattr(trials_mod, "PROCESS_MIN_TRIALS", 1)       # processes even for tiny corpora
    monkeypatch.setattr(trials_mod, "may_fork", lambda: True)     # idle threads other tests left behind
    monkeypatch.setattr(trials_mod, "PROCESS_CHUNK", 3)
    monkeypatch.setattr(trials_mod, "cpus", lambda: 2)
    monkeypatch.setattr(bundle_mod, "PARALLEL_SCAN_MIN_BYTES", 0)  # the reader shares the log files too
    if block_bytes is not None:
        original = scan_mod.Scanner.iter_blocks
        monkeypatch.setattr(scan_mod.Scanner, "iter_blocks",
                            lambda self, path, block_bytes_=block_bytes, sink=None: original(self, path, block_bytes_,
                                                                                               sink=sink))


def _reports(bundle: Path, now: datetime, mode: str | None) -> tuple[str, str, str]:
    """JSON, Markdown and the HTML report's plot series (which read every metric record)."""
    report = diagnose(bundle, now=now, mode_override=mode, with_plots=True)
    return render(report, "json"), render(report, "markdown"), json.dumps(report.plots, sort_keys=True, default=str)


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


def test_reports_identical_without_the_c_extensions(bench_bundle, monkeypatch):
    """The fast path on a build without ``_linescan`` (its Python form)."""
    differ = []
    for name, cwd, bundle, now, mode in _cases(bench_bundle):
        monkeypatch.chdir(cwd)
        with monkeypatch.context() as m:
            _reference_path(m)
            expected = _reports(bundle, now, mode)
        with monkeypatch.context() as m:
            _fast_path(m)
            m.setattr(scan_mod, "LINE_ENGINE", "python")
            got = _reports(bundle, now, mode)
        if got != expected:
            differ.append(name)
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
    monkeypatch.setattr(trials_mod, "may_fork", lambda: True)     # idle threads other tests left behind
    monkeypatch.setattr(trials_mod, "cpus", lambda: 2)
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
    monkeypatch.setattr(trials_mod, "cpus", lambda: 2)
    monkeypatch.setattr(trials_mod, "may_fork", lambda: True)
    monkeypatch.setattr(trials_mod, "_reader_child", lambda send, *a: os._exit(3))
    reread = []
    in_process = trials_mod.BackgroundSummary._tally_in_process
    monkeypatch.setattr(trials_mod.BackgroundSummary, "_tally_in_process",
                        lambda self: reread.append(1) or in_process(self))
    assert asdict(trials_mod.BackgroundSummary(trace, {}, 50, workers=2).result()) == asdict(expected)
    assert reread == [1]


# ----------------------------------------------------------------------------- line level
# The per-line fast forms (plain-ASCII decoding in clean_line, the ISO hint / ASCII regexes / day
# starts in line_timestamp, the ASCII stats regexes, the memoised engine/era of stats lines) against
# the straightforward forms below, over every line of the corpus and fuzzed lines.
import random  # noqa: E402
import re  # noqa: E402

from rlhealth.probes.parse import timestamps as ts_mod  # noqa: E402
from rlhealth.probes.parse import vllm as vp  # noqa: E402
from rlhealth.probes.parse.timestamps import line_timestamp  # noqa: E402

_REF_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_REF_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def reference_clean_line(raw):
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
    if "\x1b" in text:
        text = _REF_ANSI.sub("", text)
    text = text.rstrip("\r\n")
    if _REF_CONTROL.search(text):
        text = _REF_CONTROL.sub("", text)
    return text


def _reference_yearless(mo, d, hh, mi, ss, reference_epoch):
    ref = datetime.fromtimestamp(reference_epoch or 0, tz=timezone.utc)
    t = ts_mod._mk(ref.year, mo, d, hh, mi, ss)
    if t is not None and reference_epoch is not None and t > reference_epoch + 86400:
        t = ts_mod._mk(ref.year - 1, mo, d, hh, mi, ss)
    return t


def reference_line_timestamp(text, reference_epoch):
    """line_timestamp with the Unicode patterns searched over the whole line, datetime per call."""
    m = ts_mod._DMESG_T.match(text)
    if m:
        mon, d, hh, mi, ss, y = m.groups()
        return ts_mod._mk(int(y), ts_mod._MONTHS[mon], int(d), int(hh), int(mi), int(ss))
    m = ts_mod._SYSLOG.match(text)
    if m:
        mon, d, hh, mi, ss = m.groups()
        return _reference_yearless(ts_mod._MONTHS[mon], int(d), int(hh), int(mi), int(ss), reference_epoch)
    m = ts_mod._ISO.search(text)
    if m:
        y, mo, d, hh, mi, ss, frac, tz = m.groups()
        t = ts_mod._mk(int(y), int(mo), int(d), int(hh), int(mi), int(ss))
        if t is not None:
            if frac:
                t += float("0." + frac)
            return t - ts_mod._tz_offset(tz)
    m = ts_mod._VLLM.search(text)
    if m:
        return _reference_yearless(*(int(g) for g in m.groups()), reference_epoch)
    m = ts_mod._GLOG.search(text)
    if m:
        t = _reference_yearless(*(int(g) for g in m.groups()[:5]), reference_epoch)
        if t is not None and m.group(6):
            t += float("0." + m.group(6))
        return t
    m = ts_mod._GLOG_BARE.match(text)
    if m:
        return _reference_yearless(*(int(g) for g in m.groups()), reference_epoch)
    return None


def reference_parse_stats(text, source, line, ts):
    """parse_stats with the Unicode patterns only."""
    m = vp.STATS_RE.search(text)
    if not m:
        return None
    prefix = vp.PREFIX_RE.search(text)
    engine_idx = m.group("engine")
    who = f"{prefix.group('actor')}:{prefix.group('ip') or '-'}:{prefix.group('pid')}" if prefix else source
    engine = f"{who}#{engine_idx}" if engine_idx is not None else who
    if m.group("swapped") is not None:
        era = "v0"
    elif engine_idx is not None:
        era = "v1-2026" if "MM cache hit rate" in text or "External prefix" in text else "v1"
    else:
        era = "v1-early"
    return vp.StatsSample(engine=engine, ts=ts, prompt_tok_s=float(m.group("prompt")), gen_tok_s=float(m.group("gen")),
                          running=int(m.group("running")), waiting=int(m.group("waiting") or 0),
                          kv_pct=float(m.group("kv")) if m.group("kv") else None, source=source, line=line, era=era,
                          text=text)


_STATS = ("(AsyncVLLMInferenceEngine pid=7, ip=10.0.0.1) INFO 08-01 12:00:01 [loggers.py:259] Engine 000: Avg prompt "
          "throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs, "
          "GPU KV cache usage: 5.0%, Prefix cache hit rate: 6.0%")
_TIMED = ["2026-08-01 12:00:00,123 x", "x 2026-02-30T12:00:00Z y 2026-03-01T01:02:03+02:00", "2026-08-01_07:01:51 z",
          "INFO 08-02 11:59:41 [x] a", "WARNING 02-29 23:59:59 b", "ERROR 12-31 23:59:59 c", "INFO 13-01 00:00:00 d",
          "INFO 08-01 25:61:61 e", "INFO 08-01 24:00:00 e", "INFO 08-01 23:60:00 e",
          "INFO 08-01 23:59:60 e", "INFO 00-01 10:00:00 e", "INFO 02-29 10:00:00 e", "[E801 05:20:04.123456789 f", "[W0229 05:20:04 g", "I0712 15:54:56.488170 5711 f.go:53] h",
          "[Fri Aug  9 13:32:56 2024] i", "Feb 29 19:24:11 host j", "Apr 29 19:24:11 host k", "[ 1843.308145] l",
          "2026-08-01 12:00:00.5Z", "12026-08-01 12:00:00", "-08-01 12:00:00", "2026-08-0112:00:00",
          "2026-08-01 24:00:00", "2026-08-01 23:60:00", "2026-08-01T23:59:60Z", "0000-01-01 00:00:00",
          "9999-12-31 23:59:59", "1969-12-31T23:59:59-01:30", "2024-02-29 12:00:00"]
_UNICODE_DIGITS = "٠١٢٣٤٥٦٧٨٩０１２３"


def _fuzzed_lines(n: int = 3000) -> list[bytes]:
    rng = random.Random(16)
    seeds = [s.encode() for s in _TIMED] + [_STATS.encode(), _STATS.replace("Waiting", "Swapped: 1 reqs, Pending").encode(),
                                            _STATS.replace("Engine 000: ", "").encode(), (_STATS + ", MM cache hit rate: 1%").encode()]
    alphabet = [b"\x1b[31m", b"\x1c", b"\x1f", b"\r", b"\t", b"\x00", b"\x7f", b"\xff", b"\xc3\xa9", b" ", b"-", b":", b"(", b")",
                b"0", b"9"] + [c.encode() for c in _UNICODE_DIGITS]
    out = []
    for _ in range(n):
        line = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(len(line) + 1)
            if rng.random() < 0.5 and i < len(line):
                line[i:i + 1] = rng.choice(alphabet)
            else:
                line[i:i] = rng.choice(alphabet)
        out.append(bytes(line))
    return out


def _corpus_lines(tmp: Path, bench_root: Path, limit_per_file: int = 5000) -> list[bytes]:
    lines: dict[bytes, None] = {}
    for path in _all_log_files(tmp, bench_root):
        with open(path, "rb") as handle:
            for i, raw in enumerate(handle):
                if i >= limit_per_file:
                    break
                lines[raw.rstrip(b"\n")] = None
    return list(lines)


def test_fast_line_forms_equal_reference(tmp_path, bench_bundle):
    fuzzed = _fuzzed_lines()
    raws = _corpus_lines(tmp_path, bench_bundle) + fuzzed
    assert len(raws) > 10000
    fuzzed = set(fuzzed)
    refs = [None, datetime(2026, 8, 1, 15, 0, tzinfo=timezone.utc).timestamp(),
            datetime(2026, 1, 1, 0, 30, tzinfo=timezone.utc).timestamp(), datetime(2025, 2, 28, tzinfo=timezone.utc).timestamp()]
    from rlhealth.probes.extractors.stats import Stats

    stats_extractor = Stats(None)
    stats_extractor.begin(extract_mod.FileInfo("f.log", 0, None, None))
    timed = stats = 0
    for raw in raws:
        text = clean_line(raw)
        assert text == reference_clean_line(raw), raw
        # line_timestamp also sees uncleaned text (dict blocks, continuation lines)
        for variant in (text, raw.decode("utf-8", "replace")) if raw in fuzzed else (text,):
            for ref in refs:
                got, expected = line_timestamp(variant, ref), reference_line_timestamp(variant, ref)
                assert got == expected, (variant, ref, got, expected)
                timed += expected is not None
        sample = vp.parse_stats(text, "f.log", 1, None)
        assert sample == reference_parse_stats(text, "f.log", 1, None), text
        if sample is not None:
            stats += 1
            m = vp.stats_match(text)
            assert m.span() == vp.STATS_RE.search(text).span(), text
            assert stats_extractor.engine_and_era(text, m) == (sample.engine, sample.era), text
    assert timed > 10000 and stats > 1000


def test_prefiltered_extractors_key_the_lines_the_whole_extractor_matches(tmp_path, bench_bundle):
    """An extractor scanned by a cheaper prefilter (``EXTRACTOR_PREFILTERS``) + the router's check
    keys exactly the lines that hyperscan keys with the whole extractor."""
    catalog = load_catalog()
    whole = scan_mod.Scanner([scan_mod.Pattern(s.id, s.pattern, s.caseless) for s in catalog.signatures.values()]
                             + [scan_mod.Pattern(k, v) for k, v in bundle_mod.EXTRACTORS.items()])
    prefiltered = bundle_mod.scanner_for(catalog)
    near = tmp_path / "boundaries.log"
    near.write_bytes(b"\n".join([
        b"task=/a/b/0 | [iris setup] step 1/2", b"task= /a/0 | [iris setup] step 1/2", b"/a/0 | [iris setup] step 1/2",
        b"task=/a\x0b/0 | [iris setup] step 1/2", b"task=/a\xc2\xa0b/0 | [iris setup] step 1/2",
        b"task=/a\x1cb/0 | [iris setup] step 1/2", b"x task=/a/0 | [iris setup] step 1/2 y task=",
        b"task=/a/1 | [iris setup] step 1/2", b"task=/a/0 | [iris setup] step 1/2\r",
        b"\x1b[0mtask=/a/0 | [iris setup] step 1/2", b"task=\n/0 | [iris setup] step 1/2"]) + b"\n")

    def keyed(scanner, path, check):
        out = []
        scanner.scan_file(path, "f", lambda h: out.append((h.lineno, checked_keys(h.keys, h.line_bytes()) if check else h.keys)))
        return [(n, k) for n, k in out if k]

    from rlhealth.probes.bundle import checked_keys
    boundary_lines = 0
    for path in _all_log_files(tmp_path, bench_bundle) + [near]:
        expected = keyed(whole, path, False)
        assert keyed(prefiltered, path, True) == expected, path
        boundary_lines += sum("x_boundary" in k for _, k in expected)
    assert boundary_lines > 10


def _pending_occurrences(value, seen=None) -> int:
    """Pending occurrences anywhere inside a bundle read (dataclasses, containers)."""
    import dataclasses
    from collections import deque
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, extract_mod.PendingOccurrence):
        return 1
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_pending_occurrences(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(_pending_occurrences(v, seen) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset, deque)):
        return sum(_pending_occurrences(v, seen) for v in value)
    return 0


def test_no_pending_occurrence_leaves_the_reader(bench_bundle, monkeypatch):
    """Routing records occurrences as ``PendingOccurrence``; every reader entry point settles
    them into ``Occurrence`` models before returning."""
    monkeypatch.setattr(extract_mod, "FAST_ROUTING", True)
    catalog = load_catalog()
    roots = [d / "bundle" for d in INCIDENTS] + [bench_bundle]
    routed = 0
    for root in roots:
        read = bundle_mod.read_bundle(root, catalog, now_epoch=datetime(2026, 8, 3, 12, 5, tzinfo=timezone.utc).timestamp())
        assert _pending_occurrences(read) == 0, root
        routed += sum(agg.count for agg in read.signatures.values())
        files = bundle_mod._log_files(root, read.capture_dir)
        assert _pending_occurrences(bundle_mod.scan_signatures(files, catalog)) == 0, root
        for path, rel in files[:3]:
            assert _pending_occurrences(bundle_mod.scan_log_file(path, rel, catalog=catalog, split_at_boundaries=True)) == 0
    assert routed > 100


# The event trigger as it was written before its redundant branch was dropped and it was scanned
# as parts: a glog F header at a line start, indented or not, is also a header after whitespace.
DROPPED_EVENT_BRANCH = r"(?:^|\n)\s*F[0-9]{4} [0-9]{2}:[0-9]{2}"
WRITTEN_EVENT_TRIGGER = DROPPED_EVENT_BRANCH + "|" + bundle_mod.EXTRACTORS["x_event"]


def _header_lines(tmp: Path) -> Path:
    """Lines at the edges of the severity-header branch and of the dropped one."""
    lines = [b"F0801 12:00:00.1 1 a.cc:1] x", b"  F0801 12:00:00", b"\tF1234 12:34", b"\x0bF1234 12:34",
             b"\xc2\xa0F1234 12:34", b"xF0801 12:00:00", b"[W801 05:20:04.1 x.cpp:3] w", b"]C1234 00:00", b":E123 45:67",
             b"(E0801 12:00:00", b"E12 12:00", b"E12345 12:00", b"I0801 12:00:00", b"E0801 1:00:00", b"E0801 12:0",
             b"W0801  12:00", b"\r\nF0801 12:00:00", b" \n \nF9999 99:99", b"e0801 12:00:00", b"F0801 12:00:00\r"]
    lines += [c + d + b"12 " + b"34:56" for c in (b"E", b"W", b"F", b"C", b" E", b" C") for d in (bytes([x]) for x in b"0123456789")]
    path = tmp / "headers.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _corpus_texts(tmp: Path) -> list[Path]:
    import yaml

    out = []
    for name in ("corpus.yaml", "events_corpus.yaml"):
        entries = yaml.safe_load((REPO / "tests" / "realworld" / name).read_text(encoding="utf-8"))["entries"]
        path = tmp / f"realworld-{name}.log"
        path.write_text("".join(e["text"] if e["text"].endswith("\n") else e["text"] + "\n"
                                for e in entries if e.get("text")), encoding="utf-8")
        out.append(path)
    return out


def test_event_trigger_parts_key_the_lines_the_written_trigger_keys(tmp_path, bench_bundle):
    """``x_event`` scanned as ``EVENT_SCAN_EXPRESSIONS`` keys exactly the lines the written trigger
    (one expression, with the dropped branch) keys, and every pattern split by ``scan_expressions``
    keys the lines it keys as one expression; ``EVENT_TRIGGER``
    as Python reads a line (``read_events``) flags exactly the lines the written trigger flags."""
    scanner = bundle_mod.scanner_for(load_catalog())
    written = scan_mod.Scanner([scan_mod.Pattern(p.key, p.regex, p.caseless, parts=(p.regex,)) if p.key != "x_event"
                                else scan_mod.Pattern("x_event", WRITTEN_EVENT_TRIGGER, parts=(WRITTEN_EVENT_TRIGGER,))
                                for p in scanner.patterns])
    assert len(written._keys) == len(scanner.patterns) < len(scanner._keys)    # the parts are compiled
    # as Python reads a line, the written trigger is EVENT_TRIGGER or the dropped branch: they flag
    # the same lines when every line the dropped branch matches is flagged by EVENT_TRIGGER
    dropped, python_new = re.compile(DROPPED_EVENT_BRANCH), re.compile(bundle_mod.EXTRACTORS["x_event"])
    files = _all_log_files(tmp_path, bench_bundle) + _corpus_texts(tmp_path) + [_header_lines(tmp_path)]
    event_lines = flagged = 0
    for path in files:
        for block_bytes in (scan_mod.BLOCK_BYTES, 4096) if path.stat().st_size <= 256 * 1024 else (scan_mod.BLOCK_BYTES,):
            # (small blocks: a line start at every block start, where the ^ expressions match)
            expected = [(h[2], h[3]) for _, _, _, hits in written.iter_blocks(path, block_bytes) for h in hits]
            got = [(h[2], h[3]) for _, _, _, hits in scanner.iter_blocks(path, block_bytes) for h in hits]
            assert got == expected, (path, block_bytes)
        event_lines += sum("x_event" in k for _, k in expected)
        for line in path.read_bytes().split(b"\n"):
            text = clean_line(line)
            if dropped.search(text):
                assert python_new.search(text), (path, text)
                flagged += 1
    assert event_lines > 100 and flagged >= 8
