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


def _reader(groups=None, markers=None, identity=None):
    from rlhealth.probes.parse import vllm as vp

    return _linescan.StatsReader(*vp.stats_reader_spec(groups or vp.STATS_LINE, markers or vp.ERA_MARKERS,
                                                       identity or vp.IDENTITY_FIELDS))


def _expected_key(text: str, m, groups, markers, identity) -> bytes:
    """The memo key ``StatsReader.line`` documents, from the regex match: head, identity texts,
    which groups matched (the ones of its fields that matched: for a grammar whose groups all hold
    a field), whether it holds a marker."""
    close = text.find(")")
    key = text[:close + 1].encode() + b"\0"
    for name in identity:
        key += b"1" + m.group(name).encode() if m.group(name) is not None else b"0"
        key += b"\0"
    key += b"\0"
    for group in groups:
        names = [item.name for item in group.items[1::2]]
        key += b"1" if m.group(names[0]) is not None else b"0"
    return key + (b"1" if any(marker in text for marker in markers) else b"0")


def _check_line(reader, text: str, regex, groups, markers, identity) -> bool:
    """``reader.line`` and ``reader.fields`` against the regex on one line; True when it matched."""
    from rlhealth.probes.parse import vllm as vp

    raw = text.encode()
    got = reader.line(raw)
    values = reader.fields(text)
    if any(not (0x20 <= b <= 0x7e or b == 9) for b in raw):
        assert got is False, text
        if not text.isascii():
            assert values is NotImplemented, text
            return False
    m = regex.search(text)
    if m is None:
        assert got in (None, False) and values is None, text
        return False
    if got is not False:
        assert got[0] == text and got[2] == text.find(")"), text
        if all(group.items[1::2] for group in groups):
            assert got[1] == _expected_key(text, m, groups, markers, identity), text
    fields = [item for group in groups for item in group.items[1::2]]
    want = tuple(None if m.group(f.name) is None else f.kind.value(m.group(f.name)) for f in fields)
    assert values == want and [type(v) for v in values] == [type(v) for v in want], text
    assert all(repr(a) == repr(b) for a, b in zip(values, want)), text
    if groups is vp.STATS_LINE:
        assert vp.stats_values(m) == want and vp.stats_match(text).group(0) == m.group(0), text
    return True


def test_stats_reader_reads_what_the_regex_reads():
    """``StatsReader.line`` / ``.fields`` against ``STATS_RE`` over fuzzed lines: the same match,
    fields of the same types and values (a decimal past the float range is inf both ways), None
    without a match, False / NotImplemented for non-printable / non-ASCII text; counts longer than
    18 digits make no match."""
    from rlhealth.probes.parse import vllm as vp

    rng = random.Random(11)
    reader = _reader()
    matched = sum(_check_line(reader, text, vp.STATS_RE, vp.STATS_LINE, vp.ERA_MARKERS, vp.IDENTITY_FIELDS)
                  for text in _stats_cases(rng))
    assert matched > 1000
    long_count = _FULL.replace("Running: 3", "Running: " + "3" * 19)
    assert reader.fields(long_count) is None and vp.STATS_RE.search(long_count) is None
    with pytest.raises(TypeError):
        reader.fields(b"bytes")


def _field_text(rng: random.Random, kind) -> str:
    """A field's text: mostly one the kind holds, else a near miss (empty, too long, two dots, a
    lone dot, a letter, a non-ASCII digit)."""
    digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 1, 2, 3, 5, 17, 18, 19, 25])))
    if kind.dot and rng.random() < 0.5:
        cut = rng.randint(0, len(digits))
        digits = digits[:cut] + "." + digits[cut:]
    roll = rng.random()
    if roll < 0.8:
        return digits
    return rng.choice(["", ".", "1.2.3", "..", "1a", "x", "٣", "1" * 400, "0" * 30 + "7", "-1", " 1", "1e5", "5."])


def _literal_text(rng: random.Random, item) -> str:
    texts = item if isinstance(item, tuple) else (item,)
    text = rng.choice(texts)
    roll = rng.random()
    if roll < 0.9:
        return text
    if roll < 0.95 and len(text) > 1:
        k = rng.randrange(len(text))
        return text[:k] + text[k + 1:]                      # a character missing
    return text.upper() if text.upper() != text else text + "!"


def _grammar_lines(rng: random.Random, groups, count: int, noise: list[str]) -> list[str]:
    """Lines generated from a grammar description: each group present or not (the required one
    mostly present), its literals mostly exact, its fields mostly valid, between noise, some
    lines holding two candidate matches."""
    from rlhealth.probes.parse.vllm import Field

    def one() -> str:
        out = []
        for group in groups:
            if group.optional and rng.random() < 0.4:
                continue
            if not group.optional and rng.random() < 0.05:
                continue
            for item in group.items:
                out.append(_field_text(rng, item.kind) if isinstance(item, Field) else _literal_text(rng, item))
        return "".join(out)

    lines = []
    for _ in range(count):
        parts = [rng.choice(noise) for _ in range(rng.randint(0, 3))]
        parts.insert(rng.randint(0, len(parts)), one())
        if rng.random() < 0.2:
            parts.insert(rng.randint(0, len(parts)), one())
        lines.append("".join(parts))
    return lines


@pytest.mark.parametrize("seed", range(4))
def test_lines_generated_from_the_description_read_alike(seed):
    """Lines generated from ``STATS_LINE`` itself (every optional group on and off, near-miss
    numbers and literals): the C reader and ``STATS_RE`` agree on each."""
    from rlhealth.probes.parse import vllm as vp

    rng = random.Random(100 + seed)
    reader = _reader()
    noise = ["", " ", "(EngineCore_DP0 pid=12) ", "INFO 08-02 11:59:41 [loggers.py:259] ", "Engine 3: ", "Engine ",
             ", Prefix cache hit rate: 12.0%", ", MM cache hit rate: 0.0%", "External prefix", "\t", "é", ")", "9"]
    lines = _grammar_lines(rng, vp.STATS_LINE, 4000, noise)
    matched = sum(_check_line(reader, text, vp.STATS_RE, vp.STATS_LINE, vp.ERA_MARKERS, vp.IDENTITY_FIELDS)
                  for text in lines)
    assert 1000 < matched < len(lines)


def test_another_description_reads_alike():
    """The C reader interprets the description it is given, not the vLLM line: a made-up grammar
    (alternatives in the group before the anchor, a group without fields, a digits field in the
    required group, an int field capped at 3 digits) read by it and by its generated regex."""
    import re

    from rlhealth.probes.parse import vllm as vp
    from rlhealth.probes.parse.vllm import COUNT, DIGITS, NUMBER, Field, FieldKind, Group

    small = FieldKind(dot=False, max_digits=3, value=int)
    groups = (
        Group(True, (("rank ", "node "), Field("who", DIGITS), "/", Field("of", small), " | ")),
        Group(False, ("step=", Field("step", COUNT), " loss=", Field("loss", NUMBER), " id=", Field("id", DIGITS), ";")),
        Group(True, (" (eval)",)),
        Group(True, ((" lr=", " LR="), Field("lr", NUMBER), " x")),
    )
    regex = re.compile(vp.grammar_regex(groups))
    reader = _reader(groups, ("nan", "warmup"), ("who", "of"))
    rng = random.Random(9)
    lines = _grammar_lines(rng, groups, 6000, ["", " ", "warmup ", "nan", "rank ", "step=", "x)", "7"])
    matched = sum(_check_line(reader, text, regex, groups, ("nan", "warmup"), ("who", "of")) for text in lines)
    assert 1000 < matched < len(lines)


@pytest.mark.parametrize("groups", [
    "two required", "required third", "field after field", "literal continues a field", "prefix alternatives",
    "anchor alternatives", "anchor in the group before", "capped decimal"])
def test_descriptions_the_readers_cannot_read_alike_are_refused(groups):
    from rlhealth.probes.parse import vllm as vp
    from rlhealth.probes.parse.vllm import COUNT, NUMBER, Field, FieldKind, Group

    req = Group(False, ("a: ", Field("a", COUNT), " b"))
    cases = {
        "two required": (req, req),
        "required third": (Group(True, ("x",)), Group(True, ("y",)), req),
        "field after field": (Group(False, ("a: ", Field("a", COUNT), Field("b", COUNT), " b")),),
        "literal continues a field": (Group(False, ("a: ", Field("a", NUMBER), ".5 b")),),
        "prefix alternatives": (Group(True, ("ab", "abc")), req),
        "anchor alternatives": (Group(False, (("a: ", "c: "), Field("a", COUNT), " b")),),
        "anchor in the group before": (Group(True, ("say a",)), req),
        "capped decimal": (Group(False, ("a: ", Field("a", FieldKind(True, 5, float)), " b")),),
    }
    with pytest.raises(ValueError):
        vp.grammar_regex(cases[groups])
    with pytest.raises(ValueError):
        vp.stats_reader_spec(cases[groups], (), ())


def test_stats_reader_refuses_a_malformed_spec():
    from rlhealth.probes.parse import vllm as vp

    literals, steps, groups, fields, identity, markers = vp.stats_reader_spec()
    for bad in [(literals, steps, groups, fields[:2], identity, markers),          # a field index past the fields
                (literals[:3], steps, groups, fields, identity, markers),          # a step's literals past them
                (literals, steps[:3], groups, fields, identity, markers),          # a group's steps past them
                (literals, steps, groups, ((True, 0, "i"),) + fields[1:], identity, markers),
                (literals, steps, groups, ((False, 19, "i"),) + fields[1:], identity, markers),
                (literals, steps, groups[1:2] * 2, fields, identity, markers),     # two required groups
                (literals, steps, groups[2:], fields, identity, markers),          # none
                (literals, steps, groups, fields, (99,), markers)]:
        with pytest.raises(ValueError):
            _linescan.StatsReader(*bad)
    with pytest.raises(TypeError):
        _linescan.StatsReader((b"",), ((0, 1, -1),), ((False, 0, 1),), (), (), ())     # an empty literal
    with pytest.raises(TypeError):
        _linescan.StatsReader(literals, steps, groups, fields, identity, ("text",))


def test_stats_line_takes_buffers_and_real_lines():
    line = (b"(AsyncVLLMInferenceEngine pid=3117, ip=10.1.1.11) INFO 08-02 11:59:41 [loggers.py:259] Engine 000: "
            b"Avg prompt throughput: 8.1 tokens/s, Avg generation throughput: 310.2 tokens/s, Running: 12 reqs, "
            b"Waiting: 0 reqs, GPU KV cache usage: 41.0%, Prefix cache hit rate: 12.0%")
    reader = _reader()
    got = reader.line(bytearray(line))
    assert got[0] == line.decode() and got[2] == line.index(b")")
    assert got[1] == line[:got[2] + 1] + b"\x001000\x00\x0011011" + b"0"
    v0 = b"INFO 06-22 20:16:34 metrics.py:345] " + _FULL.encode() + b", Swapped: 0 reqs, Pending: 1 reqs"
    assert reader.line(memoryview(v0))[1:] == (b"\x000\x00\x0001110" + b"0", -1)


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

    sink = _linescan.StatsSink(_reader(), scanner.stats_id, "f.log", queues, eras, {}, resolve,
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
        _linescan.StatsSink(_reader(), 0, "f", {}, set(), {}, None, None, 1, 1, 1)
    with pytest.raises(TypeError):
        _linescan.StatsSink(object(), 0, "f", {}, set(), {}, len, len, 1, 1, 1)
