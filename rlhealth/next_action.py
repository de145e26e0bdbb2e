"""The machine form of ``next_action``: ``{"kind": ..., "command": argv | null}``.

The kind is named by the verdict rule that decided (``action_kind`` in rules/rulesets/verdict.yaml).
``probe`` carries the exact ``rlhealth probe`` argv that refreshes this job's evidence into the same
bundle.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

from rlhealth.probes.backends import BACKENDS
from rlhealth.report import NextActionKind

KINDS = get_args(NextActionKind)


def bundle_root_of(bundle: Path) -> Path | None:
    """``ROOT`` of a syncdown bundle ``ROOT/jobs/<cluster>/<user or slurm>/<job>`` (None otherwise)."""
    parts = Path(bundle).resolve().parts
    if len(parts) >= 5 and parts[-4] == "jobs":
        return Path(*parts[:-4])
    return None


def probe_argv(report, manifest: dict | None, bundle: Path) -> list[str] | None:
    """The ``rlhealth probe`` argv that captures fresh evidence for this job into this bundle."""
    job_id, cluster, backend = report.job.id, report.job.cluster, report.job.backend
    if cluster in ("", "unknown", "None") or job_id in ("", "unknown", "None"):
        return None
    if backend not in BACKENDS:
        return None
    job = manifest.get("job") if isinstance(manifest, dict) and isinstance(manifest.get("job"), dict) else {}
    argv = ["rlhealth", "probe", "--backend", backend,
            *BACKENDS[backend].job_flags(job_id, cluster, job, lambda: _last_probe_host(bundle))]
    root = bundle_root_of(bundle)
    if root is not None:
        argv += ["--bundle-root", str(root)]
    return argv + ["--format", "json"]


def _last_probe_host(bundle: Path) -> str | None:
    """The ``--host`` of the newest recorded slurm probe in the verdict history, if any."""
    from rlhealth.history import read_history

    for entry in reversed(read_history(bundle)):
        argv = entry.get("argv") or []
        if "--host" in argv and argv.index("--host") + 1 < len(argv):
            return argv[argv.index("--host") + 1]
    return None


def machine_form(report, *, read, result) -> dict[str, Any]:
    """The machine next action: the kind the deciding verdict rule names (``action_kind`` in
    rules/rulesets/verdict.yaml); an engine failure investigates. ``probe`` carries the argv."""
    decided = None
    if result is not None:
        verdicts = sorted((d for d in result.derived if d.kind == "verdict"), key=lambda d: str(d.fields.get("decided_by")))
        decided = verdicts[0] if verdicts else None
    kind = str(decided.fields.get("action_kind")) if decided is not None else "investigate"
    if kind not in KINDS:
        kind = "investigate"
    command = probe_argv(report, read.manifest, read.root) if kind == "probe" else None
    return {"kind": kind, "command": command, "deciding_rule": decided.fields.get("decided_by") if decided else None}


def complete_report(report, *, read, obs, result, given=None, with_plots: bool = False):
    """Add the dispatcher's given evidence, the machine next action and (for HTML) the plot series."""
    update: dict[str, Any] = {"next_action_machine": machine_form(report, read=read, result=result)}
    if isinstance(given, dict):
        from rlhealth.given import Given
        given = Given.model_validate(given)
    if given is not None:
        update["given"] = json.loads(given.model_dump_json())
    if with_plots:
        from rlhealth.plots_data import collect_series
        update["plots"] = collect_series(read, obs, report, result)
    return report.model_copy(update=update)
