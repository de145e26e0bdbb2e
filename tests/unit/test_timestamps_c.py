"""The C timestamp parsers (probes/parse/_timestamps.c) give exactly the Python definitions' results.

``_timestamps.line_timestamp`` must handle every ASCII line with a reference of None or a float/int
in [0, 253402300799] and return the very float (bit for bit) or None that
``timestamps._line_timestamp_python`` returns; ``_timestamps.parse_iso`` must return
``timestamps._parse_iso_python``'s float or NotImplemented. Cases: every line of the log fixtures
under tests/, lines generated from each form's template with valid and invalid fields, two
candidate stamps on one line, the whitespace ``\\s`` matches below 128 (\\x0b, \\x1c-\\x1f), references
around year boundaries (the yearless forms) and around a microsecond carry, and random edits of
all of these. The public ``line_timestamp``/``parse_iso`` (C with the Python fallback) are
checked against the Python definitions on the same cases, non-ASCII text and odd references included.
"""
from __future__ import annotations

import math
import random
import struct
from datetime import datetime, timezone
from pathlib import Path

import pytest

from rlhealth.probes.parse import timestamps as T

from rlhealth.probes.parse import _timestamps     # built by every install: its absence fails here

TESTS = Path(__file__).resolve().parents[1]
LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
MAX_REFERENCE = 253402300799


def _epoch(*fields) -> float:
    return datetime(*fields, tzinfo=timezone.utc).timestamp()


NEW_YEAR_2026 = _epoch(2026, 1, 1)
REFERENCES = [
    None, 0, 0.0, -0.0, 1785671980.94, 1785671980, 1785715200.0,      # typical: 2026-08-02
    NEW_YEAR_2026, NEW_YEAR_2026 - 1, NEW_YEAR_2026 - 0.5, NEW_YEAR_2026 + 1800,
    NEW_YEAR_2026 - 1800, NEW_YEAR_2026 - 86400, NEW_YEAR_2026 + 86399.5,
    # the microsecond rounding of datetime.fromtimestamp decides the year within 0.5 us of it
    NEW_YEAR_2026 - 4e-7, NEW_YEAR_2026 - 5e-7, NEW_YEAR_2026 - 6e-7, NEW_YEAR_2026 - 1e-6,
    _epoch(2024, 2, 29, 12), _epoch(2025, 3, 1), _epoch(2000, 12, 31, 23, 59, 59), _epoch(1971, 1, 1),
    _epoch(9999, 12, 31), MAX_REFERENCE, float(MAX_REFERENCE), 86400, 86400.5,
]
ODD_REFERENCES = [-1, -0.5, MAX_REFERENCE + 1, MAX_REFERENCE + 0.5, float("nan"), float("inf"),
                  float("-inf"), True, False, 10**30, "1785671980", 1785671980.94j]


def _same(a, b) -> bool:
    """Both None, or the same float bit for bit."""
    if a is None or b is None:
        return a is None and b is None
    return (type(a) is float and type(b) is float and a == b and repr(a) == repr(b)
            and math.copysign(1.0, a) == math.copysign(1.0, b) and struct.pack("<d", a) == struct.pack("<d", b))


def _check_line(text: str, reference) -> None:
    expected = T._line_timestamp_python(text, reference)
    got = _timestamps.line_timestamp(text, reference)
    assert got is not NotImplemented, (text, reference)      # every ASCII line is the C's own
    assert _same(got, expected), (text, reference, got, expected)
    assert _same(T.line_timestamp(text, reference), expected), (text, reference)


# ---------------------------------------------------------------- generated lines

SPACES = [" ", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "\n"]
KEYWORDS = ["INFO", "WARNING", "ERROR", "DEBUG", "CRITICAL", "WARN", "INFO", "WARN", "WARNINGS", "INF", "info",
            "WARNIN", "xINFO", "_ERROR", "-DEBUG"]
MONTH_NAMES = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "jan", "Foo"]
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "mon"]
PREFIXES = ["", "", "task=/bench/rl/0 | ", "(TerminalBenchGenerator pid=48213, ip=10.1.0.11) ", "12", "2026",
            "2026-08", "x", "_", "-", "[", "[E", "a1-", "12:00:00 ", "INFO", "\x1c", "\x0b", " ", "\t ", "9999-"]
SUFFIXES = ["", "", " | INFO | x", " rest of line", "Z", "+05:30", "0", ".5", ",123", "]", " 5711 file.go:53]",
            "\x1f", " 2026-08-01T12:00:00Z"]


def _digits(rng: random.Random, count: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(count))


def _pick(rng: random.Random, valid: list[str], invalid: list[str], width: int) -> str:
    """A field: mostly a valid value, else an invalid one or any ``width`` digits."""
    roll = rng.random()
    if roll < 0.92:
        return rng.choice(valid)
    return rng.choice(invalid) if roll < 0.97 else _digits(rng, width)


def _year(rng):
    return _pick(rng, ["2026", "2025", "2024", "2000", "1900", "2100", "1970", "1969", "0001", "9999"], ["0000"], 4)


def _month(rng):
    return _pick(rng, ["01", "02", "08", "12", "09", "10"], ["00", "13"], 2)


def _day(rng):
    return _pick(rng, ["01", "28", "29", "30", "31", "15", "09"], ["00", "32"], 2)


def _clock(rng):
    hh = _pick(rng, ["00", "12", "23", "05"], ["24", "99"], 2)
    mi = _pick(rng, ["00", "59", "30"], ["60"], 2)
    ss = _pick(rng, ["00", "59", "09"], ["60", "61"], 2)
    return f"{hh}:{mi}:{ss}"


def _fraction(rng):
    return _digits(rng, rng.randint(1, 12))


def _tz(rng):
    return rng.choice(["", "", "Z", "z", "+05:30", "-08:00", "-0800", "+0530", "+05:3", "+053", "-00:00",
                       "+2400", "+24:00", "+99:99", "+5:30", "-", "+"])


def _ws(rng):
    return "".join(rng.choice(SPACES) for _ in range(rng.choice([0, 0, 1, 2])))


def _iso(rng):
    sep = rng.choice([" ", "T", "_", "T", " ", "x"])
    frac = rng.choice(["", "", "." + _fraction(rng), "," + _fraction(rng), ".", ".x"])
    return f"{_year(rng)}-{_month(rng)}-{_day(rng)}{sep}{_clock(rng)}{frac}{_tz(rng)}"


def _vllm(rng):
    return f"{rng.choice(KEYWORDS)} {_month(rng)}-{_day(rng)} {_clock(rng)}"


def _glog(rng):
    month = rng.choice(["8", "1", "9", "0", "08", "12", "13", "00", "1" + _digits(rng, 2)])
    frac = rng.choice(["", "." + _fraction(rng), ".", ".x"])
    return f"[{rng.choice('IWEFIWEFX')}{month}{_day(rng)} {_clock(rng)}{frac}"


def _usually(rng: random.Random, usual: str, others: list[str]) -> str:
    return usual if rng.random() < 0.85 else rng.choice(others)


def _glog_bare(rng):
    actor = rng.choice(["", "(actor pid=5711) ", "(pid=1)", "( x )\x1c "])
    actor = _usually(rng, actor, ["()", "(" + "x" * 200 + ")", "(" + "x" * 201 + ")", "(unclosed ", "(a)(b) ",
                                  "(\n) ", "(" + "x" * 199 + ") "])
    micro = _usually(rng, _digits(rng, rng.choice([1, 6, 9])), ["", "x"])
    gap = _usually(rng, rng.choice([" ", "   "]), ["", "\t"])
    pid = _usually(rng, _digits(rng, rng.randint(1, 6)), ["", "x"])
    end = _usually(rng, rng.choice([" file.go:53] msg", " ", "  x"]), ["", "]", "\t"])
    level = rng.choice("IWEFIWEFX")
    return f"{_ws(rng)}{actor}{_ws(rng)}{level}{_month(rng)}{_day(rng)} {_clock(rng)}.{micro}{gap}{pid}{end}"


def _dmesg(rng):
    day = _usually(rng, rng.choice(["9", " 9", "19", "31", "29", "01"]), ["0", "00", "123", ""])
    weekday = _usually(rng, rng.choice(WEEKDAYS[:7]), WEEKDAYS)
    month = _usually(rng, rng.choice(MONTH_NAMES[:12]), MONTH_NAMES)
    close = _usually(rng, rng.choice(["]", "]x"]), ["", " ]"])
    return f"{_ws(rng)}[{weekday} {month}{' ' * rng.choice([1, 1, 2, 0])}{day} {_clock(rng)} {_year(rng)}{close}"


def _syslog(rng):
    day = _usually(rng, rng.choice(["9", "19", "29", "31", "01"]), ["0", "123", ""])
    month = _usually(rng, rng.choice(MONTH_NAMES[:12]), MONTH_NAMES)
    return (f"{_ws(rng)}{month}{' ' * rng.choice([1, 1, 2, 0])}{day} {_clock(rng)}"
            f"{_usually(rng, rng.choice([' host kernel: x', ' ']), ['', 'x'])}")


FORMS = [_iso, _vllm, _glog, _glog_bare, _dmesg, _syslog]


def _generated_line(rng: random.Random) -> str:
    parts = [rng.choice(PREFIXES)]
    for _ in range(rng.choice([1, 1, 1, 2, 3])):             # several candidates: the first may be invalid
        parts.append(rng.choice(FORMS)(rng))
        parts.append(rng.choice(SUFFIXES))
    return "".join(parts)


MUTATION_ALPHABET = "0123456789-:. T_Z+[]()IWEFNOAR\x0b\x1c\x1d\x1e\x1f\t\n\r ,xJan"


def _mutated(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(3)
        at = rng.randint(0, len(chars))
        if op == 0:
            chars.insert(at, rng.choice(MUTATION_ALPHABET))
        elif chars and at < len(chars):
            if op == 1:
                del chars[at]
            else:
                chars[at] = rng.choice(MUTATION_ALPHABET)
    return "".join(chars)


def _reference(rng: random.Random):
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(REFERENCES)
    if roll < 0.8:
        return rng.uniform(0, 4e9)
    return rng.randint(0, MAX_REFERENCE)


@pytest.mark.parametrize("seed", range(20))
def test_generated_lines(seed):
    rng = random.Random(seed)
    for _ in range(1000):
        line = _generated_line(rng)
        _check_line(line, _reference(rng))
        _check_line(_mutated(rng, line), _reference(rng))


def test_generated_lines_match_often():
    """The generator reaches every form with valid fields (the comparisons above are not all None)."""
    rng = random.Random(7)
    values = [_timestamps.line_timestamp(form(rng), 1785671980.94) for form in FORMS for _ in range(300)]
    per_form = [values[i * 300:(i + 1) * 300] for i in range(len(FORMS))]
    assert all(sum(v is not None for v in form) >= 60 for form in per_form)


@pytest.mark.parametrize("template", [
    "Dec 31 23:59:59 host x", "Jan  1 00:00:01 host x", "Feb 29 12:00:00 host x",
    "INFO 12-31 23:59:59 x", "INFO 01-01 00:00:00 x", "INFO 02-29 06:00:00 x",
    "[E1231 23:59:59.999999999 x", "[E101 00:00:00.5 x", "[W229 01:02:03 x",
    "I1231 23:59:59.488170 5711 file.go:53] x", "(actor pid=1) I0101 00:00:00.1 1 x",
])
def test_year_boundaries(template):
    """Yearless stamps around New Year and leap days against every reference (and one each second
    around midnight): the year of the reference, moved back when more than a day ahead."""
    for reference in REFERENCES:
        _check_line(template, reference)
    for step in range(-3 * 86400, 3 * 86400, 3600):
        _check_line(template, NEW_YEAR_2026 + step)
        _check_line(template, _epoch(2024, 3, 1) + step + 0.25)


@pytest.mark.parametrize("line", ["INFO 08-01 12:00:00 x", "Aug  1 12:00:00 host x", "[E801 12:00:00.25 x",
                                  "I0801 12:00:00.5 1 x"])
def test_exactly_one_day_ahead(line):
    """A stamp exactly 86400 s after the reference keeps the reference's year (``>``, not ``>=``)."""
    stamp = _epoch(2026, 8, 1, 12)
    for delta in (-86400, -86400.5, -86399.5, -86400 - 1e-6, -86400 + 1e-6):
        _check_line(line, stamp + delta)
    _check_line(line, int(stamp) - 86400)


def test_references_around_the_microsecond_carry():
    """Every float within a few hundred ulps of 0.5 us before a New Year: the year is the one
    ``datetime.fromtimestamp`` gives after rounding to microseconds."""
    for new_year in (_epoch(1971, 1, 1), _epoch(2000, 1, 1), NEW_YEAR_2026, _epoch(9999, 1, 1)):
        reference = new_year - 5e-7
        for _ in range(300):
            reference = math.nextafter(reference, 0)
        for _ in range(600):
            reference = math.nextafter(reference, math.inf)
            _check_line("Dec 31 23:59:59 host x", reference)
            _check_line("INFO 01-01 00:00:00 x", reference)


def test_fractions_at_full_precision():
    """Near the epoch a stamp's fraction keeps all its bits: float("0." + digits) exactly."""
    rng = random.Random(13)
    for _ in range(3000):
        frac = _fraction(rng)
        for line in (f"1970-01-01T00:00:00.{frac}", f"1970-01-01 00:00:01,{frac}Z", f"1969-12-31T23:59:59.{frac}",
                     f"1970-01-01T00:00:00.{frac}+00:01", f"[I101 00:00:00.{frac} x", f"[W0101 00:00:02.{frac}"):
            _check_line(line, None)
        text = f"1970-01-01T00:00:00.{frac[:6]}Z"
        _check_iso(text)


def _fixture_lines():
    for path in sorted(TESTS.rglob("*")):
        if path.suffix in LOG_SUFFIXES and path.is_file():
            for raw in path.read_bytes().split(b"\n"):
                yield raw.decode("utf-8", "replace")


def test_fixture_lines():
    rng = random.Random(11)
    lines = list(_fixture_lines())
    assert len(lines) > 5000
    stamped = 0
    for line in lines:
        ascii_line = line.encode("ascii", "replace").decode("ascii")
        for reference in (None, 1785671980.94):
            _check_line(ascii_line, reference)
        stamped += T._line_timestamp_python(ascii_line, 1785671980.94) is not None
        _check_line(_mutated(rng, ascii_line[:400]), _reference(rng))
        if not line.isascii():
            assert _timestamps.line_timestamp(line, None) is NotImplemented
            assert _same(T.line_timestamp(line, None), T._line_timestamp_python(line, None))
    assert stamped > 1000


def test_non_ascii_and_odd_references_fall_back():
    rng = random.Random(5)
    for _ in range(500):
        line = _generated_line(rng)
        at = rng.randint(0, len(line))
        odd = line[:at] + rng.choice(["é", "\x85", "\xa0", "\u2003", "٣", "\U0001f600"]) + line[at:]
        assert _timestamps.line_timestamp(odd, 1785671980.94) is NotImplemented
        assert _same(T.line_timestamp(odd, 1785671980.94), T._line_timestamp_python(odd, 1785671980.94))
        for reference in ODD_REFERENCES:
            assert _timestamps.line_timestamp(line, reference) is NotImplemented
            try:
                expected = ("value", T._line_timestamp_python(line, reference))
            except Exception as exc:    # e.g. datetime.fromtimestamp(nan)
                expected = ("error", type(exc))
            try:
                got = ("value", T.line_timestamp(line, reference))
            except Exception as exc:
                got = ("error", type(exc))
            assert got[0] == expected[0] and (_same(got[1], expected[1]) if got[0] == "value" else got == expected)
    for not_text in (None, b"2026-08-01T00:00:00", 5):
        assert _timestamps.line_timestamp(not_text, None) is NotImplemented
    with pytest.raises(TypeError):
        _timestamps.line_timestamp("x")


# ---------------------------------------------------------------- parse_iso

def _iso_string(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:      # the strict shapes, valid or not
        year = rng.choice(["2026", "1970", "1969", "2000", "2255", "2286", "0001", "9999", "0000", _digits(rng, 4)])
        frac = rng.choice(["", "", "." + _digits(rng, 3), "." + _digits(rng, 6), "." + _fraction(rng),
                           "," + _digits(rng, 3)])
        tz = rng.choice(["", "Z", "+05:30", "-08:00", "-00:00", "+00:00", "+23:59", "-23:59", "+24:00", "+05:60",
                         "+2400", "+0530", "z", "+5:30", "Z "])
        sep = rng.choice(["T", "T", " ", "t", "_"])
        return f"{year}-{_month(rng)}-{_day(rng)}{sep}{_clock(rng)}{frac}{tz}"
    if roll < 0.7:
        return _mutated(rng, f"2026-08-03T03:40:{rng.randint(0, 59):02d}.{_digits(rng, 3)}Z")
    if roll < 0.8:
        return rng.choice(["", " ", "Z", "2026-08-03", "2026-08-03T03:40", "2026-08-03T03:40:09Z\n",
                           " 2026-08-03T03:40:09Z", "2026-08-03T03:40:09Z ", "2026-08-03T03:Z40:09",
                           "99999-08-03T03:40:09", "2026-08-03T03:40:09.000Zjunk", "2026-08-03T03:40:09.000+05:30:00",
                           "20260803T034009Z", "x2026-08-03T03:40:09Z", "2026-08-03T03:40:09.000Z2"])
    return _generated_line(rng)


def _check_iso(text) -> None:
    expected = T._parse_iso_python(text)
    got = _timestamps.parse_iso(text)
    assert got is NotImplemented or _same(got, expected), (text, got, expected)
    assert _same(T.parse_iso(text), expected), text


@pytest.mark.parametrize("seed", range(10))
def test_parse_iso_generated(seed):
    rng = random.Random(1000 + seed)
    for _ in range(1000):
        _check_iso(_iso_string(rng))


def test_parse_iso_fast_shapes_are_handled():
    """The common shapes never fall back (else the comparisons above would prove nothing)."""
    rng = random.Random(3)
    for _ in range(2000):
        second = rng.randint(0, 86400 * 365 * 200)
        stamp = datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        for text in (stamp, stamp + "Z", stamp + "." + _digits(rng, 3) + "Z", stamp + "." + _digits(rng, 6),
                     stamp.replace("T", " ") + "+05:30", stamp + ".123-00:00", stamp + "-23:59"):
            got = _timestamps.parse_iso(text)
            assert got is not NotImplemented, text
            assert _same(got, T._parse_iso_python(text)), text


def test_parse_iso_edges():
    for text in ["0001-01-01T00:00:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999999Z",
                 "9999-12-31T23:59:59-23:59", "2255-06-05T23:47:34.740991Z", "2255-06-05T23:47:34.740992Z",
                 "1684-07-28T00:12:25.259009Z", "1684-07-28T00:12:25.259008Z", "2024-02-29T00:00:00Z",
                 "2023-02-29T00:00:00Z", "2026-08-03T24:00:00Z", "2026-08-03T23:59:60Z", "2026-08-03T03:40:09.000z",
                 "2026-08-03T03:40:09Z+05:30", "2026-08-03T03:40:09.1234567Z", "2026-08-03T03:40:09.12Z",
                 "2026-08-03T03:40:09.000Z\x1c", "\x0b2026-08-03T03:40:09.000Z", "+05:30", "2026-08-03T03:40:09+2400"]:
        _check_iso(text)
    for not_text in (None, "", 5, b"2026-08-03T03:40:09Z", 1.5):
        assert _timestamps.parse_iso(not_text) is NotImplemented
        assert T.parse_iso(not_text) is T._parse_iso_python(not_text)
