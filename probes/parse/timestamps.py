"""Timestamps of log lines, in every format the evidence uses.

Returns epoch seconds (UTC). Yearless formats (vLLM ``MM-DD HH:MM:SS``, c10/glog
``E0513 04:11:09``) take their year from a reference time (the bundle's capture
or sync time) and move back one year if that would put them in the future.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?")
_VLLM = re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})")
_GLOG = re.compile(r"\[[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})")
_EPOCH_PREFIX = re.compile(r"\btime=(\d{10})\b")


def _tz_offset(text: str | None) -> int:
    if not text or text == "Z":
        return 0
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


def _mk(year, month, day, hh, mm, ss) -> float | None:
    try:
        return datetime(year, month, day, hh, mm, ss, tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def line_timestamp(text: str, reference_epoch: float | None) -> float | None:
    """Epoch seconds of the first timestamp found in ``text`` (naive times are UTC)."""
    m = _ISO.search(text)
    if m:
        y, mo, d, hh, mi, ss, frac, tz = m.groups()
        t = _mk(int(y), int(mo), int(d), int(hh), int(mi), int(ss))
        if t is not None:
            if frac:
                t += float("0." + frac)
            return t - _tz_offset(tz)
    for pattern in (_VLLM, _GLOG):
        m = pattern.search(text)
        if m:
            mo, d, hh, mi, ss = (int(g) for g in m.groups())
            ref = datetime.fromtimestamp(reference_epoch or 0, tz=timezone.utc)
            t = _mk(ref.year, mo, d, hh, mi, ss)
            if t is not None and reference_epoch is not None and t > reference_epoch + 86400:
                t = _mk(ref.year - 1, mo, d, hh, mi, ss)
            return t
    return None


def parse_iso(text: str | None) -> float | None:
    """Epoch seconds of an ISO-8601 string (``Z``/offset/naive-as-UTC); None if unparseable."""
    if not text or not isinstance(text, str):
        return None
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        m = _ISO.search(text)
        if not m:
            return None
        return line_timestamp(text, None)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
