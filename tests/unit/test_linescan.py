"""The C line engine (probes/_linescan.c) gives exactly the Python line engine's matching lines.

Both turn one scanned block's hyperscan matches into ``(newlines, [(line_start, line_end,
newlines_before, keys)])``. Generated blocks exercise what can differ: several patterns and
several matches on one line, two patterns with one key, matches whose last byte is a newline
(``\\s``), a match at offset 0, a last line without newline, empty lines, CR bytes, a block that
ends before its buffer does, and blocks past NUMPY_MIN_BYTES (the Python engine's numpy path).
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from rlhealth.probes import scan as scan_mod
from rlhealth.probes.scan import Pattern, Scanner

from rlhealth.probes import _linescan     # built by every install: its absence fails here

PATTERNS = [
    Pattern("alpha", r"alpha"),
    Pattern("beta", r"beta[0-9]+"),
    Pattern("alpha", r"ALPHA!", caseless=True),       # a second pattern with the key "alpha"
    Pattern("spans", r"gamma\s+delta"),               # \s matches a newline: a match across lines
    Pattern("x_nl", r"\nzeta"),                       # a match that starts with the newline
    Pattern("start", r"^omega"),
    Pattern("ends_nl", r"delta\s"),                   # a match whose last byte is the newline ...
    Pattern("ends_nl2", r"ta\n"),                     # ... and a second one ending there too
]
WORDS = [b"alpha", b"beta7", b"Alpha!", b"gamma", b"delta", b"zeta", b"omega", b"noise", b"\r", b"", b"  ", b"x"]


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner(PATTERNS)


def _block(rng: random.Random, lines: int) -> bytes:
    out = []
    for _ in range(lines):
        out.append(b" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))))
    text = b"\n".join(out)
    return text + b"\n" if rng.random() < 0.5 else text


def _both(scanner: Scanner, block, end: int, monkeypatch) -> tuple:
    results = []
    for engine in ("c", "python"):
        monkeypatch.setattr(scan_mod, "LINE_ENGINE", engine)
        scanner._key_cache.clear()
        results.append(scanner._scan_block(block, end))
    return tuple(results)


@pytest.mark.parametrize("seed", range(60))
def test_generated_blocks(scanner, monkeypatch, seed):
    rng = random.Random(seed)
    data = _block(rng, rng.randint(0, 400))
    c, py = _both(scanner, data, len(data), monkeypatch)
    assert c == py
    assert c[0] == data.count(b"\n")
    assert all(data[start:end].count(b"\n") == 0 for start, end, _, _ in c[1])


@pytest.mark.parametrize("seed", range(10))
def test_block_ending_before_its_buffer(scanner, monkeypatch, seed):
    """A reused buffer: only ``buffer[:end]`` is the block (what follows is the previous block's)."""
    rng = random.Random(1000 + seed)
    data = _block(rng, 300)
    buf = bytearray(data + b"\nalpha beta1 stale tail alpha\n" * 5)
    end = data.rfind(b"\n") + 1 if rng.random() < 0.7 else len(data)
    c, py = _both(scanner, buf, end, monkeypatch)
    assert c == py
    assert c[0] == data[:end].count(b"\n")


def test_big_block_uses_the_numpy_path_in_python(scanner, monkeypatch):
    rng = random.Random(7)
    data = b""
    while len(data) < 2 * scan_mod.NUMPY_MIN_BYTES:
        data += _block(rng, 2000) + b"\n"
    c, py = _both(scanner, data, len(data), monkeypatch)
    assert c == py and len(c[1]) > 1000


def test_match_at_offset_zero_and_line_without_newline(scanner, monkeypatch):
    data = b"omega alpha\nnoise\nbeta12 ALPHA! alpha"
    (count, hits), py = _both(scanner, data, len(data), monkeypatch)
    assert (count, hits) == py
    assert count == 2
    assert hits == [(0, 11, 0, ("alpha", "start")), (18, len(data), 2, ("alpha", "beta"))]


def test_match_across_a_newline_belongs_to_the_line_of_its_last_byte(scanner, monkeypatch):
    data = b"noise gamma\n  delta end\nnoise\nzeta\n"
    (count, hits), py = _both(scanner, data, len(data), monkeypatch)
    assert (count, hits) == py
    assert [(data[s:e], k) for s, e, _, k in hits] == [(b"  delta end", ("ends_nl", "spans")), (b"zeta", ("ends_nl2", "x_nl"))]


def test_matches_whose_last_byte_is_the_newline(scanner, monkeypatch):
    data = b"noise delta\nalpha\n"
    (count, hits), py = _both(scanner, data, len(data), monkeypatch)
    assert (count, hits) == py
    assert [(data[s:e], k) for s, e, _, k in hits] == [(b"noise delta", ("ends_nl", "ends_nl2")), (b"alpha", ("alpha",))]


def test_count_newlines_matches_bytes_count():
    rng = random.Random(3)
    for _ in range(300):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 3000)))
        a, b = sorted(rng.randint(0, len(data)) for _ in range(2))
        assert _linescan.count_newlines(data, a, b) == data.count(b"\n", a, b)
    assert _linescan.count_newlines(b"\n" * 70000) == 70000     # past 255 steps of byte counters


def test_collector_refuses_bad_input():
    collector = _linescan.Collector()
    with pytest.raises(TypeError):
        collector(1)
    collector(0, 0, 99, 0, None)
    with pytest.raises(ValueError):
        collector.lines(b"short\n", 99, {}, ["k"])      # the block ends before the match
    with pytest.raises(ValueError):
        collector.lines(b"short\n", 7, {}, ["k"])
    collector(5, 0, 3, 0, None)
    with pytest.raises(IndexError):
        collector.lines(b"short\n", 6, {}, ["k"])       # a pattern id without a key
    assert collector.lines(b"short\n", 6, {}, ["k"]) == (1, [])   # each call empties the collector


# ----------------------------------------------------------------- stats lines
_STATS_PIECES = ["Engine 000: ", "Engine 12: ", "Engine : ", "Engine 7", "xEngine 3: ", "Avg prompt throughput: ",
                 "Avg prompt throughput: 12.5 tokens/s, ", "Avg generation throughput: ", "1.0", "..", "3", " tokens/s, ",
                 "Running: ", "4 reqs", " reqs", ".", "1.2.3", "5.", ", Swapped: ", "0 reqs", ", Swapped: x reqs", ", Pending: 2 reqs",
                 ", Waiting: 1 reqs", ", GPU KV cache usage: 5.5%", ", MM cache hit rate: 1%", "External prefix",
                 "(EngineCore_DP0 pid=12) ", ")", "(", " ", "INFO 08-02 11:59:41 [loggers.py:259] ", "\t", "é", "\x1b[0m",
                 "9" * 18, "9" * 19, "1" * 5000, "0" * 30 + "7", "9" * 400 + ".5", ", Waiting: " + "8" * 19 + " reqs",
                 ", Pending: " + "8" * 18 + " reqs", "Running: " + "5" * 19 + " reqs", "٣"]
_FULL = ("Avg prompt throughput: 1.5 tokens/s, Avg generation throughput: 200.0 tokens/s, Running: 3 reqs")


def _stats_cases(rng: random.Random) -> list[str]:
    cases = ["Avg prompt throughput: 1 tokens/s, Avg generation throughput: 2 tokens/s, Running: 1.5 reqs",
             "Avg prompt throughput: . tokens/s, Avg generation throughput: 2. tokens/s, Running: 0 reqs",
             "Avg prompt throughput:  1 tokens/s, Avg generation throughput: 2 tokens/s, Running: 1 reqs",
             "Engine 1: Engine 2: " + _FULL, "Engine 1: " + _FULL[:40] + " Engine 2: " + _FULL,
             _FULL + ", Swapped: 1 reqs", _FULL + ", Swapped: 1.0 reqs", _FULL + ", Swapped: 1 reqs, Waiting: 2 reqs",
             "Avg prompt throughput: 1.2.3 tokens/s, Avg generation throughput: 2 tokens/s, Running: 1 reqs",
             "Avg prompt throughput: 1. tokens/s, Avg generation throughput: .5 tokens/s, Running: 1 reqs",
             "Avg prompt throughput: 1 tokens/s, Avg generation throughput: . tokens/s, Running: 1 reqs " + _FULL]
    for _ in range(3000):
        parts = [rng.choice(_STATS_PIECES) for _ in range(rng.randint(0, 10))]
        if rng.random() < 0.6:
            parts.insert(rng.randint(0, len(parts)), rng.choice(["", "Engine 001: ", "Engine 42: "]) + _FULL)
        cases.append("".join(parts))
    return cases


def test_stats_line_reads_what_the_regex_reads():
    from rlhealth.probes.parse import vllm as vp

    rng = random.Random(11)
    matched = 0
    for text in _stats_cases(rng):
        raw = text.encode()
        got = _linescan.stats_line(raw)
        if any(not (0x20 <= b <= 0x7e or b == 9) for b in raw):
            assert got is False, text
            continue
        m = vp.STATS_RE.search(text)
        if m is None:
            assert got is None, text
            continue
        matched += 1
        assert got == (text, m.group("engine"), m.group("swapped") is not None,
                       "MM cache hit rate" in text or "External prefix" in text, text.find(")")), text
        assert vp.stats_match(text).group(0) == m.group(0)
    assert matched > 1000


def test_stats_fields_read_what_stats_sample_reads():
    """``stats_fields`` against the regex match read by ``vllm.stats_sample``: the same numbers
    (the same types; a decimal past the float range is inf both ways), None without a match,
    NotImplemented for non-ASCII text; counts longer than 18 digits make no match."""
    from rlhealth.probes.parse import vllm as vp

    rng = random.Random(12)
    read = 0
    for text in _stats_cases(rng):
        got = _linescan.stats_fields(text)
        if not text.isascii():
            assert got is NotImplemented, text
            continue
        m = vp.STATS_RE.search(text)
        if m is None:
            assert got is None, text
            continue
        read += 1
        sample = vp.stats_sample(text, m, "e", "v1", "s", 1, None)
        want = (sample.prompt_tok_s, sample.gen_tok_s, sample.running, sample.waiting, sample.kv_pct)
        assert got == want and [type(v) for v in got] == [type(v) for v in want], text
        assert all(repr(a) == repr(b) for a, b in zip(got, want)), text
    assert read > 1000
    long_count = _FULL.replace("Running: 3", "Running: " + "3" * 19)
    assert _linescan.stats_fields(long_count) is None and vp.STATS_RE.search(long_count) is None
    with pytest.raises(TypeError):
        _linescan.stats_fields(b"bytes")


def test_stats_line_takes_buffers_and_real_lines():
    line = (b"(AsyncVLLMInferenceEngine pid=3117, ip=10.1.1.11) INFO 08-02 11:59:41 [loggers.py:259] Engine 000: "
            b"Avg prompt throughput: 8.1 tokens/s, Avg generation throughput: 310.2 tokens/s, Running: 12 reqs, "
            b"Waiting: 0 reqs, GPU KV cache usage: 41.0%, Prefix cache hit rate: 12.0%")
    got = _linescan.stats_line(bytearray(line))
    assert got == (line.decode(), "000", False, False, line.index(b")"))
    v0 = b"INFO 06-22 20:16:34 metrics.py:345] " + _FULL.encode() + b", Swapped: 0 reqs, Pending: 1 reqs"
    assert _linescan.stats_line(memoryview(v0))[1:4] == (None, True, False)


def test_stats_lines_route_as_the_regex_path_routes_them():
    """The stats extractor's ``feed_raw`` (C read + memo key) against ``feed_text(clean_line(raw))``:
    the same per-engine queues, counts and eras, over fuzzed lines under a few actor prefixes."""
    from rlhealth.probes.extract import FileInfo
    from rlhealth.probes.extractors.stats import Stats
    from rlhealth.probes.textio import clean_line

    rng = random.Random(5)
    heads = ["", "(EngineCore_DP0 pid=12) ", "(AsyncVLLMInferenceEngine pid=3117, ip=10.1.1.11) INFO 08-02 11:59:41 ",
             "(A pid=1) (B pid=2) ", "x" * 600 + ") "]
    lines = [(rng.choice(heads) + text).encode() for text in _stats_cases(rng)]
    lines += [b"\xff" + lines[0], "(E pid=9) é ".encode() + _FULL.encode()]
    reads = []
    for use_c in (True, False):
        stats = Stats(None)
        stats.begin(FileInfo("engine.log", 0, None, None))
        for i, raw in enumerate(lines, start=1):
            if use_c:
                stats.feed_raw(raw, i)
            else:
                stats.feed_text(clean_line(raw), i)
        reads.append((stats.count, sorted(stats.eras), {k: list(v) for k, v in stats.stats.items()}))
    assert reads[0] == reads[1]
    assert reads[0][0] > 1000 and len(reads[0][2]) >= 8


# ----------------------------------------------------------------- the stats sink
def _routed(path: Path, sink: bool, monkeypatch) -> tuple:
    from rlhealth.catalog import load_catalog
    from rlhealth.probes import bundle as B
    from rlhealth.probes.extract import FileInfo
    from rlhealth.probes.extractors import extraction
    from rlhealth.probes.extractors import stats as stats_mod

    monkeypatch.setattr(stats_mod, "STATS_SINK", sink)
    catalog = load_catalog()
    into = extraction(catalog, {}, None)
    stats = next(ex for ex in into.extractors if isinstance(ex, stats_mod.Stats))
    made = []
    make = stats.sink
    stats.sink = lambda *args: made.append(make(*args)) or made[-1]
    into.begin(FileInfo(path.name, 0, None, None))
    queues = stats.stats
    lines = into.scan(B.scanner_for(catalog), path)
    assert len(made) == 1 and (made[0] is not None) == sink
    _routed.sink_count = made[0].count if made[0] is not None else 0
    read = B.BundleRead(root=path.parent)
    snapshot = {k: list(v) for k, v in queues.items()}      # as queued, before the result builds samples
    into.result(read)
    return (lines, read.stats_count, sorted(read.stats_eras), snapshot,
            {k: (a.count, [o.line for o in a.kept]) for k, a in read.signatures.items()}, read.steps_finished)


@pytest.mark.parametrize("block_bytes", [1 << 23, 4096, 700])
def test_stats_sink_routes_as_stats_raw(tmp_path, monkeypatch, block_bytes):
    """A file routed with the C stats sink and without it (every stats line through ``_stats_raw``):
    the same per-engine queues in the same order, counts, eras, line count and other routing, over
    fuzzed stats lines under several actor prefixes mixed with lines the sink must leave to Python
    (non-ASCII, a ")" past the memoised head, longer than the line cap, matched by another
    pattern too) and other matching lines, cut into blocks of several sizes."""
    from rlhealth.probes import scan as S

    original = S.Scanner.iter_blocks
    monkeypatch.setattr(S.Scanner, "iter_blocks", lambda self, path, bb=block_bytes, sink=None: original(self, path, bb, sink=sink))
    monkeypatch.setattr(S, "MAX_LINE_BYTES", 600)
    rng = random.Random(21)
    heads = ["", "(EngineCore_DP0 pid=12) ", "(AsyncVLLMInferenceEngine pid=3117, ip=10.1.1.11) INFO 08-02 11:59:41 ",
             "(A pid=1) (B pid=2) ", "(Worker pid=7, ip=10.0.0.2) ", "x" * 300 + ") "]
    others = ["Started: 'step'", "Finished: 'step', time cost: 2.5s", "Generation Buffer Progress: 3/8",
              "Traceback (most recent call last):", "plain filler line", "", "\tindented filler"]
    lines = []
    for text in _stats_cases(rng):
        lines.append(rng.choice(heads) + text)
        roll = rng.random()
        if roll < 0.3:
            lines.append(rng.choice(others))
        elif roll < 0.32:
            lines.append("é " + _FULL)                                   # non-ASCII: Python's
        elif roll < 0.34:
            lines.append(_FULL + " Traceback (most recent call last):")  # two patterns: Python's
        elif roll < 0.35:
            lines.append(_FULL + " " + "y" * 700)                         # past the line cap
    path = tmp_path / "engine.log"
    path.write_text("\n".join(lines) + "\n")
    with_sink = _routed(path, True, monkeypatch)
    took = _routed.sink_count
    without = _routed(path, False, monkeypatch)
    assert with_sink == without
    if block_bytes < 1 << 20:          # one 8 MiB block holds a line the sink leaves: all Python
        assert took > 100
    assert with_sink[1] > 1000 and len(with_sink[3]) >= 6 and with_sink[4]


def test_stats_sink_takes_whole_blocks_only(tmp_path, monkeypatch):
    """A block holding one stats line the sink cannot take is routed wholly by Python (so the
    queues keep line order); a block without one goes to the sink; counts and line numbers add up."""
    from rlhealth.catalog import load_catalog
    from rlhealth.probes import bundle as B

    catalog = load_catalog()
    scanner = B.scanner_for(catalog)
    good = ("(E pid=1) " + _FULL).encode()
    block = b"\n".join([good, b"filler", good]) + b"\n"
    mixed = b"\n".join([good, "(E pid=1) é ".encode() + _FULL.encode(), good]) + b"\n"
    queues, eras, calls = {}, set(), []

    def resolve(text):
        calls.append(text)
        return ("E#" + text[:3], "v1-early")

    sink = _linescan.StatsSink(scanner.stats_id, "f.log", queues, eras, {}, resolve,
                               lambda engine: queues.setdefault(engine, []), 200, 4096, 1 << 20)
    for data in (block, mixed):
        collector = _linescan.Collector()
        scanner._db.scan(data, match_event_handler=collector)
        newlines, hits = collector.lines(data, len(data), {}, scanner._keys, sink)
        assert newlines == 3
        if data is block:
            assert hits == [] and sink.count == 2 and sink.lines_before == 3
        else:
            assert [h[2] for h in hits] == [0, 1, 2] and sink.count == 2 and sink.lines_before == 6
    assert len(calls) == 1                                   # one memo key: resolved once
    assert [item[2] for item in queues["E#(E "]] == [1, 3]   # line numbers of the first block
    assert eras == {"v1-early"}
    with pytest.raises(TypeError):
        _linescan.Collector().lines(b"x\n", 2, {}, ["k"], object())
    with pytest.raises(TypeError):
        _linescan.StatsSink(0, "f", {}, set(), {}, None, None, 1, 1, 1)
