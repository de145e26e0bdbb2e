"""The input checks of every command, shared by the command line and the MCP server: each a small
function of plain values raising ``rlhealth.usage.UsageError`` with one line that names the flag
and what would be accepted, so every front end refuses the same mistakes with the same words.

- ``rlhealth.usage.require_directory``: a BUNDLE / RUN / ROOT that does not exist or is not a directory;
- ``check_capture``: a ``--capture`` stamp the bundle does not hold (the ones it holds are listed);
- ``rlhealth.usage.parse_now``: a ``--now`` that is not an ISO-8601 time;
- ``rlhealth.usage.parse_duration``: ``--max-age`` and the probe's durations (positive, with a unit);
- ``check_gpu``: a ``--gpu`` that is not a row of the hardware table (the known names are listed);
- ``refuse_package_dir``: a path rlhealth would write to (``--record``, ``--bundle-root``) that
  lies inside the installed package (its packaged examples, site-packages);
- ``check_command``: all of the above for one command's options.

Cheap at import: what a check reads (the bundle reader, the packaged tables) is imported when it runs.
"""
from __future__ import annotations

from pathlib import Path

from rlhealth.usage import UsageError, parse_duration, parse_now, require_directory


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
    """``--gpu``: a GPU class of the hardware table (any case: returned as the table spells it), or
    a product name the table's name patterns map to a class (``H100``, ``NVIDIA H100 80GB HBM3``:
    returned as written, the diagnosis maps it the same way); else ``UsageError`` listing the known
    classes. None stays None."""
    if name is None or not str(name).strip():
        return None
    from rlhealth.probes.parse.nvidia_smi import gpu_class_or_none

    known = known_gpus()
    text = str(name).strip()
    found = {g.lower(): g for g in known}.get(text.lower())
    if found is not None:
        return found
    if gpu_class_or_none(text) in known:
        return text
    raise UsageError(f"--gpu {name}: not in the hardware table; known: {', '.join(known)} "
                     "(or a product name rules/tables/gpu_names.csv maps to one, e.g. H100)")


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
