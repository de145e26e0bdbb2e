"""The verdict history: ``<bundle>/rlhealth/verdicts.jsonl``, the dated probe log of one job.

Every ``rlhealth probe`` (and ``diagnose --record``) appends one JSON line; ``rlhealth history``
prints them as a timeline so a verdict that flipped is visible. Lines are appended with
``O_APPEND`` under an advisory lock, so concurrent probes of one job never interleave a line.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

HISTORY_FILE = Path("rlhealth") / "verdicts.jsonl"
SCHEMA_ID = "rlhealth.history/v1"


def history_path(bundle: Path) -> Path:
    return Path(bundle) / HISTORY_FILE


def entry_for(report, *, command: str, capture: str | None, argv: list[str] | None = None) -> dict[str, Any]:
    from rlhealth import __version__

    return {"t": report.evaluated_at, "command": command, "job_id": report.job.id, "verdict": report.verdict,
            "confidence": report.confidence, "gates": {g: report.gates[g].status for g in report.gates},
            "capture": capture, "captured_at": report.captured_at, "rlhealth": __version__,
            "next_action_kind": (report.next_action_machine or {}).get("kind"), "argv": argv}


def newest_capture_stamp(bundle: Path) -> str | None:
    from rlhealth.probes.bundle import list_captures

    captures = list_captures(Path(bundle))
    return captures[-1].name if captures else None


def append(bundle: Path, entry: dict[str, Any]) -> Path:
    """Append one entry; raises OSError when the bundle is not writable."""
    import fcntl

    path = history_path(bundle)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    finally:
        os.close(fd)
    return path


def read_history(bundle: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Entries in file order; unreadable lines are skipped and described in ``problems``."""
    path = history_path(bundle)
    entries: list[dict[str, Any]] = []
    try:
        fh = path.open("rb")
    except OSError as exc:
        if problems is not None and path.exists():
            problems.append(f"{HISTORY_FILE}: {exc.strerror or exc}")
        return entries
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
                if not isinstance(entry, dict) or "verdict" not in entry:
                    raise ValueError("not a verdict entry")
            except ValueError as exc:
                if problems is not None:
                    problems.append(f"{HISTORY_FILE}:{lineno}: unreadable line skipped ({exc})")
                continue
            entries.append(entry)
    return entries


def timeline(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries sorted by time (stable), each marked ``flipped`` when its verdict differs from the previous."""
    ordered = sorted(entries, key=lambda e: str(e.get("t") or ""))
    out, previous = [], None
    for e in ordered:
        out.append({**e, "flipped": previous is not None and e.get("verdict") != previous})
        previous = e.get("verdict")
    return out


def gate_text(gates: dict[str, str]) -> str:
    """``LIV:FAIL RES:PASS ROL:PASS DYN:PASS`` in the report's gate order."""
    from rlhealth.facts import GATES

    order = [g for g in GATES if g in gates] + sorted(g for g in gates if g not in GATES)
    return " ".join(f"{g[:3].upper()}:{gates[g]}" for g in order) or "-"


def render_text(bundle: Path, entries: list[dict[str, Any]], problems: list[str]) -> str:
    lines = [f"VERDICT HISTORY — {bundle} — {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"]
    for e in entries:
        gates = gate_text(e.get("gates") or {})
        flip = "  <- flipped" if e.get("flipped") else ""
        lines.append(f"{e.get('t')}  {str(e.get('verdict')):<7}  {str(e.get('confidence')):<6}  {gates}  "
                     f"capture {e.get('capture') or '-'}  {e.get('command')}  rlhealth {e.get('rlhealth')}{flip}")
    if not entries:
        lines.append(f"no entries in {HISTORY_FILE} (written by `rlhealth probe` and `diagnose --record`)")
    for p in problems:
        lines.append(f"problem: {p}")
    return "\n".join(lines) + "\n"


def render_json(bundle: Path, entries: list[dict[str, Any]], problems: list[str]) -> str:
    return json.dumps({"schema": SCHEMA_ID, "bundle": str(bundle), "entries": entries, "problems": problems},
                      indent=2, sort_keys=True, ensure_ascii=False) + "\n"
