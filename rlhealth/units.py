"""How quantities are written for a reader (a leaf module: imports nothing from rlhealth)."""
from __future__ import annotations

from typing import Any


def age_text(seconds: Any) -> str:
    """An age or a span for a reader, in human units with the seconds: ``42 s``, ``5m 2s (302 s)``,
    ``2h 56m (10560 s)``, ``122d 5h (10560122 s)`` (the ``age`` filter of rule templates). A value
    that is no number is printed as it is."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds or seconds in (float("inf"), float("-inf")):
        return str(seconds)
    total = int(round(seconds))
    sign, n = ("-", -total) if total < 0 else ("", total)
    if n < 60:
        return f"{total} s"
    days, rest = divmod(n, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        human = f"{days}d {hours}h"
    elif hours:
        human = f"{hours}h {minutes}m"
    else:
        human = f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{sign}{human} ({total} s)"
