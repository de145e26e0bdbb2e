"""Parsers of evidence files and log lines, by source."""
from __future__ import annotations

import math
import re
from typing import Any

DECIMAL = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
"""Regex text of a decimal number that ``float()`` reads. Where a log prints ``[0-9.]+``, a garbled
``1.2.3`` or ``.`` then matches nothing instead of failing the conversion (and the diagnosis)."""

MAX_COUNT_DIGITS = 300
"""The most digits a count read from evidence may have. A real count has at most 20; this bound is
what the conversions need: ``int()`` refuses a string of more than 4300 digits (ValueError) and
``float()`` of an int above 1.8e308 overflows, so a garbled number past it is not read at all."""

COUNT = rf"(?<![0-9])[0-9]{{1,{MAX_COUNT_DIGITS}}}(?![0-9])"
"""Regex text of a whole run of at most ``MAX_COUNT_DIGITS`` ASCII digits, never part of a longer
run: a garbled number of thousands of digits matches nothing (its line counts as not parsed)
instead of failing ``int()`` and the diagnosis."""

_COUNT_TEXT = re.compile(rf"\s*({COUNT})\s*")
_COUNT_LIMIT = 10 ** MAX_COUNT_DIGITS


def read_count(value: Any) -> int | None:
    """A count from evidence: an int, a finite float (truncated) or a string of ASCII digits
    (whitespace around allowed), of at most ``MAX_COUNT_DIGITS`` digits; anything else (garbled or
    hostile: "abc", "1e999", NaN, inf, true, a list, a run of thousands of digits) is None, never
    an exception."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = int(value)
    if isinstance(value, int):
        return value if -_COUNT_LIMIT < value < _COUNT_LIMIT else None
    if isinstance(value, str):
        m = _COUNT_TEXT.fullmatch(value)
        return int(m.group(1)) if m else None
    return None
