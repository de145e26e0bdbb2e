"""probes/scan.py on awkward input: CRLF, no trailing newline, a 3 MB line, binary bytes, an
empty file, ANSI escapes, block boundaries. (Equivalence with the straightforward scanner over
real bundles is tests/test_scan_equivalence.py.)"""
from __future__ import annotations

import pytest

from rlhealth.probes import scan as scan_mod
from rlhealth.probes.scan import Pattern, Scanner, strip_actor_prefix

PATTERNS = [Pattern("tb", r"Traceback \(most recent call last\)"), Pattern("oom", r"CUDA out of memory", caseless=True),
            Pattern("x_stats", r"Avg generation throughput: [0-9.]+ tokens/s"), Pattern("x_wandb", r"WANDB_MIRROR\s+kind=")]


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner(PATTERNS)


def scan(scanner: Scanner, tmp_path, data: bytes, **kw):
    path = tmp_path / "f.log"
    path.write_bytes(data)
    hits = []
    lines = scanner.scan_file(path, "f.log", hits.append, **kw)
    return lines, hits


def test_empty_file(scanner, tmp_path):
    assert scan(scanner, tmp_path, b"") == (0, [])


def test_no_match_counts_lines(scanner, tmp_path):
    lines, hits = scan(scanner, tmp_path, b"a\nb\nc\n" * 1000)
    assert lines == 3000 and hits == []


def test_line_numbers_and_keys(scanner, tmp_path):
    data = (b"noise\n" * 9 + b"Traceback (most recent call last):\n" + b"noise\n" * 90
            + b"x Avg generation throughput: 12.5 tokens/s and cuda OUT OF MEMORY\n")
    lines, hits = scan(scanner, tmp_path, data)
    assert lines == 101
    assert [(h.lineno, h.keys) for h in hits] == [(10, ("tb",)), (101, ("oom", "x_stats"))]
    assert hits[0].text == "Traceback (most recent call last):"


def test_crlf(scanner, tmp_path):
    lines, hits = scan(scanner, tmp_path, b"a\r\nTraceback (most recent call last):\r\nb\r\n")
    assert lines == 3
    assert [(h.lineno, h.text) for h in hits] == [(2, "Traceback (most recent call last):")]
    assert list(hits[0].following_lines()) == ["b"]


def test_no_trailing_newline(scanner, tmp_path):
    lines, hits = scan(scanner, tmp_path, b"a\nb\nWANDB_MIRROR kind=train step=1 metrics={}")
    assert lines == 2                     # newlines read; the unterminated last line still scanned
    assert [(h.lineno, h.keys, h.text) for h in hits] == [(3, ("x_wandb",), "WANDB_MIRROR kind=train step=1 metrics={}")]


def test_three_megabyte_line(scanner, tmp_path):
    giant = b"Traceback (most recent call last) " + b"x" * (3 * 1024 * 1024) + b" CUDA out of memory"
    data = b"first\n" + giant + b"\nWANDB_MIRROR kind=train step=2 metrics={}\n"
    lines, hits = scan(scanner, tmp_path, data)          # inside one 8 MiB block: one hit, text capped
    assert lines == 3
    assert [(h.lineno, h.keys) for h in hits] == [(2, ("oom", "tb")), (3, ("x_wandb",))]
    assert len(hits[0].text) == scan_mod.MAX_LINE_BYTES
    lines, hits = scan(scanner, tmp_path, data, block_bytes=65536)   # longer than a block: 1 MiB segments
    assert lines == 3
    assert {h.keys for h in hits if h.lineno == 2} == {("tb",), ("oom",)}    # segments keep the line number
    assert all(len(h.text) <= scan_mod.MAX_LINE_BYTES for h in hits)
    assert [(h.lineno, h.keys) for h in hits if h.lineno != 2] == [(3, ("x_wandb",))]


def test_binary_bytes(scanner, tmp_path):
    data = b"\x00\xff\xfe\x01garbage\n\x80\x81 Traceback (most recent call last) \x00\xc3\x28\n" + bytes(b for b in range(256) if b != 10) + b"\n"
    lines, hits = scan(scanner, tmp_path, data)
    assert lines == 3 and [h.lineno for h in hits] == [2]
    assert "Traceback (most recent call last)" in hits[0].text
    assert "\x00" not in hits[0].text and "\ufffd" in hits[0].text


def test_ansi_escapes(scanner, tmp_path):
    data = b"\x1b[0;36m(Worker_TP0 pid=481418)\x1b[0;0m x Avg generation throughput: 1.0 tokens/s\x1b[0m\n"
    _, hits = scan(scanner, tmp_path, data)
    assert hits[0].text == "(Worker_TP0 pid=481418) x Avg generation throughput: 1.0 tokens/s"
    assert strip_actor_prefix(hits[0].text) == "x Avg generation throughput: 1.0 tokens/s"


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 4096, scan_mod.BLOCK_BYTES])
def test_block_size_does_not_change_line_local_hits(scanner, tmp_path, block_bytes):
    data = b"".join(b"line %d Traceback (most recent call last)\n" % i if i % 7 == 0 else b"line %d\r\n" % i
                    for i in range(500))
    lines, hits = scan(scanner, tmp_path, data, block_bytes=block_bytes)
    assert lines == 500
    assert [h.lineno for h in hits] == [i + 1 for i in range(500) if i % 7 == 0]
    assert all(h.text == f"line {h.lineno - 1} Traceback (most recent call last)" for h in hits)


def test_following_lines_stop_at_block_end(scanner, tmp_path):
    data = b"Traceback (most recent call last):\n  File x\nValueError: v\n" + b"z" * 100 + b"\n"
    _, hits = scan(scanner, tmp_path, data, block_bytes=40)
    assert list(hits[0].following_lines()) == []            # the block ends with the matching line
    _, hits = scan(scanner, tmp_path, data)
    assert list(hits[0].following_lines())[:2] == ["  File x", "ValueError: v"]


def test_iter_blocks_cover_the_file(scanner, tmp_path):
    path = tmp_path / "f.log"
    data = b"".join(b"%06d Avg generation throughput: 1 tokens/s\n" % i for i in range(20000))
    path.write_bytes(data)
    total, seen = 0, 0
    for block, end, count, hits in scanner.iter_blocks(path, block_bytes=65536):
        assert block[end - 1:end] == b"\n" and block[:end].count(b"\n") == count
        total += count
        seen += len(hits)
    assert total == 20000 and seen == 20000


def test_unreadable_file_raises_oserror(scanner, tmp_path):
    with pytest.raises(OSError):
        scanner.scan_file(tmp_path / "missing.log", "missing.log", lambda h: None)


def test_scan_expressions_split_line_start_branches_only():
    from rlhealth.probes.scan import scan_expressions

    assert scan_expressions(r"(?:^|\n)ab|cd") == ("cd", r"^ab", r"\nab")
    assert scan_expressions(r"(?:x|(?:^|\n)F[0-9]+)") == ("x", r"^F[0-9]+", r"\nF[0-9]+")
    assert scan_expressions(r"(?:^|\n)ab") == (r"^ab", r"\nab")
    for whole in (r"plain", r"(?:a|b)(?:^|\n)c", r"(?i)(?:^|\n)x|y", r"(?:^|\n)*x|y", r"(?:x|(?:^|\n)y)z",
                  r"[(?:^|\n)]x", r"[[:alpha:]]|(?:^|\n)y", r"\Q(?:^|\n)\E|y", r"(?#c)(?:^|\n)x"):
        got = scan_expressions(whole)
        assert got == (whole,) or whole == r"[(?:^|\n)]x", whole
    # a class holding the marker is read as a class: its branch is not split
    assert scan_expressions(r"[(?:^|\n)]x|(?:^|\n)y") == (r"[(?:^|\n)]x", r"^y", r"\ny")


def test_split_pattern_keys_the_same_lines(tmp_path):
    from rlhealth.probes.scan import Pattern, Scanner

    data = b"F1 a\nxF1\n  F1\nF1\r\nz\n\nF1 end"
    path = tmp_path / "f.log"
    path.write_bytes(data)
    regex = r"(?:zz|(?:^|\n)F1)"
    got, want = [], []
    Scanner([Pattern("k", regex)]).scan_file(path, "f", lambda h: got.append((h.lineno, h.keys, h.text)))
    Scanner([Pattern("k", regex, parts=(regex,))]).scan_file(path, "f", lambda h: want.append((h.lineno, h.keys, h.text)))
    assert got == want and [n for n, _, _ in got] == [1, 4, 7]
