"""``rlhealth triage ROOT``: diagnose every job bundle under a syncdown root, most urgent first.

A job bundle is a directory holding ``manifest.json`` or rlhealth's own ``rlhealth/captures/``;
both syncdown layouts (``jobs/<cluster>/<user>/<job>/`` and ``jobs/<cluster>/slurm/<id>/``) and
any other nesting are found by walking the tree (never descending into a bundle, never following
symlinked directories). Bundles are diagnosed in a process pool sized to the usable cores, each by
the same ``diagnose`` a single run uses, so the verdicts are the same.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEMA_ID = "rlhealth.triage/v1"
URGENCY = {"KILL": 0, "ERROR": 1, "NO-KILL": 2}
CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}


def is_bundle(d: Path) -> bool:
    return (d / "manifest.json").is_file() or (d / "rlhealth" / "captures").is_dir()


def find_bundles(root: Path) -> list[Path]:
    """Every job bundle under ``root`` (``root`` itself if it is one), sorted by path."""
    found: list[Path] = []
    stack = [Path(root)]
    while stack:
        d = stack.pop()
        if is_bundle(d):
            found.append(d)
            continue
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                continue
            stack.append(Path(e.path))
    return sorted(found)


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _diagnose_one(path: str, now_iso: str, max_age_s: float) -> dict[str, Any]:
    """One bundle -> one triage row; never raises (an internal failure is an ERROR row)."""
    from rlhealth.usage import parse_now
    from rlhealth.diagnose import diagnose
    from rlhealth.progress import disable

    disable()  # workers share the parent's terminal: only the parent draws progress
    try:
        report = diagnose(Path(path), now=parse_now(now_iso), max_age_s=max_age_s)
    except Exception as exc:  # noqa: BLE001 - one broken bundle must not stop the fleet
        return {"path": path, "job_id": None, "verdict": "ERROR", "confidence": "low",
                "gates": {}, "next_action_kind": "investigate",
                "error": f"internal failure: {type(exc).__name__}: {exc}"}
    return {"path": path, "job_id": report.job.id, "verdict": report.verdict, "confidence": report.confidence,
            "gates": {g: report.gates[g].status for g in report.gates},
            "next_action_kind": (report.next_action_machine or {}).get("kind"), "error": None}


def _warm() -> None:
    """Load the catalog and compile the scanner once in the parent so forked workers inherit them."""
    from rlhealth.catalog import load_catalog
    from rlhealth.probes.bundle import scanner_for

    scanner_for(load_catalog())


def triage(root: Path, *, now: datetime, max_age_s: float, workers: int | None = None, progress=None) -> list[dict[str, Any]]:
    bundles = [str(p) for p in find_bundles(root)]
    now_iso = now.isoformat()
    workers = min(workers or usable_cores(), max(1, len(bundles)))
    rows: list[dict[str, Any]] = []
    if progress is not None:
        progress.total = len(bundles)
    if workers <= 1 or len(bundles) <= 1:
        for i, b in enumerate(bundles, start=1):
            rows.append(_diagnose_one(b, now_iso, max_age_s))
            if progress is not None:
                progress.update(i, Path(b).name)
    else:
        import multiprocessing

        # fork shares the warmed catalog and scanner; a process with other threads running (the MCP
        # server's workers) must not fork, so it starts clean workers instead
        if sys.platform.startswith("linux") and threading.active_count() == 1:
            _warm()
            ctx = multiprocessing.get_context("fork")
        else:
            ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_diagnose_one, b, now_iso, max_age_s): b for b in bundles}
            for i, fut in enumerate(as_completed(futures), start=1):
                b = futures[fut]
                try:
                    rows.append(fut.result())
                except Exception as exc:  # noqa: BLE001 - a dead worker is an ERROR row, not a crash
                    rows.append({"path": b, "job_id": None, "verdict": "ERROR", "confidence": "low", "gates": {},
                                 "next_action_kind": "investigate", "error": f"worker failed: {type(exc).__name__}: {exc}"})
                if progress is not None:
                    progress.update(i, Path(b).name)
    return sort_rows(rows)


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most urgent first: KILL, ERROR, NO-KILL; then high, medium, low confidence; then path."""
    return sorted(rows, key=lambda r: (URGENCY.get(r["verdict"], 1), CONFIDENCE_RANK.get(r["confidence"], 3), r["path"]))


def exit_code(rows: list[dict[str, Any]]) -> int:
    """The exit status of the most urgent verdict (10 any KILL, 20 any ERROR, else 0)."""
    from rlhealth.usage import VERDICT_EXIT

    if not rows:
        return VERDICT_EXIT["ERROR"]
    return VERDICT_EXIT[rows[0]["verdict"]]


def render_text(root: Path, rows: list[dict[str, Any]]) -> str:
    from rlhealth.history import gate_text

    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in URGENCY}
    lines = [f"RL-JOB-TRIAGE — {root} — {len(rows)} job bundle{'s' if len(rows) != 1 else ''}: "
             + ", ".join(f"{counts[v]} {v}" for v in URGENCY)]
    for r in rows:
        gates = gate_text(r["gates"])
        extra = f"  ({r['error']})" if r.get("error") else ""
        lines.append(f"{r['verdict']:<7}  {r['confidence']:<6}  {str(r['job_id'] or '?'):<32}  {gates}  {r['path']}{extra}")
    if not rows:
        lines.append("no job bundle found (a bundle holds manifest.json or rlhealth/captures/)")
    return "\n".join(lines) + "\n"


def render_json(root: Path, rows: list[dict[str, Any]], now: datetime) -> str:
    doc = {"schema": SCHEMA_ID, "root": str(root), "evaluated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "jobs": rows}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
