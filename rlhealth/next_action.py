"""The machine form of ``next_action``: ``{"kind": ..., "command": argv | null}``.

The kind is derived here from the verdict and the rule base's conclusions in ONE function,
``next_action_kind``; it is meant to move into the rule data (each verdict rule naming the kind of
action it recommends) when the rule base carries it. ``probe`` carries the exact ``rlhealth probe`` argv
that refreshes this job's evidence into the same bundle.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KINDS = ("kill", "leave", "probe", "fix_and_relaunch", "investigate")


def _conclusions(result) -> list:
    return [d for d in result.derived if d.kind == "conclusion"] if result is not None else []


def next_action_kind(verdict: str, *, terminal: bool, job_state: str, stale: bool, first_error: bool,
                     stall_without_live_evidence: bool) -> str:
    """kill | leave | probe | fix_and_relaunch | investigate."""
    if verdict == "KILL":
        return "kill"
    if verdict == "NO-KILL":
        if terminal and job_state not in ("succeeded", "completed"):
            return "fix_and_relaunch" if first_error else "investigate"
        return "leave"
    if stale or stall_without_live_evidence:
        return "probe"
    return "investigate"


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
    argv = ["rlhealth", "probe", "--backend", backend]
    if backend == "iris":
        argv += ["--cluster", cluster, "--job", job_id]
    elif backend == "slurm":
        job = manifest.get("job") if isinstance(manifest, dict) and isinstance(manifest.get("job"), dict) else {}
        host = _last_probe_host(bundle) or job.get("login_host") or cluster
        argv += ["--host", str(host), "--cluster", cluster, "--job", job_id.rsplit("/", 1)[-1]]
        if isinstance(job.get("experiment_dir"), str) and job["experiment_dir"].startswith("/"):
            argv += ["--experiment-dir", job["experiment_dir"]]
    else:
        return None
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


def machine_form(report, *, obs, read, result) -> dict[str, Any]:
    """The machine next action from the rule base's conclusions (``evidence_stale``, ``live_evidence``,
    ``finding_stands`` with ``stall``) and the deciding verdict fact; an engine failure investigates."""
    conclusions = _conclusions(result)
    names = {str(d.fields.get("name")) for d in conclusions}
    stall = any(d.fields.get("name") == "finding_stands" and d.fields.get("status") == "FAIL" and d.fields.get("stall")
                for d in conclusions)
    kind = next_action_kind(report.verdict, terminal=report.terminal, job_state=str(obs.job.get("state") or "unknown"),
                            stale="evidence_stale" in names, first_error=obs.first_error is not None,
                            stall_without_live_evidence=stall and "live_evidence" not in names) \
        if result is not None else "investigate"
    deciding = None
    if result is not None:
        from rlhealth.diagnose import _by_kind, _deciding

        decided = _deciding(_by_kind(result, "verdict"), result)
        deciding = decided.rule if decided is not None else None
    command = probe_argv(report, read.manifest, read.root) if kind == "probe" else None
    return {"kind": kind, "command": command, "deciding_rule": deciding}


def complete_report(report, *, read, obs, result, given=None, with_plots: bool = False):
    """Add the dispatcher's given evidence, the machine next action and (for HTML) the plot series."""
    update: dict[str, Any] = {"next_action_machine": machine_form(report, obs=obs, read=read, result=result)}
    if isinstance(given, dict):
        from rlhealth.given import Given
        given = Given.model_validate(given)
    if given is not None:
        update["given"] = json.loads(given.model_dump_json())
    if with_plots:
        from rlhealth.plots_data import collect_series
        update["plots"] = collect_series(read, obs, report)
    return report.model_copy(update=update)
