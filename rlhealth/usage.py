"""Command-line input shared by every command, the MCP server and the probes (a leaf module: at
import it needs nothing from rlhealth; the few checks that read packaged data import it lazily).

``UsageError`` is bad command-line input (exit status ``EXIT_USAGE``); ``parse_duration`` and
``parse_now`` turn the duration and time flags into numbers. The exit statuses of ``diagnose``,
``probe`` and ``audit`` are defined here once, the interrupted ones (``interrupted_exit``) too.

The input checks are small functions of plain values, each raising ``UsageError`` with one line
that names the flag and what would be accepted, so every front end (the command line, the MCP
server) refuses the same mistakes with the same words:

- ``require_directory``: a BUNDLE / RUN / ROOT that does not exist or is not a directory;
- ``check_capture``: a ``--capture`` stamp the bundle does not hold (the ones it holds are listed);
- ``parse_now``: a ``--now`` that is not an ISO-8601 time;
- ``parse_duration``: ``--max-age`` and the probe's durations (positive, with a unit);
- ``check_gpu``: a ``--gpu`` that is not a row of the hardware table (the known names are listed);
- ``refuse_package_dir``: a path rlhealth would write to (``--record``, ``--bundle-root``) that
  lies inside the installed package (its packaged examples, site-packages);
- ``check_command``: all of the above for one command's parsed options.
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


def check_capture(bundle, stamp: str | None) -> None:
    """``--capture STAMP`` must name a capture directory of the bundle; the message lists the ones it holds."""
    if not stamp:
        return
    from rlhealth.probes.bundle import list_captures
    from rlhealth.probes.capture import CAPTURES_DIR

    names = [p.name for p in list_captures(Path(bundle))]
    if stamp in names:
        return
    held = f"captures there: {', '.join(names)}" if names else "the bundle holds no capture"
    raise UsageError(f"--capture {stamp}: no such capture in {Path(bundle) / CAPTURES_DIR} ({held})")


def known_gpus() -> list[str]:
    """The GPU names of the hardware table (``rules/tables/gpu_hbm_bandwidth.csv``), in table order."""
    import csv
    import io

    from rlhealth.packaged import packaged_text

    rows = csv.DictReader(io.StringIO(packaged_text("tables/gpu_hbm_bandwidth.csv")))
    return [row["gpu"].strip() for row in rows if (row.get("gpu") or "").strip()]


def check_gpu(name: str | None) -> str | None:
    """``--gpu``: a name of the hardware table (any case), returned as the table spells it; else
    ``UsageError`` listing the known names. None stays None."""
    if name is None or not str(name).strip():
        return None
    known = known_gpus()
    by_key = {g.lower(): g for g in known}
    found = by_key.get(str(name).strip().lower())
    if found is None:
        raise UsageError(f"--gpu {name}: not in the hardware table; known: {', '.join(known)}")
    return found


def package_directories() -> list[Path]:
    """Where the installed rlhealth lives: its package directory and the interpreter's
    site-packages directories (resolved)."""
    import site
    import sysconfig

    import rlhealth

    dirs = [Path(rlhealth.__file__).resolve().parent]
    for key in ("purelib", "platlib"):
        try:
            dirs.append(Path(sysconfig.get_paths()[key]).resolve())
        except (KeyError, OSError):
            pass
    try:
        dirs += [Path(p).resolve() for p in site.getsitepackages()]
    except (AttributeError, OSError):
        pass
    return sorted(set(dirs))


def inside_package(path) -> Path | None:
    """The package or site-packages directory ``path`` lies in, else None."""
    try:
        target = Path(path).expanduser().resolve()
    except OSError:
        return None
    for d in package_directories():
        if target == d or d in target.parents:
            return d
    return None


def refuse_package_dir(path, flag: str, hint: str = "") -> None:
    """``UsageError`` when rlhealth would write below ``path`` (``flag`` says why) and it lies inside
    the installed package (a packaged example) or site-packages; ``hint`` ends the message."""
    where = inside_package(path)
    if where is not None:
        raise UsageError(f"{flag}: {path} is inside the installed rlhealth ({where}); rlhealth does not write there"
                         + (f" -- {hint}" if hint else ""))


def check_command(command: str, args) -> None:
    """Every input check of one command, on its parsed options (an ``argparse.Namespace`` or any
    object with the same attribute names; missing attributes are not checked). Raises
    ``UsageError`` on the first problem. Resolves ``args.gpu`` to the table's spelling."""
    get = lambda name: getattr(args, name, None)  # noqa: E731
    if get("now") is not None:
        parse_now(get("now"))
    if command in ("diagnose", "probe", "triage") and get("max_age") is not None:
        parse_duration(get("max_age"), "--max-age")
    if command in ("diagnose", "probe") and get("gpu") is not None:
        args.gpu = check_gpu(get("gpu"))
    if command == "diagnose":
        require_directory(get("bundle"), "BUNDLE")
        check_capture(get("bundle"), get("capture"))
        if get("record"):
            refuse_package_dir(get("bundle"), "--record",
                               f"copy the bundle elsewhere first (cp -r {get('bundle')} /tmp/) and record there")
    elif command == "probe":
        for flag in ("deadline", "command_timeout", "poll_interval"):
            if get(flag) is not None:
                parse_duration(get(flag), "--" + flag.replace("_", "-"))
        if get("polls") is not None and get("polls") < 1:
            raise UsageError(f"--polls must be at least 1, got {get('polls')}")
        if get("bundle_root") is not None:
            refuse_package_dir(get("bundle_root"), "--bundle-root", "choose a directory outside it")
    elif command == "audit":
        require_directory(get("run"), "RUN")
        if get("bundle") is not None:
            require_directory(get("bundle"), "--bundle")
    elif command == "triage":
        require_directory(get("root"), "ROOT")
        if get("jobs") is not None and get("jobs") < 1:
            raise UsageError(f"--jobs must be at least 1, got {get('jobs')}")
    elif command == "history":
        require_directory(get("bundle"), "BUNDLE")
