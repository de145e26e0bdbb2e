"""The C line engine (rlhealth/_linescan.c) gives exactly the Python line engine's matching lines.

Both turn one scanned block's hyperscan matches into ``(newlines, [(line_start, line_end,
newlines_before, keys)])``. Generated blocks exercise what can differ: several patterns and
several matches on one line, two patterns with one key, matches whose last byte is a newline
(``\\s``), a match at offset 0, a last line without newline, empty lines, CR bytes, a block that
ends before its buffer does, and blocks past NUMPY_MIN_BYTES (the Python engine's numpy path).
"""
from __future__ import annotations

import random

import pytest

from rlhealth.probes import scan as scan_mod
from rlhealth.probes.scan import Pattern, Scanner

_linescan = pytest.importorskip("rlhealth._linescan", reason="built without the C line engine")

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
