"""Controller state for an Iris job: the ``iris job summary`` text, or a derivation from pods.

``iris --cluster=C job summary <id>`` prints text (``--json`` was removed upstream); its header
lines look like ``State: running  exit=0  failures=0  preemptions=0`` and
``Tasks: 0/16 completed  running=16`` (marin-artifacts §4.2). When the CLI is not available the
state is derived from the job's pods (and the bundle's ``manifest.json``); the caller marks
that derivation on its probe record. No pods and no controller record means ``absent``.
"""
from __future__ import annotations

import re
from typing import Iterable, get_args

from rlhealth.probes.capture import Attempt, ControllerState, ControllerStateName, terminal_states
from rlhealth.probes.parse import COUNT
from rlhealth.probes.parse.kubernetes import PodInfo

IRIS_STATES = set(get_args(ControllerStateName)) - {"absent"}  # the controller vocabulary (contract §2.2)
_ALIASES = {"unspecified": "pending", "terminated": "killed", "worker failed": "worker_failed",
            "worker-failed": "worker_failed"}


def normalize_state(raw: str | None) -> str | None:
    """An Iris state name (any case, ``JOB_STATE_`` prefix allowed) -> the contract's name, or None."""
    if not raw:
        return None
    s = raw.strip().lower()
    s = re.sub(r"^job_state_", "", s)
    s = _ALIASES.get(s, s)
    return s if s in IRIS_STATES else None


def parse_job_summary(text: str) -> dict | None:
    """Header fields of ``iris job summary``; None when there is no ``State:`` line."""
    m = re.search(r"^\s*State:\s*(\S+)(.*)$", text, re.M)
    if not m:
        return None
    rest = m.group(2)
    out: dict = {"state_raw": m.group(1), "state": normalize_state(m.group(1))}
    e = re.search(rf"\bexit=(-?{COUNT}|-)", rest)
    out["exit_code"] = None if not e or e.group(1) == "-" else int(e.group(1))
    f = re.search(rf"\bfailures=({COUNT})", rest)
    out["failure_count"] = int(f.group(1)) if f else 0
    p = re.search(rf"\bpreemptions=({COUNT})", rest)
    out["preemption_count"] = int(p.group(1)) if p else 0
    t = re.search(rf"^\s*Tasks:\s*({COUNT})\s*/\s*({COUNT})\s*completed(.*)$", text, re.M)
    if t:
        out["tasks_completed"], out["tasks_total"] = int(t.group(1)), int(t.group(2))
        out["task_states"] = {k: int(v) for k, v in re.findall(rf"(\w+)=({COUNT})", t.group(3))}
    return out


def _first(values: Iterable[str | None]) -> str | None:
    vals = sorted(v for v in values if v)
    return vals[0] if vals else None


def _last(values: Iterable[str | None]) -> str | None:
    vals = sorted(v for v in values if v)
    return vals[-1] if vals else None


def _phase_state(pods: list[PodInfo]) -> str | None:
    phases = [p.phase for p in pods if not p.deleting] or [p.phase for p in pods]
    if any(p == "Running" for p in phases):
        return "running"
    if any(p == "Pending" for p in phases):
        return "pending"
    if phases and all(p == "Succeeded" for p in phases):
        return "succeeded"
    if any(p == "Failed" for p in phases):
        return "failed"
    return None


def attempts_from_pods(pods: list[PodInfo]) -> list[Attempt]:
    """One attempt per retry generation (pod-name generation / pod-group attempt)."""
    attempts = []
    for gen in sorted({p.generation for p in pods}):
        group = [p for p in pods if p.generation == gen]
        state = _phase_state(group) or "unknown"
        terms = [p.terminated for p in group if p.terminated]
        failing = [t for t in terms if t.get("exitCode") not in (0, None)]
        first_fail = min(failing, key=lambda t: t.get("finishedAt") or "", default=None)
        error = None
        if first_fail:
            error = f"{first_fail.get('reason') or 'Error'} (exit {first_fail.get('exitCode')})"
            if first_fail.get("message"):
                error += f": {first_fail['message'][:300]}"
        elif any(p.pod_reason for p in group):
            error = next(p.pod_reason for p in group if p.pod_reason)
        finished = _last(t.get("finishedAt") for t in terms) if state in terminal_states() else None
        attempts.append(Attempt(
            attempt=gen, state=state,
            started_at=_first(p.started or p.created for p in group),
            finished_at=finished,
            exit_code=(first_fail or {}).get("exitCode") if first_fail else (0 if state == "succeeded" else None),
            error=error))
    return attempts


def state_from_summary(summary: dict, pods: list[PodInfo]) -> ControllerState | None:
    if summary.get("state") is None:
        return None
    return ControllerState(source="iris", state=summary["state"],
                           failure_count=summary.get("failure_count", 0),
                           preemption_count=summary.get("preemption_count", 0),
                           max_retries=None, attempts=attempts_from_pods(pods))


def derive_state(pods: list[PodInfo], manifest: dict | None) -> tuple[ControllerState | None, str]:
    """Controller state without the Iris CLI, and a note saying how it was derived.

    Pods of the newest generation decide (any Running -> running, any Pending -> pending, all
    Succeeded -> succeeded, any Failed -> failed); with no pods the manifest's ``job.state``
    is used; with neither the job is ``absent``. Returns (None, reason) when undecidable.
    """
    attempts = attempts_from_pods(pods)
    failures = sum(1 for a in attempts[:-1] if a.state in ("failed", "unknown"))
    if pods:
        newest = max(p.generation for p in pods)
        state = _phase_state([p for p in pods if p.generation == newest])
        if state is None:
            return None, "derived from pods: phases of the newest generation are undecidable"
        return (ControllerState(source="iris", state=state, failure_count=failures, preemption_count=0,
                                max_retries=None, attempts=attempts),
                f"derived from {len(pods)} pod(s) (newest generation {newest})")
    job = (manifest or {}).get("job") or {}
    mstate = normalize_state(job.get("state")) if isinstance(job, dict) else None
    if mstate in terminal_states():
        return (ControllerState(source="iris", state=mstate, failure_count=0, preemption_count=0,
                                max_retries=None, attempts=[]),
                f"derived from manifest.json job.state={job.get('state')!r} (no pods)")
    if mstate:
        return (ControllerState(source="iris", state="absent", failure_count=0, preemption_count=0,
                                max_retries=None, attempts=[]),
                f"derived: no pods now; manifest.json said job.state={job.get('state')!r} at "
                f"{(manifest or {}).get('synced_at')}; absence after existence -> absent")
    return (ControllerState(source="iris", state="absent", failure_count=0, preemption_count=0,
                            max_retries=None, attempts=[]),
            "derived: no pods and no controller record -> absent")
