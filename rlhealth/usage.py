"""Command-line input shared by every command and by the probes (a leaf module: imports nothing
from rlhealth).

``UsageError`` is bad command-line input (exit status ``EXIT_USAGE``); ``parse_duration`` and
``parse_now`` turn the duration and time flags into numbers. The exit statuses of ``diagnose``,
``probe`` and ``audit`` are defined here once.
"""
from __future__ import annotations

from datetime import datetime, timezone

EXIT_NO_KILL = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_KILL = 10
EXIT_ERROR = 20
VERDICT_EXIT = {"NO-KILL": EXIT_NO_KILL, "KILL": EXIT_KILL, "ERROR": EXIT_ERROR}
EXIT_AUDIT_COMPLETE = EXIT_NO_KILL      # audit: the completion record is complete
EXIT_AUDIT_BLOCKED = EXIT_ERROR         # audit: blocking problems, or the audit could not complete

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class UsageError(Exception):
    """Bad command-line input (exit 2)."""


def parse_now(text: str | None) -> datetime:
    """``--now`` (ISO-8601; naive is UTC) -> aware UTC datetime; None -> the wall clock."""
    if text is None:
        return datetime.now(timezone.utc)
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"--now: not an ISO-8601 time: {text!r}") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc)


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``2h``, ``1d`` or plain seconds -> seconds (positive)."""
    t = str(text).strip().lower()
    try:
        if t and t[-1] in _DURATION_UNITS:
            value = float(t[:-1]) * _DURATION_UNITS[t[-1]]
        else:
            value = float(t)
    except ValueError as exc:
        raise UsageError(f"not a duration: {text!r} (use e.g. 30m, 2h, 90s)") from exc
    if not value > 0 or value == float("inf"):
        raise UsageError(f"duration must be positive and finite: {text!r}")
    return value


def check_bundle_dir(path, what: str = "BUNDLE") -> None:
    """A BUNDLE / RUN / ROOT argument names an existing directory, else ``UsageError``."""
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what} does not exist: {p}")
    if not p.is_dir():
        raise UsageError(f"{what} is not a directory: {p}")


def parse_now_or_usage(text: str | None, flag: str = "--now") -> datetime:
    """``--now`` (or another time flag, ``flag``) as ``parse_now`` reads it; anything that is no
    ISO-8601 time is a ``UsageError`` naming the flag."""
    try:
        return parse_now(text)
    except UsageError as exc:
        raise UsageError(f"{flag}: not an ISO-8601 time: {text!r}") from exc


def check_gpu(name: str | None, known) -> None:
    """A given ``--gpu`` is one of ``known`` (the hardware table's names), else ``UsageError``
    listing them. None (no GPU given) passes."""
    if name is None or not str(name).strip():
        return
    names = sorted(set(known))
    if str(name).strip() not in names:
        raise UsageError(f"--gpu: unknown GPU {name!r}; known: {', '.join(names)}")
