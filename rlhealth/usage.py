"""Command-line input shared by every command, the MCP server and the probes (a leaf module: imports
nothing from rlhealth).

``UsageError`` is bad command-line input (exit status ``EXIT_USAGE``); ``parse_duration`` and
``parse_now`` turn the duration and time flags into numbers. The exit statuses of ``diagnose``,
``probe`` and ``audit`` are defined here once, the interrupted ones (``interrupted_exit``) too.

The input checks here are small functions of plain values, each raising ``UsageError`` with one
line that names the flag and what would be accepted: ``require_directory`` (a BUNDLE / RUN / ROOT
that does not exist or is not a directory), ``parse_now``, ``parse_duration``,
``join_dash_values`` (``--max-age -5m`` reaches its option). The checks that read the package's
data (captures, the hardware table, where the package lives) and ``check_command`` (every check
of one command) are in ``rlhealth.checks``.
"""
from __future__ import annotations

import re
import signal
from datetime import datetime, timezone
from pathlib import Path

EXIT_NO_KILL = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_KILL = 10
EXIT_ERROR = 20
VERDICT_EXIT = {"NO-KILL": EXIT_NO_KILL, "KILL": EXIT_KILL, "ERROR": EXIT_ERROR}
EXIT_AUDIT_COMPLETE = EXIT_NO_KILL      # audit: the completion record is complete
EXIT_AUDIT_BLOCKED = EXIT_ERROR         # audit: blocking problems, or the audit could not complete

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


EXIT_SIGNAL_BASE = 128
"""A command ended by a signal exits ``128 + signal number``: 130 for SIGINT (Ctrl-C), 143 for SIGTERM."""


def interrupted_exit(signum: int) -> int:
    return EXIT_SIGNAL_BASE + int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class UsageError(Exception):
    """Bad command-line input (exit 2)."""


def parse_now(text: str | None) -> datetime:
    """``--now`` (ISO-8601; naive is UTC) -> aware UTC datetime; None -> the wall clock."""
    if text is None:
        return datetime.now(timezone.utc)
    try:
        t = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"--now: not an ISO-8601 time: {text!r} (e.g. 2026-08-01T15:25:00Z)") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc)


def parse_duration(text: str, flag: str | None = None) -> float:
    """``90s``, ``30m``, ``2h``, ``1d`` or plain seconds -> seconds (positive). ``flag`` (e.g.
    ``--max-age``) starts the message of a ``UsageError``."""
    t = str(text).strip().lower()
    where = f"{flag}: " if flag else ""
    try:
        if t and t[-1] in _DURATION_UNITS:
            value = float(t[:-1]) * _DURATION_UNITS[t[-1]]
        else:
            value = float(t)
    except ValueError as exc:
        raise UsageError(f"{where}not a duration: {text!r} (use e.g. 30m, 2h, 90s)") from exc
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{where}duration must be positive and finite: {text!r} (use e.g. 30m, 2h, 90s)")
    return value


DASH_VALUE_OPTIONS = ("--max-age", "--deadline", "--command-timeout", "--poll-interval", "--now", "--break-time")
"""Options whose value may be mistyped with a leading ``-`` (``--max-age -5m``): argparse would take
it for an option and say "expected one argument"; ``join_dash_values`` hands it to the option so
the value's own check answers, as it does for ``--max-age=-5m``."""
_DASH_VALUE = re.compile(r"^-[0-9.]")


def join_dash_values(argv: list[str]) -> list[str]:
    """``[..., "--max-age", "-5m", ...]`` -> ``[..., "--max-age=-5m", ...]`` for ``DASH_VALUE_OPTIONS``."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out.extend(argv[i:])
            break
        if arg in DASH_VALUE_OPTIONS and i + 1 < len(argv) and _DASH_VALUE.match(argv[i + 1]):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def require_directory(path, name: str) -> Path:
    """``path`` as a ``Path`` when it is a directory; else ``UsageError`` naming the argument
    (``BUNDLE``, ``RUN``, ``ROOT``, ``--bundle``) and what is wrong with it."""
    p = Path(path)
    try:
        exists, is_dir = p.exists(), p.is_dir()
    except OSError as exc:
        raise UsageError(f"{name} cannot be read: {p}: {exc.strerror or exc}") from exc
    if not exists:
        raise UsageError(f"{name} does not exist: {p}")
    if not is_dir:
        raise UsageError(f"{name} is not a directory: {p}")
    return p


def parse_now_or_usage(text: str | None, flag: str = "--now") -> datetime:
    """``--now`` (or another time flag, ``flag``) as ``parse_now`` reads it; anything that is no
    ISO-8601 time is a ``UsageError`` naming the flag."""
    try:
        return parse_now(text)
    except UsageError as exc:
        raise UsageError(f"{flag}: not an ISO-8601 time: {text!r}") from exc
