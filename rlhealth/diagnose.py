"""One diagnosis: bundle -> facts -> rules -> gates -> verdict -> Report.

``diagnose`` never raises for bad evidence: unreadable, missing, stale or contradictory
evidence becomes gate ERRORs with reasons; an engine failure becomes an ERROR verdict.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from rlhealth.catalog import load_catalog
from rlhealth.engine import EngineError, run_rules
from rlhealth.facts import GATES, Evidence, FindingSpec, make_fact
from rlhealth.observe import Observation, observe, set_tables
from rlhealth.probes.bundle import read_bundle
from rlhealth.probes.parse.timestamps import iso
from rlhealth.report import AttemptReport, GateReport, JobRef, Report, RestartsReport

_STATUS_RANK = {"FAIL": 0, "ERROR": 1, "PASS": 2}
VERDICT_NAMES = {"FAIL": "KILL", "ERROR": "ERROR", "PASS": "NO-KILL"}


def diagnose(bundle: Path, *, now: datetime, max_age_s: float = 1800.0, mode_override: str | None = None,
             capture: str | None = None, given=None, with_plots: bool = False) -> Report:
    """``given``: a ``rlhealth.given.Given`` (dispatcher inputs); ``with_plots``: collect HTML plot series."""
    catalog = load_catalog()
    set_tables(catalog)
    now_epoch = now.timestamp()
    read = read_bundle(Path(bundle), catalog, capture_stamp=capture, now_epoch=now_epoch)
    obs = observe(read, catalog, now=now_epoch, max_age_s=max_age_s, mode_override=mode_override)
    engine_error = None
    findings: list[FindingSpec] = []
    fired: list[dict] = []
    try:
        result = run_rules(catalog.rules, obs.facts, catalog.thresholds)
        findings, fired = result.findings, result.fired
    except EngineError as exc:
        engine_error = str(exc)
    gates, gate_findings = _gates(findings, obs, engine_error)
    restarts = _restarts(findings, obs)
    verdict_finding, verdict_fired, verdict_error = _verdict(gates, gate_findings, restarts, obs, catalog, engine_error)
    fired += verdict_fired
    report = _report(read, obs, now, gates, gate_findings, restarts, verdict_finding, verdict_error, fired)
    from rlhealth.next_action import complete_report
    return complete_report(report, read=read, obs=obs, gate_findings=gate_findings, given=given, with_plots=with_plots)


def _gates(findings: list[FindingSpec], obs: Observation, engine_error: str | None):
    gates: dict[str, GateReport] = {}
    per_gate: dict[str, list[FindingSpec]] = {}
    stale = bool(obs.job.get("stale"))
    for gate in GATES:
        fs = [f for f in findings if f.gate == gate]
        if any(f.refutes_stall for f in fs):
            fs = [f for f in fs if not f.stall]
        if stale:
            fs = [f.model_copy(update={"status": "ERROR", "finding": f"(stale evidence) {f.finding}"})
                  if f.status == "FAIL" and f.rule != "liveness.terminal" else f for f in fs]
        if engine_error:
            fs = [FindingSpec(rule="engine.error", gate=gate, status="ERROR", order=0,
                              finding=f"rule engine failed: {engine_error}")]
        if not fs:
            fs = [FindingSpec(rule=f"{gate}.no_conclusion", gate=gate, status="ERROR", order=999,
                              finding="no rule reached a conclusion for this gate: required evidence is missing")]
        fs.sort(key=lambda f: (_STATUS_RANK[f.status], f.order, f.rule, f.facts))
        status = fs[0].status
        per_gate[gate] = fs
        gates[gate] = GateReport(status=status, finding=fs[0].finding, evidence=list(fs[0].evidence),
                                 findings=[{"rule": f.rule, "status": f.status, "finding": f.finding} for f in fs])
    return gates, per_gate


def _restarts(findings: list[FindingSpec], obs: Observation) -> tuple[RestartsReport, FindingSpec | None]:
    fs = sorted((f for f in findings if f.gate == "restarts"), key=lambda f: (_STATUS_RANK[f.status], f.order, f.rule))
    top = fs[0] if fs else None
    data = obs.restarts or {}
    report = RestartsReport(burned=int(data.get("burned") or 0), max_retries=data.get("max_retries"),
                            same_failure=bool(data.get("same_failure")),
                            attempts=[AttemptReport(**a) for a in data.get("attempts", [])],
                            finding=top.finding if top else "restarts not evaluated",
                            evidence=list(top.evidence) if top else [])
    return report, top


def _verdict(gates, gate_findings, restarts, obs: Observation, catalog, engine_error):
    fails = [f for gate in GATES for f in gate_findings[gate] if f.status == "FAIL" and f.rule != "liveness.terminal"]
    hard = [f for f in fails if not f.stall]
    stalls = [f for f in fails if f.stall]
    errors = [g for g in GATES if gates[g].status == "ERROR"]
    restart_report, restart_top = restarts
    healthy_now = gates["liveness"].status == "PASS" and not any(
        f.rule in ("liveness.fatal_signature", "liveness.hang_signature") for f in gate_findings["liveness"])
    trainer = next((f for f in obs.facts if f.kind == "trainer"), None)
    current_failing = not (healthy_now and trainer is not None and getattr(trainer, "stage", "") == "training")
    summary = make_fact("summary", "summary", terminal=bool(obs.job.get("terminal")), hard_fails=len(hard),
                        stall_fails=len(stalls), errors=len(errors), live_evidence=bool(obs.job.get("live_evidence")),
                        restarts_same_failure=restart_report.same_failure, current_attempt_failing=current_failing,
                        stale=bool(obs.job.get("stale")))
    try:
        result = run_rules(catalog.verdict_rules, [summary], catalog.thresholds)
    except EngineError as exc:
        return None, [], str(exc)
    if not result.findings:
        return None, result.fired, "verdict rules reached no conclusion"
    decided = min(result.findings, key=lambda f: f.order)
    return decided, [f for f in result.fired if f["rule"] == decided.rule], engine_error


def _confidence(verdict: str, gates: dict[str, GateReport], gate_findings, restarts: RestartsReport, obs: Observation) -> str:
    if verdict == "ERROR":
        return "low"
    if verdict == "KILL":
        fails = [f for g in GATES for f in gate_findings[g] if f.status == "FAIL"]
        strong = len(fails) >= 2 or restarts.same_failure or obs.job.get("live_evidence")
        return "high" if strong else "medium"
    if obs.job.get("terminal"):
        return "high"
    early = any(f.rule in ("liveness.bring_up", "rollouts.agentic_early", "dynamics.too_early", "liveness.no_trainer_lines")
                for g in GATES for f in gate_findings[g][:1])
    return "medium" if early else "high"


def _report(read, obs: Observation, now: datetime, gates, gate_findings, restarts, verdict_finding, verdict_error, fired) -> Report:
    restart_report, restart_top = restarts
    job = obs.job
    if verdict_finding is None:
        verdict = "ERROR"
        next_action = "Diagnose manually; rlhealth could not reach a verdict."
        flip = "A successful rlhealth run on this evidence."
    else:
        verdict = VERDICT_NAMES[verdict_finding.status]
    # the deciding findings
    ordered = sorted((f for g in GATES for f in gate_findings[g]), key=lambda f: (_STATUS_RANK[f.status], f.order, f.rule))
    if verdict == "KILL":
        pool = [f for f in ordered if f.status == "FAIL" and not f.stall]
        if not pool and restart_top is not None and restart_top.status == "FAIL":
            pool = [restart_top]
    elif verdict == "ERROR":
        pool = [f for f in ordered if f.status in ("FAIL", "ERROR")]
    else:
        pool = ordered
    top = pool[0] if pool else (ordered[0] if ordered else None)
    job_id = str(job.get("job_id"))
    if verdict_finding is not None:
        next_action = verdict_finding.next_action or (top.next_action if top and top.next_action else "")
        flip = verdict_finding.flip_signal or (top.flip_signal if top and top.flip_signal else "")
        if verdict == "KILL":
            lead = top.next_action if top and top.next_action else (restart_top.next_action if restart_top else "")
            next_action = f"Recommend KILL of {job_id} to the supervisor (rlhealth never kills). {lead}".strip()
            flip = (top.flip_signal if top and top.flip_signal else flip) or "Evidence that the failure was transient."
        elif verdict == "ERROR" and not verdict_finding.next_action:
            next_action = top.next_action if top and top.next_action else "Obtain the missing evidence and diagnose again."
            flip = top.flip_signal if top and top.flip_signal else "The missing evidence obtained."
        elif verdict == "NO-KILL" and not job.get("terminal"):
            signals = [gate_findings[g][0].flip_signal for g in GATES if gate_findings[g][0].flip_signal]
            flip = " / ".join(dict.fromkeys(signals)) or flip
    if verdict_error:
        next_action = f"{next_action} (verdict engine: {verdict_error})".strip()
    handoff = None
    if verdict == "KILL":
        src = next((f for f in pool if f.handoff), None) or (restart_top if restart_top and restart_top.handoff else None)
        if src is not None and src.handoff:
            quoted = [e for e in src.evidence if e.source not in ("manifest.json",) and not e.source.endswith("capture.json")]
            handoff = {"evidence": [e.model_dump() for e in (quoted or list(src.evidence))[:3]], **src.handoff}
    reasoning = _reasoning(verdict, gates, gate_findings, restart_report, obs, top)
    terminal = bool(job.get("terminal"))
    return Report(job=JobRef(id=job_id, cluster=str(job.get("cluster")), backend=str(job.get("backend"))),
                  evidence_dir=str(read.root), captured_at=iso(read.newest_evidence), evaluated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  verdict=verdict, confidence=_confidence(verdict, gates, gate_findings, restart_report, obs),
                  mode=str(job.get("mode")), mode_source=str(job.get("mode_source") or ""), terminal=terminal, restarts=restart_report, gates=gates,
                  duty_cycle=obs.duty_cycle if job.get("mode") == "agentic" else None,
                  reasoning=reasoning, next_action=next_action, flip_signal=flip, handoff=handoff,
                  fired_rules=sorted(fired, key=lambda f: (f["rule"], f["facts"])),
                  problems=[{"source": p.source, "reason": p.reason} for p in read.problems],
                  metric_window=obs.metric_window, phase_table=obs.phase_table, first_error=obs.first_error)


def _reasoning(verdict, gates, gate_findings, restarts: RestartsReport, obs: Observation, top) -> str:
    job = obs.job
    parts = []
    if job.get("terminal"):
        parts.append(f"The job is terminal ({job.get('state')} from {job.get('state_source')}), so there is nothing to kill.")
        if obs.first_error is not None:
            parts.append(f"First causal error (earliest by time, not the loudest): {obs.first_error.source}:"
                         f"{obs.first_error.line}: {obs.first_error.text} .")
        if restarts.same_failure:
            parts.append("Every failed attempt hit the same first error: deterministic, fix before relaunch.")
        elif restarts.burned:
            parts.append(f"Restarts: {restarts.finding}.")
        return " ".join(parts)
    if verdict == "KILL":
        fails = [f for g in GATES for f in gate_findings[g] if f.status == "FAIL" and not f.stall]
        for f in fails[:3]:
            parts.append(f"{f.gate.upper()} FAIL: {f.finding}.")
        if restarts.same_failure:
            parts.append(f"RESTARTS: {restarts.finding}.")
        if obs.first_error is not None and not any(obs.first_error in f.evidence for f in fails):
            parts.append(f"First causal error: {obs.first_error.source}:{obs.first_error.line}: {obs.first_error.text} .")
        parts.append("No transient or benign explanation applies.")
    elif verdict == "ERROR":
        for g in GATES:
            if gates[g].status in ("ERROR", "FAIL"):
                parts.append(f"{g.upper()} {gates[g].status}: {gates[g].finding}.")
        if any(f.stall for g in GATES for f in gate_findings[g] if f.status == "FAIL"):
            parts.append("A stall without a hard-failure signature may only be a KILL when live evidence captured "
                         "while the job exists backs it; missing evidence is not a conservative NO-KILL.")
    else:
        for g in GATES:
            parts.append(f"{g.upper()} {gates[g].status}: {gates[g].finding}.")
    return " ".join(parts)
