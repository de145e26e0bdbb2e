"""``rlhealth triage ROOT``: diagnose every job bundle under a syncdown root, most urgent first.

A job bundle is a directory holding ``manifest.json`` or rlhealth's own ``rlhealth/captures/``;
both syncdown layouts (``jobs/<cluster>/<user>/<job>/`` and ``jobs/<cluster>/slurm/<id>/``) and
any other nesting are found by walking the tree (never descending into a bundle, never following
symlinked directories). Bundles are diagnosed in a process pool sized to the usable cores, each by
the same ``diagnose`` a single run uses, so the verdicts are the same.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime
from pathlib import Path
from typing import Any

from rlhealth.forks import cpus
from rlhealth.probes.patterns import prepare_packaged

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
    return max(1, cpus())


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
    """Import the diagnosis, load the catalog and the per-process data files and compile the scanner
    once in the parent, so forked workers inherit them instead of each paying for them."""
    import rlhealth.diagnose  # noqa: F401 - the import is the warm-up
    from rlhealth.catalog import load_catalog
    from rlhealth.probes.bundle import scanner_for
    from rlhealth.probes.capture import capture_probe_policy

    scanner_for(load_catalog())
    capture_probe_policy()


# Rough costs on one core, only used to order the work (never affects a row): a diagnosis' fixed
# cost, that of a trace_jobs/ directory (its reader is a forked process), per byte of log outside
# trace_jobs/, per trial directory.
_JOB_COST_S = 0.03
_TRACE_COST_S = 0.02
_BYTE_COST_S = 2.5e-9
_TRIAL_COST_S = 80e-6


def estimated_cost(bundle: str) -> float:
    """Seconds one diagnosis of ``bundle`` roughly takes: file sizes outside ``trace_jobs/`` (never
    followed through symlinks) plus the number of trial directories (listed, not read)."""
    size = trials = 0
    cost = _JOB_COST_S
    stack = [bundle]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name == "trace_jobs" and os.path.dirname(e.path) == bundle:
                        cost += _TRACE_COST_S
                        trials += sum(1 for _ in os.scandir(e.path))
                    else:
                        stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    size += e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return cost + size * _BYTE_COST_S + trials * _TRIAL_COST_S


def longest_first(bundles: list[str]) -> list[str]:
    """The pool's submission order: the costliest bundles first, so no long job starts last and
    leaves a core idle at the end (longest-processing-time scheduling); ties by path."""
    return sorted(bundles, key=lambda b: (-estimated_cost(b), b))


def triage(root: Path, *, now: datetime, max_age_s: float, workers: int | None = None, progress=None) -> list[dict[str, Any]]:
    bundles = [str(p) for p in find_bundles(root)]
    now_iso = now.isoformat()
    workers = min(workers or usable_cores(), max(1, len(bundles)))
    rows: list[dict[str, Any]] = []
    if progress is not None:
        progress.total = len(bundles)
    if workers <= 1 or len(bundles) <= 1:
        if bundles:
            prepare_packaged()      # compiles on the other core while the first diagnosis imports
        for i, b in enumerate(bundles, start=1):
            rows.append(_diagnose_one(b, now_iso, max_age_s))
            if progress is not None:
                progress.update(i, Path(b).name)
    else:
        import multiprocessing

        # fork shares the warmed catalog and scanner; a process with other threads running (the MCP
        # server's workers) must not fork, so it starts clean workers instead
        forked = sys.platform.startswith("linux") and threading.active_count() == 1
        if forked:
            prepare_packaged()      # compiles on the other core while _warm imports; joined by _warm
            _warm()
            # the warmed heap moves to the permanent generation: the workers' collections then
            # never touch (and copy-on-write) the pages they share with the parent
            gc.freeze()
            ctx = multiprocessing.get_context("fork")
        else:
            ctx = multiprocessing.get_context("spawn")
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                try:
                    futures = {pool.submit(_diagnose_one, b, now_iso, max_age_s): b for b in longest_first(bundles)}
                    for i, fut in enumerate(as_completed(futures), start=1):
                        b = futures[fut]
                        try:
                            rows.append(fut.result())
                        except Exception as exc:  # noqa: BLE001 - a dead worker is an ERROR row, not a crash
                            rows.append({"path": b, "job_id": None, "verdict": "ERROR", "confidence": "low", "gates": {},
                                         "next_action_kind": "investigate",
                                         "error": f"worker failed: {type(exc).__name__}: {exc}"})
                        if progress is not None:
                            progress.update(i, Path(b).name)
                except BaseException:
                    _stop_pool(pool)
                    raise
        finally:
            if forked:
                gc.unfreeze()
    return sort_rows(rows)


def _stop_pool(pool) -> None:
    """An interrupted triage (Ctrl-C, SIGTERM): cancel the queued bundles and end the workers, so
    leaving the pool does not wait for the rest of the fleet."""
    import multiprocessing

    pool.shutdown(wait=False, cancel_futures=True)
    for child in multiprocessing.active_children():
        child.terminate()


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
