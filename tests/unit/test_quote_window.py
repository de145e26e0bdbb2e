"""Quotes of long lines are taken around the match (with … on each cut side), the scan carries
where the match lies, and a diagnosis quotes a watchdog line found at the end of a giant line."""
from __future__ import annotations

import shutil
from pathlib import Path

from rlhealth.probes import scan as scan_mod
from rlhealth.probes.scan import Pattern, Scanner
from rlhealth.probes.textio import QUOTE_MAX_CHARS, quote

INCIDENTS = Path(__file__).resolve().parents[1] / "incidents"


def test_quote_without_position_keeps_the_start():
    text = "a" * 600
    assert quote(text) == "a" * 499 + "…"
    assert quote("short line", at=3) == "short line"


def test_quote_is_centred_on_the_match_with_ellipses_on_cut_sides():
    text = "x" * 5000 + " MATCH HERE " + "y" * 5000
    q = quote(text, at=5006)
    assert len(q) == QUOTE_MAX_CHARS and q.startswith("…") and q.endswith("…")
    assert "MATCH HERE" in q
    centre = q.index("MATCH")
    assert abs(centre - QUOTE_MAX_CHARS // 2) < 20, centre
    end = quote("x" * 5000 + " MATCH", at=5003)           # match at the end: only the start is cut
    assert end.startswith("…") and end.endswith(" MATCH") and len(end) == QUOTE_MAX_CHARS
    start = quote("MATCH " + "y" * 5000, at=2)             # match at the start: only the end is cut
    assert start.startswith("MATCH") and start.endswith("…")


def test_quote_window_is_redacted():
    secret = "hf_" + "A1b2C3d4" * 5
    text = secret + " " + "x" * 2000 + " MATCH " + secret + " " + "y" * 2000
    q = quote(text, at=2048)
    assert "MATCH" in q and "A1b2C3d4" not in q and "<redacted:" in q


def _scan(tmp_path: Path, data: bytes, **kw):
    scanner = Scanner([Pattern("oom", r"CUDA out of memory"), Pattern("x_wandb", r"WANDB_MIRROR")])
    path = tmp_path / "f.log"
    path.write_bytes(data)
    hits = []
    scanner.scan_file(path, "f.log", hits.append, **kw)
    return hits


def test_scan_carries_the_match_position_of_a_long_line(tmp_path):
    hits = _scan(tmp_path, b"2026-08-01 12:00:00 " + b"x" * 5000 + b" CUDA out of memory " + b"y" * 5000 + b"\n")
    (hit,) = hits
    assert hit.text.startswith("2026-08-01 12:00:00") and hit.at is not None
    assert "CUDA out of memory" in quote(hit.text, hit.at)
    assert _scan(tmp_path, b"short CUDA out of memory line\n")[0].at is None


def test_scan_keeps_a_match_beyond_the_line_cap(tmp_path):
    """A match past ``MAX_LINE_BYTES`` of a giant line: the text keeps the line's head and the match."""
    data = b"2026-08-01 12:00:00 " + b"x" * (3 * 1024 * 1024) + b" CUDA out of memory at the end\n"
    (hit,) = _scan(tmp_path, data)
    assert len(hit.text) <= scan_mod.MAX_LINE_BYTES
    assert hit.text.startswith("2026-08-01 12:00:00") and "CUDA out of memory at the end" in hit.text
    q = quote(hit.text, hit.at)
    assert q.startswith("…") and "CUDA out of memory at the end" in q and len(q) <= QUOTE_MAX_CHARS


def test_diagnosis_quotes_a_watchdog_line_at_the_end_of_a_giant_line(tmp_path):
    from rlhealth.diagnose import diagnose
    from rlhealth.usage import parse_now

    src = next(INCIDENTS.glob("*_nccl-collective-timeout-abort")) / "bundle"
    bundle = tmp_path / "bundle"
    shutil.copytree(src, bundle)
    log = bundle / "finelog.log"
    lines = log.read_bytes().split(b"\n")
    assert b"Watchdog caught collective operation timeout" in lines[180]
    lines[180] = lines[180][:40] + b"x" * (3 * 1024 * 1024) + lines[180][40:]
    log.write_bytes(b"\n".join(lines))
    report = diagnose(bundle, now=parse_now("2026-08-01T15:15:00Z"))
    assert report.verdict == "KILL"
    quoted = [e.text for e in report.gates["liveness"].evidence if e.line == 181]
    assert quoted, report.gates["liveness"].evidence
    assert "Watchdog caught collective operation timeout" in quoted[0] and quoted[0].startswith("…")
    assert len(quoted[0]) <= QUOTE_MAX_CHARS and quoted[0].count("x") < 300
