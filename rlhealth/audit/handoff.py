"""Hand-off judgements of the completion record: artifact coverage, the behavioral break, export
provenance, resume safety, and the per-field / per-step completion record (seeds 000-002).

Field statuses: ``present`` / ``absent`` / ``not applicable`` / ``could not check``, each with its
evidence. Preservation-step statuses: ``completed`` / ``not applicable`` / ``pending`` /
``failed`` / ``could not proceed``; every independent step is reported whatever the others did.
The field and step lists are data (``rules/audit.yaml``).
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from rlhealth.audit.knowledge import audit_rules
from rlhealth.audit.ranges import gaps
from rlhealth.audit.safefs import Root
from rlhealth.probes.parse import COUNT
from rlhealth.redact import redact

EVIDENCE_STEP = re.compile(rf"^step ({COUNT}):")   # the diagnosis quotes a per-step measurement as "step N: ..."


# ---------------------------------------------------------------------------------------- coverage
def artifact_coverage(step: int | None, metrics: dict, attempts: list[dict]) -> dict:
    """Metric window and chain coverage behind an artifact saved at ``step``."""
    if step is None:
        return {"metric_window": "step unknown", "chain_coverage": "step unknown", "steps_with_metrics": None, "missing_steps": None}
    logged = sorted(s for s in metrics if s <= step)
    lo = min(logged) if logged else None
    missing_count, missing = gaps(metrics, 1, step, 50)
    window = (f"steps {lo}..{logged[-1]} ({len(logged)} of {step} step(s) logged, {missing_count} missing)"
              if logged else f"no metrics for steps 1..{step}")
    legs = [x for x in attempts if x.get("max_step") is not None and (x.get("resumed_from") or 0) < step]
    covering = [x["attempt"] for x in legs]
    chain = (f"attempt(s) {covering} of {len(attempts)} produced steps up to {step}" if covering
             else f"no attempt's logs show steps up to {step}")
    return {"metric_window": window, "chain_coverage": chain, "steps_with_metrics": len(logged),
            "missing_steps": missing}


# ---------------------------------------------------------------------------------------- break
def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def diagnosis_break(path: Path) -> tuple[dict | None, str | None]:
    """(break, problem) from a ``rlhealth diagnose --format json`` report.

    A top-level ``behavioral_break`` object (``step`` and/or ``time``) is used as is. Otherwise a
    FAIL finding of a break rule (``rules/audit.yaml`` break_rules) whose gate evidence quotes
    ``step N: ...`` places the break at step N (the diagnosis quotes the first broken step)."""
    root = Root("diagnosis", path.parent)
    text = root.read_text(path, limit=64 << 20) if root.is_file(path) else None
    try:
        doc = json.loads(text) if text is not None else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return None, f"{root.display(path)}: not a diagnosis JSON report"
    src = root.display(path)
    bb = doc.get("behavioral_break")
    if isinstance(bb, dict) and (isinstance(bb.get("step"), int) or isinstance(bb.get("time"), str)):
        return {"source": f"{src} behavioral_break", "step": bb.get("step") if isinstance(bb.get("step"), int) else None,
                "time": bb.get("time") if isinstance(bb.get("time"), str) else None,
                "kind": str(bb.get("kind") or "behavioral break"), "evidence": redact(str(bb.get("evidence") or ""))[:300]}, None
    rules = set(audit_rules()["break_rules"])
    gates = doc.get("gates") if isinstance(doc.get("gates"), dict) else {}
    for gate_name in sorted(gates):
        gate = gates[gate_name]
        if not isinstance(gate, dict):
            continue
        fired = [f for f in gate.get("findings") or [] if isinstance(f, dict) and f.get("rule") in rules and f.get("status") == "FAIL"]
        if not fired:
            continue
        for ev in gate.get("evidence") or []:
            m = EVIDENCE_STEP.match(str(ev.get("text", ""))) if isinstance(ev, dict) else None
            if m:
                return {"source": f"{src} gates.{gate_name} ({fired[0]['rule']}) evidence {ev.get('source')}:{ev.get('line')}",
                        "step": int(m[1]), "time": None, "kind": fired[0]["rule"],
                        "evidence": redact(str(ev.get("text")))[:300]}, None
        return None, f"{src}: {fired[0]['rule']} fired but its evidence places no step"
    return None, None


def last_clean_checkpoint(brk: dict, candidates: list[dict], metric_ts: dict, metrics: dict, attempts: list[dict]) -> dict:
    """The last complete (valid) checkpoint whose generating rollouts predate the break.

    A checkpoint at step N was trained on the rollouts of steps 1..N: it predates a break at step
    B when N < B, and a break at time T when step N's metrics were logged at or before T."""
    bstep, btime = brk.get("step"), brk.get("time_epoch")
    rows, unknown = [], []
    for c in candidates:
        if c["kind"] != "checkpoint" or not c["valid"] or c["step"] is None:
            continue
        ok = True
        if bstep is not None and c["step"] >= bstep:
            ok = False
        if ok and btime is not None:
            ts = metric_ts.get(c["step"])
            if ts is None:
                unknown.append(c["id"])
                ok = False
            elif ts > btime:
                ok = False
        if ok:
            rows.append(c)
    if not rows:
        why = "no valid checkpoint predates the break"
        if unknown:
            why += f" (no timestamped metrics for {', '.join(unknown[:5])}: could not place them in time)"
        return {"status": "absent", "selected": None, "rationale": why}
    best = max(rows, key=lambda c: c["step"])
    cond = " and ".join(filter(None, [f"step {best['step']} < break step {bstep}" if bstep is not None else "",
                                      f"step {best['step']} logged at {_iso(metric_ts.get(best['step']))} <= break time {_iso(btime)}"
                                      if btime is not None else ""]))
    return {"status": "present", "rationale": f"last valid checkpoint whose generating rollouts predate the break: {cond}",
            "selected": {"id": best["id"], "kind": "checkpoint", "path": best["path"], "step": best["step"],
                         **artifact_coverage(best["step"], metrics, attempts)}}


# ---------------------------------------------------------------------------------------- provenance
def export_provenance(export: dict, checkpoints: dict[int, dict], latest: int | None) -> dict:
    step = export["step"]
    ck = checkpoints.get(step) if step is not None else None
    layout = re.search(r"global_step_\d+/policy$", export["path"]) is not None
    verified = [f"{k['check']}={k['status']}" for k in export["checks"]]
    return {
        "export": export["id"], "path": export["path"], "step": step,
        "source_checkpoint": ck["id"] if ck else None,
        "source_checkpoint_path": ck["path"] if ck else None,
        "source_format": ck.get("format") if ck else "could not check (no training checkpoint at this step kept)",
        "converted_by": ("the trainer's Hugging Face export (inferred from the exports/global_step_N/policy layout)" if layout
                         else "could not check (no provenance recorded beside the export)"),
        "verified_by": "rlhealth audit: " + ", ".join(verified),
        "valid": export["valid"],
        "within_latest_marker": None if latest is None or step is None else step <= latest,
    }


# ---------------------------------------------------------------------------------------- resume
def resume_assessment(budget_complete: bool, last_step, budget, latest, ck_dirs: list, candidates: list[dict],
                      saved_steps: set[int]) -> dict:
    """Can the run resume from the newest complete checkpoint? (optimizer state present, step consistent)"""
    newest = max((c for c in candidates if c["kind"] == "checkpoint" and c["valid"] and c["step"] is not None),
                 key=lambda c: c["step"], default=None)
    # resume_mode=latest loads the checkpoint the atomic marker names; its state is what matters
    loads = next((c for c in candidates if c["kind"] == "checkpoint" and latest is not None and c["step"] == latest), None) or newest
    base = {"newest_complete_checkpoint": newest["id"] if newest else None,
            "resume_checkpoint": loads["id"] if loads else None,
            "optimizer_state": loads.get("optimizer_state") if loads else "could not check",
            "trainer_state": loads.get("trainer_state") if loads else "could not check",
            "step_consistent": None}
    if loads is not None:
        base["step_consistent"] = (loads["valid"] and latest is not None and loads["step"] == latest
                                   and (not saved_steps or loads["step"] in saved_steps))
    if budget_complete:
        return {**base, "status": "not needed", "detail": f"step budget complete ({last_step}/{budget})"}
    if latest is None:
        return {**base, "status": "unknown" if not ck_dirs else "unsafe",
                "detail": "no latest_ckpt_global_step.txt: a resume would start from step 0" if not ck_dirs
                else "checkpoints exist but the atomic latest marker is missing"}
    lc = next((c for c in candidates if c["kind"] == "checkpoint" and c["step"] == latest), None)
    if lc is None:
        return {**base, "status": "unsafe", "detail": f"latest marker {latest} has no global_step_{latest}/"}
    if not lc["valid"]:
        return {**base, "status": "unsafe", "detail": f"resume_mode=latest would load the invalid checkpoint {lc['path']}"}
    if lc.get("optimizer_state") == "absent":
        return {**base, "status": "unsafe", "detail": f"checkpoint {lc['id']} has no (complete) optimizer state: a resume would restart the optimizer"}
    if lc.get("trainer_state") == "absent":
        return {**base, "status": "unsafe", "detail": f"checkpoint {lc['id']} lacks trainer_state.pt/data.pt: dataloader and step state would be lost"}
    detail = f"resume_mode=latest resumes from the valid checkpoint at step {latest}"
    if lc.get("optimizer_state") == "could not check":
        detail += " (optimizer state could not be checked)"
    if saved_steps and latest not in saved_steps:
        detail += f"; no 'Successfully saved checkpoint for global_step_{latest}' line in the logs"
    if budget is not None:
        detail += f"; {budget - latest} step(s) of the budget remain"
    return {**base, "status": "safe", "detail": detail}


# ---------------------------------------------------------------------------------------- record
def _f(name, status, value, evidence):
    return {"field": name, "status": status, "value": value, "evidence": redact(evidence) if isinstance(evidence, str) else evidence}


def completion_fields(rec: dict, campaign, trace_rebuild: dict | None, steps: list[dict]) -> list[dict]:
    mode = rec["mode"]["value"]
    wanted = audit_rules()["completion_fields"]["agentic" if mode == "agentic" else "standard"]
    ts, sel, pub, brk = rec["terminal_state"], rec["selection"], rec["publication"], rec["behavioral_break"]
    out = {}
    out["terminal_state"] = (_f("terminal_state", "present", ts["outcome"], f"controller {ts['controller_state']} ({ts['controller_source']}); "
                                f"step {ts['last_step']}/{ts['budget']}") if ts["terminal"] else
                             _f("terminal_state", "could not check" if ts["terminal"] is None else "absent", ts["outcome"],
                                "no terminal controller state" if ts["terminal"] is None else f"controller state {ts['controller_state']}: not terminal"))
    rv = rec["source_revision"]
    out["source_revision"] = _f("source_revision", "present" if rv["value"] else "absent", rv["value"],
                                "; ".join(f"{x['source']}" for x in rv["sources"][:3]) or "no --skyrl-ref and no 'MarinSkyRL now at' line")
    rc = rec["resolved_configuration"]
    out["resolved_configuration"] = _f("resolved_configuration", "present" if rc["source"] or rc["entrypoint"] else "absent",
                                       rc["source"] or rc["entrypoint"], f"{len(rc['settings'])} recognised setting(s)")
    out["preserved_locations"] = _f("preserved_locations", "present", [p["path"] for p in rec["preserved_locations"]],
                                    ", ".join(p["what"] for p in rec["preserved_locations"]))
    valid = [c for c in rec["candidates"] if c["valid"]]
    out["validation_results"] = _f("validation_results", "present" if rec["candidates"] else "absent",
                                   f"{len(valid)} of {len(rec['candidates'])} candidate(s) valid",
                                   ", ".join(c["id"] for c in rec["candidates"][:12]) or "no checkpoint or export found")
    chosen = sel["selected"]
    sel_status = "present" if chosen else "absent"
    sel_ev = (f"{sel['rationale']}; metric window {chosen['metric_window']}; chain coverage {chosen['chain_coverage']}" if chosen
              else f"{sel['status']}: {sel['rationale']}; valid candidates: {', '.join(sel['valid_candidates']) or 'none'}")
    if brk["status"] == "placed":
        lc = brk["last_clean_checkpoint"]
        sel_ev += (f"; behavioral break at {brk['step'] if brk['step'] is not None else brk['time']} ({brk['source']}): last pre-break checkpoint "
                   + (lc["selected"]["id"] if lc["selected"] else f"none ({lc['rationale']})"))
    out["selected_artifact"] = _f("selected_artifact", sel_status, chosen["id"] if chosen else None, sel_ev)
    out["selected_checkpoint"] = _f("selected_checkpoint", sel_status, chosen["id"] if chosen else None, sel_ev)
    fc = rec["first_failure_cause"]
    failed = ts["outcome"] not in ("succeeded",) and not ts["budget_complete"]
    out["first_failure_cause"] = (_f("first_failure_cause", "present", fc["text"], f"attempt {fc['attempt']} {fc['source']}:{fc['line']}"
                                     + (f" (signature {fc['signature']})" if fc.get("signature") else "")) if fc else
                                  _f("first_failure_cause", "absent" if failed else "not applicable", None,
                                     "run ended without success and no causal error line was found" if failed else "the run completed"))
    rs = rec["resume_safety"]
    out["resume_safety"] = _f("resume_safety", "present", rs["status"], rs["detail"])
    prov = rec["export_provenance"]
    if prov:
        complete = prov["source_checkpoint"] and "could not check" not in prov["converted_by"]
        out["export_provenance"] = _f("export_provenance", "present" if complete else "could not check", prov["export"],
                                      f"from {prov['source_checkpoint'] or 'no kept checkpoint'} ({prov['source_format']}); converted by {prov['converted_by']}; "
                                      f"verified by {prov['verified_by']}")
    else:
        out["export_provenance"] = _f("export_provenance", "absent", None, "no export for the selected (or any) step")
    # destinations: from the campaign record only
    for fld, dest, kind in (("published_model_destination", campaign.model_repo, "model"), ("trace_destination", campaign.trace_dataset, "dataset")):
        if dest:
            url = f"https://huggingface.co/{'datasets/' if kind == 'dataset' else ''}{dest}"
            ev = f"named by {campaign.source}"
            step = next(s for s in steps if s["step"] == ("publish_model" if kind == "model" else "publish_traces"))
            ev += f"; {step['step']}: {step['status']} ({step['detail']})"
            out[fld] = _f(fld, "present", url, ev)
        else:
            out[fld] = _f(fld, "could not check", None, "no campaign record names it (--campaign); destinations are never inferred"
                          if campaign.source is None else f"{campaign.source} names no {kind} destination")
    if not campaign.registration_authorized:
        out["registration_result"] = _f("registration_result", "not applicable", None,
                                        "the campaign record does not authorize registration" if campaign.source else "no campaign record authorizes registration")
    elif campaign.registration_result:
        out["registration_result"] = _f("registration_result", "present", campaign.registration_result, f"recorded in {campaign.source}")
    else:
        out["registration_result"] = _f("registration_result", "absent", None, f"registration authorized by {campaign.source} but no result recorded")
    m = rec["metrics"]
    logs_art = next((x for x in (pub or {}).get("artifacts", []) if x["artifact"] == "training_logs"), None)
    if m:
        ev = (f"steps {m['first_step']}..{m['last_step']} ({m['steps']} step(s), {m['missing_count']} missing) from "
              f"{', '.join(f'{k}: {v}' for k, v in sorted(m['serializations'].items()))}")
        ev += f"; published training_logs/: {logs_art['status']}" if logs_art else "; published training_logs/ not verified (no --published-dir)"
        out["preserved_metrics"] = _f("preserved_metrics", "present" if (logs_art or {}).get("status") == "present" else "absent"
                                      if logs_art else "could not check", f"steps {m['first_step']}..{m['last_step']}", ev)
    else:
        out["preserved_metrics"] = _f("preserved_metrics", "absent", None, "no training metrics parsed in any serialization")
    ver = []
    if pub:
        ver.append(f"fresh download {pub['path']}: {pub['message']}; secret scan {pub['secret_scan']['status']}")
    if trace_rebuild and trace_rebuild.get("checks"):
        bad = [c for c in trace_rebuild["checks"] if c["status"] != "pass"]
        ver.append(f"trace rebuild {trace_rebuild['root']}: " + ("all checks pass" if not bad else
                   "; ".join(f"{c['check']} {c['status']}" for c in bad)))
    passed = bool(pub) and pub["complete"] and pub["secret_scan"]["status"] == "clean" and not [
        p for p in rec["problems"] if p["severity"] == "blocking"]
    out["verification_evidence"] = _f("verification_evidence", "present" if ver else "could not check",
                                      ("passed" if passed else "failed") if ver else None,
                                      "; ".join(ver) or "no --published-dir download or --trace-root rebuild to verify")
    if not campaign.reclaim_authorized:
        out["storage_reclaimed"] = _f("storage_reclaimed", "not applicable", None,
                                      "no separate reclaim authority in the campaign record (rlhealth reports reclaim, never performs it)")
    else:
        out["storage_reclaimed"] = _f("storage_reclaimed", "present" if campaign.reclaimed else "absent", campaign.reclaimed,
                                      (f"reported by {campaign.source}: {len(campaign.reclaimed)} location(s); not performed by rlhealth" if campaign.reclaimed
                                       else f"reclaim authorized by {campaign.source}; nothing reported reclaimed"))
    rw = rec["remaining_work"]
    out["remaining_work"] = _f("remaining_work", "present", rw, f"{len(rw)} item(s)" if rw else "none")
    return [out[k] for k in wanted]


def preservation_steps(rec: dict, campaign, trace_rebuild: dict | None) -> list[dict]:
    """Each independent preservation step of the agentic runbook with its own status."""
    inv = {i["artifact"]: i["status"] for i in rec["inventory"]}
    sel, pub, prov = rec["selection"], rec["publication"], rec["export_provenance"]
    out = {}

    def step(name, status, detail):
        out[name] = {"step": name, "status": status, "detail": redact(detail)}

    chain_ok = inv.get("attempt logs") == "present" and inv.get("training metrics") == "present" and inv.get("controller state") == "present"
    step("capture_chain", "completed" if chain_ok else "could not proceed",
         "attempt logs, metrics and controller state captured" if chain_ok else
         "missing: " + ", ".join(k for k in ("attempt logs", "training metrics", "controller state") if inv.get(k) != "present"))
    if sel["selected"]:
        step("select_checkpoint", "completed", f"{sel['selected']['id']} by {sel['policy']}")
    elif sel["valid_candidates"]:
        step("select_checkpoint", "pending", "no declared selection rule: valid candidates listed, choice left to the operator")
    else:
        step("select_checkpoint", "could not proceed", "no valid checkpoint or export")
    if prov and prov["valid"]:
        step("export_model", "completed", f"{prov['export']} verified; converted from {prov['source_checkpoint'] or 'no kept checkpoint'} "
             f"({prov['source_format']})")
    elif prov:
        step("export_model", "failed", f"{prov['export']} failed validation")
    else:
        step("export_model", "pending", "no export for the selected step")
    if not campaign.model_repo:
        step("publish_model", "not applicable" if campaign.source else "could not proceed",
             "the campaign record names no model destination" if campaign.source else "no campaign record: publication destination unknown")
    elif pub is None:
        step("publish_model", "pending", f"{campaign.model_repo}: not verified (download it fresh and re-run with --published-dir)")
    else:
        ok = pub["complete"] and pub["secret_scan"]["status"] == "clean" and not any(c["status"] == "fail" for c in pub["weight_checks"])
        step("publish_model", "completed" if ok else "failed", f"{campaign.model_repo}: {pub['message']}; secret scan {pub['secret_scan']['status']}")
    if trace_rebuild is None or not trace_rebuild.get("checks"):
        step("publish_traces", "pending" if campaign.trace_dataset else ("not applicable" if campaign.source else "could not proceed"),
             "no --trace-root: the durable trace rebuild was not checked" if campaign.trace_dataset or not campaign.source
             else "the campaign record names no trace dataset")
    else:
        bad = [c for c in trace_rebuild["checks"] if c["status"] != "pass"]
        dest = campaign.trace_dataset or "no destination named"
        step("publish_traces", "completed" if not bad and campaign.trace_dataset else ("failed" if bad else "pending"),
             f"{dest}: " + ("rebuild checks pass" if not bad else "; ".join(f"{c['check']} {c['status']}: {c['detail']}" for c in bad)[:600]))
    if not campaign.registration_authorized:
        step("register", "not applicable", "registration not authorized by the campaign record")
    else:
        step("register", "completed" if campaign.registration_result else "pending",
             campaign.registration_result or "authorized; no result recorded")
    if not campaign.reclaim_authorized:
        step("reclaim_storage", "not applicable", "no separate reclaim authority (never performed by rlhealth)")
    else:
        step("reclaim_storage", "completed" if campaign.reclaimed else "pending",
             f"reported reclaimed: {', '.join(campaign.reclaimed)}" if campaign.reclaimed else "authorized; retain staging until destinations verify")
    return [out[k] for k in audit_rules()["preservation_steps"]]
