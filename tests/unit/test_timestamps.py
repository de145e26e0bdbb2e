"""What the timestamp parser (probes/parse/timestamps.py) reads from each log-line form and from
ISO-8601 strings: the year of yearless forms, fractions, offsets, and what is no time at all."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from rlhealth.probes.parse.timestamps import iso, line_timestamp, parse_iso


def _epoch(*fields) -> float:
    return datetime(*fields, tzinfo=timezone.utc).timestamp()


REF = _epoch(2026, 8, 2, 9, 0, 0)          # the bundle's capture time
NEW_YEAR = _epoch(2026, 1, 1)


@pytest.mark.parametrize("line,expected", [
    ("[Fri Aug  9 13:32:56 2024] NVRM: Xid 79", _epoch(2024, 8, 9, 13, 32, 56)),              # dmesg -T
    ("Apr 29 19:24:11 node-3 kernel: x", _epoch(2026, 4, 29, 19, 24, 11)),                      # syslog
    ("2026-08-01 12:00:00,123 INFO x", _epoch(2026, 8, 1, 12) + 0.123),
    ("ts=2026-08-01T12:00:00Z msg", _epoch(2026, 8, 1, 12)),
    ("2026-08-01T14:00:00.5+02:00 x", _epoch(2026, 8, 1, 12) + 0.5),
    ("2026-08-01T06:30:00-0530 x", _epoch(2026, 8, 1, 12)),
    ("[2024-03-05_07:01:51] torchelastic", _epoch(2024, 3, 5, 7, 1, 51)),
    ("(EngineCore pid=1) INFO 08-01 12:00:00 [core.py:1] x", _epoch(2026, 8, 1, 12)),
    ("[rank0]:[E801 05:20:04.250 ProcessGroupNCCL.cpp:1] x", _epoch(2026, 8, 1, 5, 20, 4) + 0.25),  # c10
    ("[W0801 05:20:04 x", _epoch(2026, 8, 1, 5, 20, 4)),                                          # glog, padded
    ("I0712 15:54:56.488170 5711 file.go:53] x", _epoch(2026, 7, 12, 15, 54, 56)),              # bare glog
    ("(pid=7) I0712 15:54:56.488170 5711 file.go:53] x", _epoch(2026, 7, 12, 15, 54, 56)),
])
def test_each_form(line, expected):
    assert line_timestamp(line, REF) == expected


@pytest.mark.parametrize("line", [
    "[ 1843.308145] NVRM: Xid 79",          # seconds since boot: no wall clock
    "no time here", "", "2026-13-01 12:00:00 x", "2026-02-30T00:00:00Z", "2026-08-01T24:00:00",
    "INFO 13-01 12:00:00 x", "Foo 29 19:24:11 host x", "[E1301 05:20:04 x",
])
def test_no_timestamp(line):
    assert line_timestamp(line, REF) is None


def test_yearless_forms_take_the_reference_year_or_the_one_before():
    """The reference's year, moved back one year when that would be more than a day ahead."""
    for line in ("Dec 31 23:59:59 host x", "INFO 12-31 23:59:59 x", "[E1231 23:59:59 x",
                 "I1231 23:59:59.488170 5711 file.go:53] x"):
        assert line_timestamp(line, NEW_YEAR + 3600) == _epoch(2025, 12, 31, 23, 59, 59)
        assert line_timestamp(line, _epoch(2026, 12, 30, 23, 59, 59)) == _epoch(2026, 12, 31, 23, 59, 59)
        assert line_timestamp(line, _epoch(2026, 12, 30, 23, 59, 58)) == _epoch(2025, 12, 31, 23, 59, 59)
    assert line_timestamp("Jan  1 00:00:01 host x", NEW_YEAR - 60) == _epoch(2025, 1, 1, 0, 0, 1)
    assert line_timestamp("Jan  1 00:00:01 host x", NEW_YEAR + 1) == _epoch(2026, 1, 1, 0, 0, 1)
    assert line_timestamp("Feb 29 12:00:00 host x", _epoch(2024, 3, 1)) == _epoch(2024, 2, 29, 12)
    assert line_timestamp("Feb 29 12:00:00 host x", _epoch(2025, 3, 1)) is None      # no Feb 29 in 2025
    assert line_timestamp("INFO 08-01 12:00:00 x", None) == _epoch(1970, 8, 1, 12)    # no reference: 1970


@pytest.mark.parametrize("line", ["INFO 08-01 12:00:00 x", "Aug  1 12:00:00 host x", "[E801 12:00:00 x",
                                  "I0801 12:00:00.5 1 x"])
def test_exactly_one_day_ahead_keeps_the_year(line):
    stamp = _epoch(2026, 8, 1, 12)
    assert line_timestamp(line, stamp - 86400) == stamp
    assert line_timestamp(line, stamp - 86400 - 1e-3) == _epoch(2025, 8, 1, 12)


def test_fractions_keep_every_digit():
    assert line_timestamp("1970-01-01T00:00:00.123456789", None) == float("0.123456789")
    assert line_timestamp("[I101 00:00:00.000000001 x", None) == float("0.000000001")
    assert line_timestamp("1970-01-01T00:00:01,5Z", None) == 1.5


@pytest.mark.parametrize("text,expected", [
    ("2026-08-01T12:00:00Z", _epoch(2026, 8, 1, 12)),
    ("2026-08-01T12:00:00z", _epoch(2026, 8, 1, 12)),
    ("2026-08-01T12:00:00.250Z", _epoch(2026, 8, 1, 12) + 0.25),
    ("2026-08-01 12:00:00", _epoch(2026, 8, 1, 12)),                    # naive is UTC
    ("2026-08-01T14:00:00+02:00", _epoch(2026, 8, 1, 12)),
    ("2026-08-01T12:00:00-00:00", _epoch(2026, 8, 1, 12)),
    (" 2026-08-01T12:00:00Z\n", _epoch(2026, 8, 1, 12)),                # surrounding white space
    ("2026-08-01", _epoch(2026, 8, 1)),
    ("2026-08-01T12:00:00,5Z", _epoch(2026, 8, 1, 12) + 0.5),
    ("2026-08-01_12:00:00", _epoch(2026, 8, 1, 12)),                    # torchelastic: the line form
    ("2026-08-01T12:00:00Zjunk", _epoch(2026, 8, 1, 12)),               # the line form reads its stamp
    ("9999-12-31T23:59:59.999999Z", _epoch(9999, 12, 31, 23, 59, 59) + 0.999999),
    ("2024-02-29T00:00:00Z", _epoch(2024, 2, 29)),
])
def test_parse_iso(text, expected):
    assert parse_iso(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("text", [None, "", "not a time", "2023-02-29T00:00:00Z", "2026-13-45T99:00:00Z",
                                  "2026-08-03T24:00:00Z", "+05:30", 5, b"2026-08-03T03:40:09Z",
                                  "2026-08-03Z03:40:09Z", "2026-08-03Z03:40:09"])     # a Z that ends nothing
def test_parse_iso_refuses(text):
    assert parse_iso(text) is None


def test_iso_writes_whole_seconds_utc():
    assert iso(_epoch(2026, 8, 1, 12) + 0.75) == "2026-08-01T12:00:00Z"
    assert iso(None) is None


@pytest.mark.parametrize("line,expected", [
    ("\u00a0Apr 29 19:24:11 host kernel: x", 1777490651.0),        # any whitespace before a syslog stamp
    ("\u2003[Fri Aug  9 13:32:56 2024] x", 1723210376.0),          # ... and before a dmesg -T stamp
    ("\tMay  7 01:02:03 h x", 1778115723.0),
    ("xINFO 08-01 12:00:00 y", None),                               # no word boundary before the level
    ("a-01 12:00:00 CRITICAL 08-01 12:00:00 y", 1754049600.0),     # a decoy "-DD DD:DD:DD" before the record
    ("(actor pid=1) WARN 08-01 12:00:00 [x.py:1] y", 1754049600.0),
    ("Zz INFO 08-01 12:00:00", 1754049600.0),
    ("Generation Buffer Progress: 8/32 [24:00<?, ?it/s]", None),
])
def test_leading_stamps_and_vllm_records_where_the_quick_checks_look(line, expected):
    """Values as the reader gave them before it skipped searches by a line's first character and
    by the vLLM form's ``-DD DD:DD:DD``."""
    assert line_timestamp(line, 1785000000.0) == expected
