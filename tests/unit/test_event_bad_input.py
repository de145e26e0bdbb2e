"""Bad input to the event reader: a traceback cut in the middle, a 10 MB one-line exception message,
interleaved tracebacks of 8 torchrun ranks in one file, non-UTF-8 bytes inside a traceback. Each
gives an event (or at least no crash) and the events after it are still read; the bundle reader's
scan of the same bytes does not crash either."""
from __future__ import annotations

from pathlib import Path

from rlhealth.catalog import load_catalog
from rlhealth.probes.bundle import scan_signatures
from rlhealth.probes.events import read_events

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 10, in <module>',
    "    main()",
    '  File "/app/train.py", line 7, in main',
    "    step(batch)",
]
AFTER = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.71 GiB."
"""An unrelated later event: it must still be read after the bad part."""
LATER = ["INFO step 12 done", "Traceback (most recent call last):", '  File "/app/eval.py", line 3, in <module>',
         "    run()", "ValueError: bad shape (3, 4)"]


def _scan(tmp_path: Path, data: bytes):
    log = tmp_path / "excerpt.log"
    log.write_bytes(data)
    return scan_signatures([(log, "excerpt.log")], load_catalog(), None)


def test_traceback_cut_in_the_middle(tmp_path):
    lines = TRACEBACK[:3] + ["2026-08-01 12:00:01,000 - trainer - INFO - restarting"] + LATER
    events = read_events(lines)
    assert events, "a cut traceback is an event (or the later one still is)"
    assert events[-1].exc_type == "ValueError" and events[-1].line == len(lines)
    cut = [e for e in events if e.line <= 3]
    assert cut and cut[0].exc_type is None, [repr(e) for e in events]
    read = _scan(tmp_path, "\n".join(lines).encode() + b"\n")
    assert any(ev.exc_type == "ValueError" for _, ev, _ in read.events.events())


def test_traceback_cut_at_end_of_file():
    events = read_events(TRACEBACK[:4])
    assert len(events) == 1 and events[0].exc_type is None and events[0].first_line == 1


def test_ten_megabyte_single_line_message(tmp_path):
    big = "RuntimeError: " + "x" * (10 * 1024 * 1024)
    lines = TRACEBACK + [big] + LATER
    events = read_events(lines)
    assert events[0].exc_type == "RuntimeError" and events[0].line == len(TRACEBACK) + 1
    assert len(events[0].message) <= 10_000
    assert events[-1].exc_type == "ValueError"
    read = _scan(tmp_path, "\n".join(lines).encode() + b"\n")
    assert any(ev.exc_type == "ValueError" for _, ev, _ in read.events.events())


def test_interleaved_tracebacks_of_eight_ranks():
    body = TRACEBACK + [AFTER]
    lines = []
    for row in range(len(body)):
        for rank in range(8):
            text = body[row] if rank != 5 or row != len(body) - 1 else "ValueError: rank 5 differs"
            lines.append(f"[rank{rank}]: {text}")
    lines += LATER
    events = read_events(lines)
    per_rank = {e.process: e for e in events if e.process}
    assert sorted(per_rank) == [f"rank{r}" for r in range(8)], [repr(e) for e in events]
    for rank, ev in per_rank.items():
        want = "ValueError" if rank == "rank5" else "torch.OutOfMemoryError"
        assert ev.exc_type == want, (rank, ev)
        assert ev.first_line == int(rank[4:]) + 1
        assert lines[ev.line - 1].startswith(f"[{rank}]: ")
    assert events[-1].exc_type == "ValueError" and events[-1].process is None


def test_non_utf8_bytes_inside_a_traceback(tmp_path):
    raw = ("\n".join(TRACEBACK[:3]).encode() + b"\n    caf\xe9 = \xff\xfe load()\n" + "\n".join(TRACEBACK[3:]).encode()
           + b"\nUnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 3\xe9\xff\n"
           + "\n".join(LATER).encode() + b"\n")
    lines = raw.decode("utf-8", "replace").splitlines()
    events = read_events(lines)
    assert events[0].exc_type == "UnicodeDecodeError", [repr(e) for e in events]
    assert events[-1].exc_type == "ValueError"
    read = _scan(tmp_path, raw)
    types = [ev.exc_type for _, ev, _ in read.events.events()]
    assert "UnicodeDecodeError" in types and "ValueError" in types, types
