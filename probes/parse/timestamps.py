"""Timestamps of log lines, in every format the evidence uses.

Returns epoch seconds (UTC). Forms read, in this order:

- a leading ``dmesg -T`` stamp ``[Fri Aug  9 13:32:56 2024]`` (absolute);
- a leading syslog/journal stamp ``Apr 29 19:24:11 host ...`` (yearless);
- ISO-8601 anywhere (``2026-08-01 12:00:00,123``, ``2026-08-01T12:00:00Z``, torchelastic's
  ``2024-03-05_07:01:51``);
- vLLM ``INFO 08-01 12:00:00`` (yearless);
- glog and PyTorch's c10 logger ``[E0801 05:20:04`` / ``[E801 05:20:04``: glog pads the month,
  c10 does not (three digits = month 1-9), both bracketed by c10 and bare at the start of a glog
  line (``I0712 15:54:56.488170 5711 file.go:53]``) (yearless).

Yearless forms take their year from a reference time (the bundle's capture or sync time) and
move back one year if that would put them more than a day in the future. ``dmesg`` without
``-T`` prints seconds since boot (``[ 1843.308145]``): that is no wall-clock time, so None.

``parse_iso`` is ``datetime.fromisoformat``, with the log-line form above for what it refuses
(torchelastic's ``_`` separator, a comma fraction). This module is the only timestamp parser
(tests/unit/test_timestamps.py pins its results).
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T_](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?")
_VLLM = re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})")
# c10 writes the month unpadded ("E801" = Aug 1), glog pads it ("E0801"): 3 digits = M DD, 4 = MM DD.
_GLOG = re.compile(r"\[[IWEF](\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_GLOG_BARE = re.compile(r"^\s*(?:\([^)]{1,200}\)\s*)?[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.\d+ +\d+ ")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
                                      start=1)}
_MON = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DMESG_T = re.compile(r"^\s*\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _MON + r" +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\]")
_SYSLOG = re.compile(r"^\s*" + _MON + r" +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) ")
_EPOCH_PREFIX = re.compile(r"\btime=(\d{10})\b")
# Speed-ups that never change a result:
# - every ISO match contains ``-DD-DD[ T_]DD:DD:DD`` four characters after its start; that hint
#   starts with a literal (found by a fast scan), so a line without it skips the ISO search, and
#   a line with it searches from 4 characters before the first hint (no ISO match starts earlier);
# - on ASCII text the ``re.ASCII`` form of a pattern without ``\s`` matches exactly what the
#   Unicode form matches (``\d``/``\b`` agree on ASCII characters), and faster.
_ISO_HINT = re.compile(r"-\d{2}-\d{2}[ T_]\d{2}:\d{2}:\d{2}")
# - likewise every vLLM match holds ``-DD DD:DD:DD`` at most 11 characters after its start
#   (``CRITICAL DD``): a line without it skips the vLLM search, which otherwise tries its level
#   alternation at every position.
_VLLM_HINT = re.compile(r"-\d{2} \d{2}:\d{2}:\d{2}")
_VLLM_LEAD = len("CRITICAL 00")
# - a ``dmesg -T`` or syslog stamp starts the line after whitespace (``\s``: ``str.isspace``) with
#   "[" or a month's initial: any other first character skips both.
_LEADS = frozenset("[" + "".join(m[0] for m in _MONTHS))
_ISO_ASCII = re.compile(_ISO.pattern, re.ASCII)
_VLLM_ASCII = re.compile(_VLLM.pattern, re.ASCII)
_GLOG_ASCII = re.compile(_GLOG.pattern, re.ASCII)


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


@lru_cache(maxsize=1024)
def _day_start(year: int, month: int, day: int) -> float | None:
    return _mk(year, month, day, 0, 0, 0)


@lru_cache(maxsize=64)
def _year_of(reference_epoch: float | None) -> int:
    return datetime.fromtimestamp(reference_epoch or 0, tz=timezone.utc).year


def _epoch(year: int, month: int, day: int, hh: int, mi: int, ss: int) -> float | None:
    """``_mk`` for unsigned fields, from a cached day start (no datetime per line)."""
    if hh > 23 or mi > 59 or ss > 59:   # what datetime() refuses
        return None
    start = _day_start(year, month, day)
    return None if start is None else start + (hh * 3600 + mi * 60 + ss)


def _yearless(mo: int, d: int, hh: int, mi: int, ss: int, reference_epoch: float | None) -> float | None:
    year = _year_of(reference_epoch)
    t = _epoch(year, mo, d, hh, mi, ss)
    if t is not None and reference_epoch is not None and t > reference_epoch + 86400:
        t = _epoch(year - 1, mo, d, hh, mi, ss)
    return t


def line_timestamp(text: str, reference_epoch: float | None) -> float | None:
    """Epoch seconds of the timestamp of ``text`` (naive times are UTC); forms: module docstring."""
    lead = text[:1]
    if lead in _LEADS or lead.isspace():
        m = _DMESG_T.match(text)
        if m:
            mon, d, hh, mi, ss, y = m.groups()
            return _mk(int(y), _MONTHS[mon], int(d), int(hh), int(mi), int(ss))
        m = _SYSLOG.match(text)
        if m:
            mon, d, hh, mi, ss = m.groups()
            return _yearless(_MONTHS[mon], int(d), int(hh), int(mi), int(ss), reference_epoch)
    ascii_text = text.isascii()
    hint = _ISO_HINT.search(text)
    m = (_ISO_ASCII if ascii_text else _ISO).search(text, max(0, hint.start() - 4)) if hint else None
    if m:
        y, mo, d, hh, mi, ss, frac, tz = m.groups()
        t = _epoch(int(y), int(mo), int(d), int(hh), int(mi), int(ss))
        if t is not None:
            if frac:
                t += float("0." + frac)
            return t - _tz_offset(tz)
    hint = _VLLM_HINT.search(text)
    m = (_VLLM_ASCII if ascii_text else _VLLM).search(text, max(0, hint.start() - _VLLM_LEAD)) if hint else None
    if m:
        return _yearless(*(int(g) for g in m.groups()), reference_epoch)
    m = (_GLOG_ASCII if ascii_text else _GLOG).search(text)
    if m:
        t = _yearless(*(int(g) for g in m.groups()[:5]), reference_epoch)
        if t is not None and m.group(6):
            t += float("0." + m.group(6))   # c10 prints nanoseconds: orders ranks within a second
        return t
    m = _GLOG_BARE.match(text)
    if m:
        return _yearless(*(int(g) for g in m.groups()), reference_epoch)
    return None


def parse_iso(text: str | None) -> float | None:
    """Epoch seconds of an ISO-8601 string (``Z``/offset/naive-as-UTC); None if unparseable."""
    if not text or not isinstance(text, str):
        return None
    t = None
    z = text.find("Z")
    if z < 0 or z == len(text) - 1:
        # Python 3.11+ reads a final "Z" designator itself: the common form needs no copy of the
        # text (a "Z" elsewhere is replaced as below, which fromisoformat would read otherwise)
        try:
            t = datetime.fromisoformat(text)
        except ValueError:
            pass
    if t is None:
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
