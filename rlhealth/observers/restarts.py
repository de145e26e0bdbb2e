"""restarts: the attempts of the job, each one's first causal error, and the retry budget."""
from __future__ import annotations

import json
import re

from rlhealth.facts import Evidence, RestartsMeasured
from rlhealth.observers.base import Observation, as_count, ev
from rlhealth.first_error import first_causes
from rlhealth.probes.parse import COUNT
from rlhealth.probes.textio import quote

FAILED_STATES = {"failed", "worker_failed", "killed", "timeout", "out_of_memory", "node_fail", "cancelled"}


def normalize_error(text: str) -> str:
    """A first error without timestamps, addresses and numbers: equal for the same failure."""
    text = re.sub(r"^\s*\([^)]*\)\s*", "", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[ T][0-9:.,]+", "", text)
    text = re.sub(r"0x[0-9a-f]+|\b\d+\b", "N", text)
    return " ".join(text.split())[:160]


MAX_RETRIES_RE = re.compile(rf"--max[-_]retries(?:=|\s+|\"\s*,\s*\")({COUNT})")


def launch_max_retries(obs: Observation) -> tuple[int | None, str | None]:
    """The retry budget from the launch command (``--max-retries K``) or the capture's job.json."""
    info = obs.read.job_info or {}
    if isinstance(info.get("max_retries"), int):
        return info["max_retries"], "capture job.json max_retries"
    from rlhealth.observers.job import launch_text
    m = MAX_RETRIES_RE.search(launch_text(obs.read))
    return (int(m.group(1)), "launch command --max-retries") if m else (None, None)


def _attempts(obs: Observation) -> list[dict]:
    read, job = obs.read, obs.job
    first_by_attempt = {a: (c.occ, c.signature, c.transient) for a, c in first_causes(read.signatures, read.events).items()}
    timeout_attempts: set[int] = set()
    if "slurm_time_limit" in read.signatures:
        timeout_attempts = set(read.signatures["slurm_time_limit"].first_by_attempt)
    state = read.state if isinstance(read.state, dict) else {}
    cap_attempts = state.get("attempts") if isinstance(state.get("attempts"), list) else []
    attempts: list[dict] = []

    def entry(idx, st, log_err, timeout, error=None):
        if error and not isinstance(error, str):
            error = json.dumps(error, sort_keys=True) if isinstance(error, (list, dict)) else str(error)   # garbled
        return dict(attempt=idx, state=st, first_error=error or (log_err[0].text if log_err else None),
                    signature=log_err[1] if log_err else None, transient=log_err[2] if log_err else False,
                    occ=log_err[0] if log_err else None, timeout=timeout)
    if cap_attempts:
        for i, a in enumerate(cap_attempts):
            if not isinstance(a, dict):
                continue
            idx = as_count(a.get("attempt", i), default=i)
            log_err = first_by_attempt.get(idx + 1)   # log attempts are 1-based (boundaries / chain legs)
            if log_err is None and len(cap_attempts) == 1:
                log_err = first_by_attempt.get(0) or first_by_attempt.get(-1)
            timeout = "TIME LIMIT" in str(a.get("error") or "") or str(a.get("state")).lower() == "timeout" \
                or (idx + 1) in timeout_attempts
            attempts.append(entry(idx, str(a.get("state")), log_err, timeout, a.get("error")))
    else:
        n = max(len(read.attempt_boundaries), len(read.leg_ids) + (1 if read.current_leg_missing else 0), 1)
        for idx in range(1, n + 1):
            log_err = first_by_attempt.get(idx)
            if idx == 1 and log_err is None:
                log_err = first_by_attempt.get(0) or first_by_attempt.get(-1) if n == 1 else first_by_attempt.get(0)
            if idx == n:
                st = job.get("state") or "unknown"
            else:
                st = "timeout" if idx in timeout_attempts else ("failed" if log_err else "unknown")
            attempts.append(entry(idx - 1, st, log_err, idx in timeout_attempts))
    return attempts


def observe(obs: Observation) -> None:
    read = obs.read
    attempts = _attempts(obs)
    state = read.state if isinstance(read.state, dict) else {}

    def failed(a) -> bool:
        return a["state"].lower() in FAILED_STATES or (a["first_error"] is not None and a["state"] == "unknown")
    before = []
    for a in attempts[:-1]:
        if not failed(a):
            continue
        if a["timeout"]:
            a["interpretation"] = "wall-clock TIMEOUT with a successor: chain restart, not a burn"
            continue
        before.append(a)
    current = attempts[-1] if attempts else None
    current_failed = bool(current is not None and failed(current))
    every = before + ([current] if current_failed else [])

    def distinct(items):
        return len({normalize_error(a["first_error"]) for a in items if a["first_error"]})
    evidence: list[Evidence] = []
    for a in every[:3]:
        if a["occ"] is not None:
            evidence += ev(a["occ"])
        elif a["first_error"]:
            evidence.append(Evidence(source="state.json", text=quote(a["first_error"]), summary=True))
    obs.attempts = [{"attempt": a["attempt"], "state": a["state"],
                     "first_error": (quote(a["first_error"], a["occ"].at if a["occ"] is not None and a["first_error"] == a["occ"].text
                                           else None) if a["first_error"] else None),
                     **({"interpretation": a["interpretation"]} if a.get("interpretation") else {})} for a in attempts]
    max_retries, max_retries_source = state.get("max_retries"), "controller state (state.json max_retries)"
    if not isinstance(max_retries, int):
        max_retries, max_retries_source = launch_max_retries(obs)
    obs.max_retries = max_retries
    firsts = [a for a in attempts if a["occ"] is not None]
    target = current if current is not None and current["occ"] is not None else (firsts[0] if firsts else None)
    if target is not None:
        obs.first_error = ev(target["occ"])[0]
    obs.add(RestartsMeasured(
        fact_id="restarts", evidence=tuple(evidence), attempts=len(attempts), failed_before_current=len(before),
        current_failed=current_failed, failed_including_current=len(every), distinct_errors_before_current=distinct(before), distinct_errors_all=distinct(every),
        errors_missing_before_current=sum(1 for a in before if not a["first_error"]),
        errors_missing_all=sum(1 for a in every if not a["first_error"]),
        current_transient=bool(current is not None and current["transient"]),
        transient_failed=sum(1 for a in before if a["transient"]),
        controller_failure_count=as_count(state.get("failure_count")),
        preemption_count=as_count(state.get("preemption_count")),
        max_retries=obs.max_retries,
        max_retries_source=max_retries_source if obs.max_retries is not None else None,
        first_signature=every[0]["signature"] if every else None))
