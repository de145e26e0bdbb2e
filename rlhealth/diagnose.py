"""One diagnosis: bundle -> measurements -> rule base (forward chaining) -> Report.

Python orchestrates and renders; every judgement (gate statuses, the verdict, its confidence,
next action and flip signal) is a fact the rule base derived. ``diagnose`` never raises for bad
evidence: unreadable, missing, stale or contradictory evidence ends as gate ERRORs through the
rules; an engine failure becomes an ERROR verdict with the reason.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from rlhealth.catalog import Catalog, load_catalog
from rlhealth.derivation import Derivation
from rlhealth.engine import EngineError, EngineResult, run_rules
from rlhealth.facts import GATES, Derived, Evidence
from rlhealth.observers import Observation, observe
from rlhealth.probes.bundle import read_bundle
from rlhealth.probes.parse.timestamps import iso
from rlhealth.report import AttemptReport, GateReport, JobRef, Report, RestartsReport

_DISPLAY_RANK = {"FAIL": 0, "ERROR": 1, "PASS": 2}


def diagnose(bundle: Path, *, now: datetime, max_age_s: float = 1800.0, mode_override: str | None = None,
             capture: str | None = None, given=None, with_plots: bool = False, early_trials=None,
             coherence_apart=None) -> Report:
    """``given``: a ``rlhealth.given.Given`` (dispatcher inputs); ``with_plots``: collect HTML plot
    series; ``early_trials``: a ``probes.parse.trials.EarlyTrials`` the caller started (and discards);
    ``coherence_apart``: how the coherence sample may be measured in another process
    (``rlhealth.coherence.measuring``), for a process that diagnoses once."""
    catalog = load_catalog()
    read = read_bundle(Path(bundle), catalog, capture_stamp=capture, now_epoch=now.timestamp(),
                       early_trials=early_trials, when_scanned=getattr(coherence_apart, "begin", None))
    if isinstance(given, dict):
        from rlhealth.given import Given
        given = Given.model_validate(given)
    obs = observe(read, catalog, now=now.timestamp(), max_age_s=max_age_s, mode_override=mode_override, given=given,
                  coherence_apart=coherence_apart)
    try:
        result = run_rules(catalog.rules, obs.facts, catalog.thresholds, catalog.sets)
        report = _report(obs, now, catalog, result)
    except EngineError as exc:
        result, report = None, _engine_failure_report(obs, now, str(exc))
    if given is not None and given.focus and result is not None:
        report = report.model_copy(update={"reasoning": report.reasoning + focus_answers(given.focus, report.gates)})
    from rlhealth.next_action import complete_report
    return complete_report(report, read=read, obs=obs, result=result, given=given, with_plots=with_plots)


def focus_answers(focus: tuple[str, ...], gates: dict[str, GateReport]) -> str:
    """One sentence per dispatcher focus item: the gates whose evidence speaks to it (rules/focus.yaml)
    with their status and finding; an item no topic matches is answered with every gate."""
    import re
    from rlhealth.catalog import load_focus_topics
    parts = []
    for item in focus:
        topic = next((t for t in load_focus_topics() if re.search(t["pattern"], item, re.I)), None)
        names = [g for g in (topic["gates"] if topic else GATES) if g in gates]
        about = f" ({topic['name']})" if topic else " (no topic in rules/focus.yaml matches it: every gate)"
        evidence = "; ".join(f"{g.upper()} {gates[g].status}: {gates[g].finding}" for g in names)
        parts.append(f" Focus {item!r}{about}: {evidence}.")
    return "".join(parts)


def _by_kind(result: EngineResult, kind: str) -> list[Derived]:
    return [d for d in result.derived if d.kind == kind]


def _deciding(facts: list[Derived], result: EngineResult) -> Derived | None:
    """Among equally ranked decisions (a tie in `order`), the first by rule and matched fact ids."""
    if not facts:
        return None
    derived = {d.fact_id: d for d in result.derived}

    def matched(finding_id) -> tuple[str, ...]:
        d = derived.get(str(finding_id))
        return tuple(sorted(d.derived_from)) if d is not None else (str(finding_id),)
    return min(facts, key=lambda d: (d.fields.get("order", 0), str(d.fields.get("rule_of_finding") or d.rule),
                                     matched(d.fields.get("finding_id") or d.fields.get("because"))))


def _agreed(facts: list[Derived], key: str) -> str:
    values = sorted({str(d.fields.get(key)) for d in facts})
    if len(values) != 1:
        raise EngineError(f"the rule base reached {len(values)} values for {key}: {values or 'none'}")
    return values[0]


def _report(obs: Observation, now: datetime, catalog: Catalog, result: EngineResult) -> Report:
    derivation = Derivation(obs.facts, result, catalog)
    verdict_facts = _by_kind(result, "verdict")
    verdict = _agreed(verdict_facts, "verdict")
    confidence = _agreed(_by_kind(result, "confidence"), "confidence")
    decided = _deciding(verdict_facts, result)
    gate_facts = _by_kind(result, "gate")
    standing = [d for d in result.derived if d.kind == "conclusion" and d.fields.get("name") == "finding_stands"]
    because = str(decided.fields.get("because")) if decided is not None and decided.fields.get("because") else None
    gates = {gate: _gate_report(gate, gate_facts, standing, derivation, result, because) for gate in GATES}
    restarts_gate = _deciding([g for g in gate_facts if g.fields.get("gate") == "restarts"], result)
    burned_fact = next((d for d in result.derived if d.fields.get("name") == "restarts_burned"), None)
    burned = burned_fact.fields.get("burned") if burned_fact else 0
    remaining = burned_fact.fields.get("remaining") if burned_fact else None
    same_failure = any(d.fields.get("name") == "same_failure" for d in result.derived)
    restarts = RestartsReport(burned=int(burned or 0), max_retries=obs.max_retries,
                              remaining=int(remaining) if isinstance(remaining, (int, float)) else None, same_failure=same_failure,
                              preemptions=next((f.preemption_count for f in obs.facts if f.kind == "restarts"), 0),
                              attempts=[AttemptReport(**a) for a in obs.attempts],
                              finding=str(restarts_gate.fields.get("finding")) if restarts_gate else "restarts not evaluated",
                              evidence=derivation.quoted(restarts_gate.fields.get("finding_id")) if restarts_gate else [])
    terminal = any(d.fields.get("name") == "job_terminal" for d in result.derived)
    handoff = _handoff(verdict, decided, standing, restarts_gate, result, derivation) if verdict == "KILL" else None
    return Report(job=_job_ref(obs), identity=_identity(obs, result), evidence_dir=str(obs.read.root), captured_at=iso(obs.read.newest_evidence),
                  evaluated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), verdict=verdict, confidence=confidence,
                  mode=str(obs.job.get("mode") or "unknown"), mode_source=str(obs.job.get("mode_source") or ""),
                  terminal=terminal, restarts=restarts, gates=gates,
                  duty_cycle=obs.duty_cycle if obs.job.get("mode") == "agentic" else None,
                  reasoning=_reasoning(verdict, terminal, gates, restarts, obs, decided, standing)
                  + "".join(f" {d.statement}" for d in result.derived if catalog.rule(d.rule).reason),
                  next_action=str(decided.fields.get("next_action") or ""),
                  flip_signal=str(decided.fields.get("flip_signal") or ""), handoff=handoff,
                  fired_rules=result.fired,
                  problems=[{"source": p.source, "reason": p.reason} for p in obs.read.problems],
                  metric_window=obs.metric_window, phase_table=obs.phase_table, first_error=obs.first_error,
                  behavioral_break=_behavioral_break(result),
                  derivation=derivation.nodes(), why=derivation.why(decided.fact_id))


def _identity(obs: Observation, result: EngineResult | None) -> dict | None:
    """The job's identity as observed, with the statements of the rules that found a given input
    contradicting the evidence (``given_contradicts_evidence`` conclusions)."""
    if obs.identity is None:
        return None
    conflicts = sorted({d.statement for d in (result.derived if result is not None else [])
                        if d.kind == "conclusion" and d.fields.get("name") == "given_contradicts_evidence"})
    return {**obs.identity, "conflicts": conflicts}


def _behavioral_break(result: EngineResult) -> dict | None:
    """The earliest behavioral break the rules placed (a ``behavioral_break`` conclusion)."""
    breaks = [d for d in result.derived if d.kind == "conclusion" and d.fields.get("name") == "behavioral_break"
              and isinstance(d.fields.get("step"), int)]
    first = min(breaks, key=lambda d: (d.fields["step"], d.rule), default=None)
    if first is None:
        return None
    return {"kind": first.fields.get("kind"), "step": first.fields["step"], "evidence": first.statement}


def _gate_report(gate: str, gate_facts: list[Derived], standing: list[Derived], derivation: Derivation,
                 result: EngineResult, because: str | None = None) -> GateReport:
    mine = [g for g in gate_facts if g.fields.get("gate") == gate]
    decided = _deciding(mine, result)
    if decided is None:
        raise EngineError(f"the rule base decided no status for gate {gate}")
    # the gate line shows the finding that decided the verdict, when it is one of this gate's
    deciding = [g for g in mine if because is not None and str(g.fields.get("finding_id")) == because
                and g.fields.get("status") == decided.fields.get("status")]
    decided = _deciding(deciding, result) or decided
    mine = sorted((s for s in standing if s.fields.get("gate") == gate),
                  key=lambda s: (_DISPLAY_RANK[str(s.fields["status"])], s.fields.get("order", 0), str(s.fields.get("rule_of_finding"))))
    return GateReport(status=decided.fields["status"], finding=str(decided.fields.get("finding")),
                      evidence=derivation.quoted(decided.fields.get("finding_id")),
                      findings=[{"rule": s.fields.get("rule_of_finding"), "status": s.fields.get("status"),
                                 "finding": s.fields.get("finding")} for s in mine])


def _handoff(verdict, decided, standing, restarts_gate, result: EngineResult, derivation: Derivation):
    """The handoff of the finding that decided the KILL, else of the next hard FAIL that has one."""
    candidates = [str(decided.fields.get("because"))]
    hard = sorted((s for s in standing if s.fields.get("status") == "FAIL" and not s.fields.get("stall")),
                  key=lambda s: (s.fields.get("order", 0), str(s.fields.get("rule_of_finding"))))
    candidates += [str(s.fields.get("finding_id")) for s in hard]
    if restarts_gate is not None:
        candidates.append(str(restarts_gate.fields.get("finding_id")))
    for finding_id in candidates:
        if finding_id in result.handoffs:
            quoted = [e for e in derivation.quoted(finding_id)
                      if e.source != "manifest.json" and not e.source.endswith("capture.json")]
            return {"evidence": [e.model_dump() for e in (quoted or derivation.quoted(finding_id))[:3]],
                    **result.handoffs[finding_id]}
    return None


def _job_ref(obs: Observation) -> JobRef:
    return JobRef(id=str(obs.job.get("job_id")), cluster=str(obs.job.get("cluster")), backend=str(obs.job.get("backend")))


def _reasoning(verdict: str, terminal: bool, gates: dict[str, GateReport], restarts: RestartsReport,
               obs: Observation, decided: Derived, standing: list[Derived]) -> str:
    parts = []
    first = obs.first_error
    if terminal:
        parts.append(f"The job is terminal ({obs.job.get('state')} from {obs.job.get('state_source')}), so there is nothing to kill.")
        if first is not None:
            parts.append(f"First causal error (earliest by time, not the loudest): {first.source}:{first.line}: {first.text} .")
        if restarts.same_failure:
            parts.append("Every failed attempt hit the same first error: deterministic, fix before relaunch.")
        elif restarts.burned:
            parts.append(f"Restarts: {restarts.finding}.")
        return " ".join(parts)
    if verdict == "KILL":
        hard = sorted((s for s in standing if s.fields.get("status") == "FAIL" and not s.fields.get("stall")
                       and s.fields.get("gate") in GATES),
                      key=lambda s: (GATES.index(s.fields["gate"]), s.fields.get("order", 0), str(s.fields.get("rule_of_finding"))))
        for s in hard[:3]:
            parts.append(f"{str(s.fields['gate']).upper()} FAIL: {s.fields.get('finding')}.")
        if restarts.same_failure:
            parts.append(f"RESTARTS: {restarts.finding}.")
        quoted = [e for g in GATES if gates[g].status == "FAIL" for e in gates[g].evidence]
        if first is not None and first not in quoted:
            parts.append(f"First causal error: {first.source}:{first.line}: {first.text} .")
        parts.append("No transient or benign explanation applies.")
    elif verdict == "ERROR":
        for g in GATES:
            if gates[g].status in ("ERROR", "FAIL"):
                parts.append(f"{g.upper()} {gates[g].status}: {gates[g].finding}.")
    else:
        for g in GATES:
            parts.append(f"{g.upper()} {gates[g].status}: {gates[g].finding}.")
    return " ".join(parts)


def _engine_failure_report(obs: Observation, now: datetime, reason: str) -> Report:
    finding = f"rule engine failed: {reason}"
    gates = {g: GateReport(status="ERROR", finding=finding, findings=[{"rule": None, "status": "ERROR", "finding": finding}])
             for g in GATES}
    return Report(job=_job_ref(obs), identity=_identity(obs, None), evidence_dir=str(obs.read.root),
                  captured_at=iso(obs.read.newest_evidence),
                  evaluated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), verdict="ERROR", confidence="low",
                  mode=str(obs.job.get("mode") or "unknown"), mode_source=str(obs.job.get("mode_source") or ""),
                  terminal=False, restarts=RestartsReport(finding="not evaluated: the rule engine failed",
                                                          attempts=[AttemptReport(**a) for a in obs.attempts]),
                  gates=gates, reasoning=finding,
                  next_action="Diagnose manually; rlhealth could not reach a verdict. Report the failure with the bundle.",
                  flip_signal="A successful rlhealth run on this evidence.",
                  problems=[{"source": p.source, "reason": p.reason} for p in obs.read.problems],
                  metric_window=obs.metric_window, phase_table=obs.phase_table, first_error=obs.first_error,
                  derivation=[{"id": "engine", "kind": "missing", "statement": finding, "from": [], "evidence": []}],
                  why=[finding])
