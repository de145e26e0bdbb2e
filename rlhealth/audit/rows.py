"""Rows of a staged trace export (``train-*.parquet``): their count and the text they carry.

The trace dataset the agentic runbook publishes is a set of parquet shards, one row per exported
trial (MarinSkyRL ``make_and_upload_trace_dataset``). The audit reads them with ``pyarrow``,
streamed a batch at a time, through the confined file access of ``rlhealth.audit.safefs``:

* ``row_count`` is the number of rows the shard's footer declares;
* ``scan_rows`` walks every string value of every row (nested lists and structs included, such
  as ``conversations[0].content``) and reports each credential shape by row and field with the
  value quoted redacted; the secret itself is never returned.

A shard that cannot be read (not parquet, truncated, pyarrow missing) is a reason, never an
exception: the caller records it as a file it could not check.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rlhealth.audit.safefs import Root
from rlhealth.redact import redact, scan

BATCH_ROWS = 256
QUOTE_CHARS = 300


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(redact(str(exc)).split())[:200]}"


def _parquet(root: Root, p: Path):
    """(ParquetFile, open file) or (None, reason)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None, "pyarrow is not installed: parquet rows cannot be read"
    f = root.open_file(p)
    if f is None:
        return None, "unreadable"
    try:
        return (pq.ParquetFile(f), f), None
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError on a file that is not parquet
        f.close()
        return None, f"not a readable parquet file ({_why(exc)})"


def row_count(root: Root, p: Path) -> tuple[int | None, str | None]:
    """(rows the shard's footer declares, None) or (None, why it could not be read)."""
    opened, why = _parquet(root, p)
    if opened is None:
        return None, why
    pf, f = opened
    with f:
        return int(pf.metadata.num_rows), None


def _strings(value, path: str) -> Iterator[tuple[str, str]]:
    """(field path, text) of every string inside a row value."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", "replace")
        yield path, text
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _excerpt(text: str, start: int, end: int) -> str:
    """The text around one match, redacted (the match and any other secret near it)."""
    lo, hi = max(0, start - 80), min(len(text), end + 80)
    quoted = redact(text[lo:hi]).replace("\n", " ").strip()
    quoted = ("…" if lo else "") + quoted + ("…" if hi < len(text) else "")
    return quoted if len(quoted) <= QUOTE_CHARS else quoted[: QUOTE_CHARS - 1] + "…"


def scan_rows(root: Root, p: Path) -> tuple[list[dict], int | None, str | None]:
    """(findings, rows read, None) or ([], None, why the shard could not be read).

    Each finding is ``{"line": <1-based row>, "location": <field path>, "shape", "redacted"}``."""
    opened, why = _parquet(root, p)
    if opened is None:
        return [], None, why
    pf, f = opened
    findings: list[dict] = []
    row = 0
    try:
        with f:
            for batch in pf.iter_batches(batch_size=BATCH_ROWS):
                for record in batch.to_pylist():
                    row += 1
                    for field, text in _strings(record, ""):
                        for m in scan(text):
                            findings.append({"line": row, "location": field, "shape": m.shape,
                                             "redacted": _excerpt(text, m.start, m.end)})
    except Exception as exc:  # a corrupt page part-way: what was read stands, the shard is incomplete
        return findings, None, f"parquet read failed after {row} row(s) ({_why(exc)})"
    return findings, row, None
