"""Build the ``rlhealth.audit/v1`` completion record: one function per section, each returning its
model (``rlhealth.audit.record``), assembled by ``build_record`` into an ``AuditRecord`` whose dict
the command prints."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rlhealth.probes.parse import COUNT
from rlhealth.probes.parse.timestamps import parse_iso
import rlhealth.audit.config as C
import rlhealth.audit.logs as L
import rlhealth.audit.policy as P
import rlhealth.audit.record as R
from rlhealth.audit.campaign import Campaign
from rlhealth.audit.distcp import validate_distcp
import rlhealth.audit.handoff as H
import rlhealth.audit.baddata as baddata
from rlhealth.audit.baddata import reward_keys
from rlhealth.audit.traces import check_trace_root, monitor_mirror
from rlhealth.audit.ranges import gaps as rank_gaps, is_full_range
from rlhealth.audit.publication import find_trace_manifest, trace_manifest_check, verify_published
from rlhealth.audit.safefs import Root
from rlhealth.audit.weights import config_and_tokenizer, validate_weights
from rlhealth.redact import redact

SCHEMA = R.SCHEMA
RUNNING = {"pending", "building", "running", "unspecified"}
TERMINAL = {"succeeded", "failed", "killed", "worker_failed", "unschedulable", "absent"}
STEP_DIR = re.compile(r"^global_step_(\d+)$")
RANK_FILE = re.compile(r"^(model|optim|extra_state)_world_size_(\d+)_rank_(\d+)\.pt$")
STAMP = re.compile(r"^\d{8}T\d{6}Z$")
LOG_SUFFIXES = (".out", ".log", ".err")


def _parse_time(v) -> datetime | None:
    """An ISO-8601 time through the one time parser (``probes.parse.timestamps.parse_iso``; naive = UTC)."""
    epoch = parse_iso(v) if isinstance(v, str) else None
    return datetime.fromtimestamp(epoch, tz=timezone.utc) if epoch is not None else None


class Audit:
    def __init__(self, run: Path, bundle: Path | None, export_dir: Path | None, published: Path | None,
                 policy: P.Policy | None, now: datetime, trace_root: Path | None = None):
        self.run = Root("run", run)
        self.trace_root = Root("traces", trace_root) if trace_root else None
        self.bundle = Root("bundle", bundle) if bundle else None
        self.export = Root("export", export_dir) if export_dir else None
        self.published = Root("published", published) if published else None
        self.policy = policy
        self.now = now
        self.problems: list[dict] = []

    def problem(self, severity: str, code: str, message: str) -> None:
        self.problems.append({"severity": severity, "code": code, "message": redact(message)})

    # ------------------------------------------------------------------ controller state
    def controller(self) -> tuple[dict | None, dict, Path | None]:
        """(manifest, controller-state dict, newest capture dir)."""
        manifest, cap_dir, state = None, None, {"state": None, "source": None, "attempts": [], "failure_count": None,
                                                  "max_retries": None}
        if self.bundle is None:
            return None, state, None
        b = self.bundle
        mp = b.path / "manifest.json"
        if b.is_file(mp):
            text = b.read_text(mp)
            try:
                manifest = json.loads(text) if text is not None else None
            except ValueError:
                manifest = None
            if not isinstance(manifest, dict):
                self.problem("warning", "manifest-unreadable", "bundle manifest.json is not a JSON object")
                manifest = None
        job = manifest.get("job") if manifest and isinstance(manifest.get("job"), dict) else {}
        if isinstance(job.get("state"), str):
            state.update(state=job["state"].strip().lower(), source="bundle:manifest.json job.state",
                         at=manifest.get("synced_at"))
        caps = [p for p in b.listdir(b.path / "rlhealth" / "captures") if STAMP.match(p.name) and b.is_dir(p)]
        if caps:
            cap_dir = caps[-1]
            sp = cap_dir / "state.json"
            text = b.read_text(sp) if b.is_file(sp) else None
            try:
                doc = json.loads(text) if text else None
            except ValueError:
                doc = None
                self.problem("warning", "capture-state-unreadable", f"{b.display(sp)} is not JSON")
            if isinstance(doc, dict) and isinstance(doc.get("state"), str):
                cap_at = None
                cj = cap_dir / "capture.json"
                ctext = b.read_text(cj) if b.is_file(cj) else None
                try:
                    cap_at = (json.loads(ctext) or {}).get("captured_at") if ctext else None
                except (ValueError, AttributeError):
                    cap_at = None
                m_at, c_at = _parse_time(state.get("at")), _parse_time(cap_at)
                if state["state"] is None or m_at is None or c_at is None or c_at >= m_at:
                    state.update(state=doc["state"].strip().lower(), source=b.display(sp), at=cap_at)
                state["attempts"] = doc.get("attempts") if isinstance(doc.get("attempts"), list) else []
                state["failure_count"] = doc.get("failure_count")
                state["max_retries"] = doc.get("max_retries")
        return manifest, state, cap_dir

    # ------------------------------------------------------------------ logs
    def log_files(self) -> list[tuple[Root, Path, bool]]:
        out: list[tuple[Root, Path, bool]] = []
        finelogs = []
        if self.bundle is not None and self.bundle.is_file(self.bundle.path / "finelog.log"):
            finelogs.append((self.bundle, self.bundle.path / "finelog.log", True))
        if self.run.is_file(self.run.path / "finelog.log") and not finelogs:
            finelogs.append((self.run, self.run.path / "finelog.log", True))
        out += finelogs
        if not finelogs:
            chain = []
            for d, root in ((self.run.path / "logs", self.run), (self.run.path, self.run)):
                for p in root.listdir(d):
                    if p.name.endswith((".out", ".log")) and root.is_file(p):
                        chain.append((root, p, False))
            if self.bundle is not None:
                for p in self.bundle.listdir(self.bundle.path / "slurm_logs"):
                    if p.name.endswith(".out") and self.bundle.is_file(p):
                        chain.append((self.bundle, p, False))
            out += chain
        return out

    # ------------------------------------------------------------------ checkpoints and exports
    def checkpoint_root(self) -> Path | None:
        r = self.run
        for name in ("ckpts", "checkpoints", "ckpt"):
            if r.is_dir(r.path / name):
                return r.path / name
        if r.is_file(r.path / "latest_ckpt_global_step.txt"):
            return r.path
        for d in r.listdir(r.path):
            if r.is_dir(d) and r.is_file(d / "latest_ckpt_global_step.txt"):
                return d
        return None

    def export_root(self) -> tuple[Root, Path] | None:
        if self.export is not None:
            return self.export, self.export.path
        for name in ("exports", "export"):
            if self.run.is_dir(self.run.path / name):
                return self.run, self.run.path / name
        return None

    def latest_marker(self, root: Path | None) -> tuple[int | None, str]:
        if root is None:
            return None, "no checkpoint directory"
        p = root / "latest_ckpt_global_step.txt"
        if not self.run.is_file(p):
            return None, "latest_ckpt_global_step.txt absent"
        text = self.run.read_text(p, limit=4096)
        if text is None or not re.fullmatch(rf"\s*{COUNT}\s*", text):
            shown = "unreadable" if text is None else repr(text.strip()[:80])
            self.problem("blocking", "latest-marker-invalid", f"{self.run.display(p)}:1: {shown} is not an integer step")
            return None, "latest_ckpt_global_step.txt is not an integer"
        return int(text), self.run.display(p)

    def checkpoint_candidate(self, d: Path, step: int, latest: int | None, metrics: dict) -> dict:
        r = self.run
        checks = []
        pol = d / "policy"
        size = None
        optimizer, fmt = "could not check", "unknown"
        if not r.is_dir(pol):
            checks.append(_c("policy_dir", "fail", "policy/ directory absent"))
        else:
            names = [p.name for p in r.listdir(pol)]
            ranks: dict[tuple[str, int], set[int]] = {}
            for n in names:
                m = RANK_FILE.match(n)
                if m:
                    ranks.setdefault((m[1], int(m[2])), set()).add(int(m[3]))
            distcp = [n for n in names if n.endswith(".distcp")]
            if ranks:
                sizes = {w for (_, w) in ranks}
                if len(sizes) != 1:
                    checks.append(_c("rank_shards", "fail", f"rank files disagree on world size: {sorted(sizes)}"))
                else:
                    w = sizes.pop()
                    gaps = [f"{kind}: missing rank(s) {rank_gaps(got, 0, w - 1, 8)[1]}" for (kind, _), got in sorted(ranks.items())
                            if not is_full_range(got, w)]
                    if ("model", w) not in ranks:
                        gaps.append("no model_world_size_*_rank_*.pt files")
                    fc = pol / "fsdp_config.json"
                    ftxt = r.read_text(fc) if r.is_file(fc) else None
                    try:
                        fws = (json.loads(ftxt) or {}).get("world_size") if ftxt else None
                    except (ValueError, AttributeError):
                        fws = None
                    if fws is not None and fws != w:
                        gaps.append(f"fsdp_config.json world_size={fws} but rank files say {w}")
                    checks.append(_c("rank_shards", "fail" if gaps else "pass",
                                     "; ".join(gaps) if gaps else f"all {w} rank(s) present for {', '.join(sorted(k for k, _ in ranks))}"))
                    optim = ranks.get(("optim", w), set())
                    optimizer = "present" if is_full_range(optim, w) else "absent"
                    fmt = f"FSDP sharded checkpoint (world size {w}, model_world_size_{w}_rank_*.pt)"
            elif distcp:
                dc, dfacts = validate_distcp(r, pol)
                checks += dc
                optimizer = dfacts["optimizer_state"]
                fmt = f"Megatron distributed checkpoint ({dfacts['shards']} .distcp shard(s), {len(dfacts['ranks'])} rank(s))"
            elif any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names):
                wc, size = validate_weights(r, pol)
                checks += wc
                fmt = "Hugging Face safetensors"
            else:
                checks.append(_c("rank_shards", "fail", "no model weights (rank .pt, .distcp or safetensors) under policy/"))
            hf = pol / "huggingface"
            if r.is_dir(hf):
                checks += config_and_tokenizer(r, hf)
                if any(p.name.endswith(".safetensors") for p in r.listdir(hf)):
                    wc, size = validate_weights(r, hf)
                    checks += wc
            else:
                checks.append(_c("config_json", "fail", "policy/huggingface/ (config and tokenizer) absent"))
        for f in ("trainer_state.pt", "data.pt"):
            if not r.is_file(d / f):
                checks.append(_c("trainer_state", "warn", f"{f} absent (resume state incomplete)"))
        checks += self.step_checks(step, latest, metrics)
        cand = _candidate("checkpoint", r.display(d), step, checks, size)
        cand["format"] = fmt
        cand["optimizer_state"] = optimizer
        cand["trainer_state"] = "present" if all(r.is_file(d / f) for f in ("trainer_state.pt", "data.pt")) else "absent"
        return cand

    def step_checks(self, step: int | None, latest: int | None, metrics: dict) -> list[dict]:
        out = []
        if step is None:
            out.append(_c("step_consistency", "warn", "step unknown (no global_step_N in the path)"))
            return out
        if latest is None:
            out.append(_c("step_consistency", "warn", "latest_ckpt_global_step.txt unavailable; step not cross-checked"))
        elif step > latest:
            out.append(_c("step_consistency", "fail", f"step {step} exceeds latest_ckpt_global_step={latest} (in-flight or stale write)"))
        else:
            out.append(_c("step_consistency", "pass", f"step {step} <= latest_ckpt_global_step={latest}"))
        if not metrics:
            out.append(_c("metric_coverage", "warn", "no training metrics found for any step"))
        elif step in metrics:
            out.append(_c("metric_coverage", "pass", f"metrics present for step {step} (window {min(metrics)}..{max(metrics)})"))
        else:
            out.append(_c("metric_coverage", "warn", f"no metrics logged for step {step} (window {min(metrics)}..{max(metrics)})"))
        return out

    def export_candidates(self, latest: int | None, metrics: dict, ckpt_steps: set[int]) -> list[dict]:
        er = self.export_root()
        if er is None:
            return []
        root, base = er
        dirs: list[tuple[Path, int | None]] = []
        for d in root.listdir(base):
            m = STEP_DIR.match(d.name)
            if m and root.is_dir(d):
                dirs.append((d / "policy" if root.is_dir(d / "policy") else d, int(m[1])))
        if not dirs and any(p.name.endswith(".safetensors") or p.name == "model.safetensors.index.json" for p in root.listdir(base)):
            dirs.append((base, None))
        out = []
        for d, step in sorted(dirs, key=lambda x: (x[1] is None, x[1] or 0)):
            checks, size = validate_weights(root, d)
            checks += config_and_tokenizer(root, d)
            checks += self.step_checks(step, latest, metrics)
            if step is not None and ckpt_steps and step not in ckpt_steps:
                checks.append(_c("checkpoint_for_step", "warn", f"no training checkpoint global_step_{step} kept (cannot re-export)"))
            out.append(_candidate("export", root.display(d), step, checks, size))
        return out

    # ------------------------------------------------------------------ trials
    def trials(self) -> dict:
        found = []
        for root in [r for r in (self.bundle, self.run) if r is not None]:
            d = root.path / "trace_jobs"
            if root.is_dir(d):
                trial_dirs = [p for p in root.listdir(d) if root.is_dir(p)]
                results = sum(1 for t in trial_dirs if root.is_file(t / "result.json"))
                verifier = sum(1 for t in trial_dirs if root.is_dir(t / "verifier"))
                found.append({"path": root.display(d), "trials": len(trial_dirs), "results": results, "verifier": verifier})
        return {"locations": found, "trials": sum(f["trials"] for f in found),
                "results": sum(f["results"] for f in found), "verifier": sum(f["verifier"] for f in found)}


def _c(check, status, detail):
    return {"check": check, "status": status, "detail": redact(detail)}


def _candidate(kind, path, step, checks, size):
    valid = not any(c["status"] == "fail" for c in checks)
    ident = f"{kind}@{step}" if step is not None else f"{kind}@{path}"
    return {"id": ident, "kind": kind, "path": path, "step": step, "valid": valid, "checks": checks, "model_size": size}


def refuse_bad_metric_data(a: Audit, facts: L.LogFacts) -> None:
    """Malformed metric lines and non-numeric or missing rewards become problems naming file:line and value."""
    for severity, code, message in baddata.problems(facts.refused):
        a.problem(severity, code, message)


def secret_scan_problems(a: Audit, scan: dict, prefix: str, where: str) -> None:
    """A secret scan's findings (by file, line or row, shape; never the secret) and unscanned files."""
    if scan["findings"]:
        named = "; ".join(f"{f['file']}:{f['line']}" + (f" [{f['location']}]" if f.get("location") else "") + f" {f['shape']}"
                          for f in scan["findings"][:10])
        a.problem("blocking", f"{prefix}secrets-found", f"Credential-shaped text remains in {where}: "
                  f"{len(scan['findings'])} finding(s): {named}" + (" ..." if len(scan["findings"]) > 10 else ""))
    if scan["status"] == "incomplete":
        a.problem("blocking", f"{prefix}secret-scan-incomplete", "some files could not be scanned: "
                  + "; ".join(f"{s['file']} ({s['reason']})" for s in scan["skipped"] if s["reason"] != "binary")[:400])


# ====================================================================================== the record, section by section
@dataclass
class Evidence:
    """What the sections read, gathered once: the controller state, the resolved configuration and the logs."""
    a: Audit
    campaign: Campaign
    manifest: dict | None
    ctrl: dict
    cfg: C.ConfigFacts
    mode: str
    mode_reason: str
    mode_evidence: list[str]
    settings: dict
    facts: L.LogFacts

    @property
    def metrics(self) -> dict:
        return self.facts.metrics


@dataclass
class Saved:
    """The saved artifacts: the checkpoint directory, its latest marker, the global_step_N dirs, the
    validated candidates (checkpoints, then exports) as dicts for the hand-off helpers."""
    ck_root: Path | None
    latest: int | None
    latest_src: str
    ck_dirs: list[tuple[int, Path]]
    candidates: list[dict]
    exports: list[dict]

    @property
    def steps(self) -> set[int]:
        return {s for s, _ in self.ck_dirs}


def gather(a: Audit, campaign: Campaign) -> Evidence:
    for msg in campaign.problems:
        a.problem("blocking" if "selection_policy" in msg else "warning", "campaign-record", msg)
    manifest, ctrl, cap_dir = a.controller()
    cfg = C.load_config(a.run, a.bundle, manifest, cap_dir)
    for msg in cfg.problems:
        a.problem("warning", "config-unparsable", msg)
    mode, mode_reason, mode_evidence = cfg.mode()
    facts = L.scan_logs(a.log_files(), reward_keys(a.policy.params.get("metric") if a.policy else None))
    return Evidence(a, campaign, manifest, ctrl, cfg, mode, mode_reason, mode_evidence, cfg.settings(), facts)


def run_section(ev: Evidence, run: Path, bundle: Path | None, export_dir: Path | None, published: Path | None) -> R.RunSection:
    return R.RunSection(path=str(run), bundle=str(bundle) if bundle else None, export_dir=str(export_dir) if export_dir else None,
                        published_dir=str(published) if published else None,
                        job_id=(ev.manifest or {}).get("job_id") if ev.manifest else None)


def mode_section(ev: Evidence) -> R.ModeSection:
    return R.ModeSection(value=ev.mode, source=ev.cfg.source or ev.cfg.entrypoint_source, evidence=ev.mode_evidence,
                         reason=ev.mode_reason, classifier="rlhealth.mode.classify_mode")


def terminal_state_section(ev: Evidence) -> R.TerminalState:
    """The step budget (configuration, else the log's progress line) and the terminal state the controller reports."""
    a, facts, ctrl, metrics = ev.a, ev.facts, ev.ctrl, ev.metrics
    budget = ev.settings.get("max_steps") if isinstance(ev.settings.get("max_steps"), int) else None
    budget_source = "configuration max_steps" if budget is not None else None
    if facts.progress is not None:
        if budget is None:
            budget, budget_source = facts.progress[1], f"log: Training Step Progress ({facts.progress_quote['source']}:{facts.progress_quote['line']})"
        elif budget != facts.progress[1]:
            a.problem("warning", "budget-disagreement", f"configured max_steps={budget} but the log reports a budget of {facts.progress[1]}")
    last_step = max([*metrics, facts.progress[0] if facts.progress else 0]) if (metrics or facts.progress) else None
    budget_complete = budget is not None and last_step is not None and last_step >= budget
    st = ctrl["state"]
    if st in RUNNING:
        terminal, outcome = False, "not terminal"
        a.problem("blocking", "not-terminal", f"controller state is '{st}' ({ctrl['source']}); a partial shard set may be an active writer -- audit after the run ends")
    elif st in TERMINAL or (st or "").startswith("state"):
        terminal = True
        if st == "succeeded":
            outcome = "succeeded"
            if budget is not None and not budget_complete:
                a.problem("blocking", "succeeded-short", f"controller reports succeeded but training reached step {last_step} of {budget}")
        elif budget_complete:
            outcome = "completed (step budget reached; a redundant tail attempt ended " + st + ")"
        else:
            outcome = st
    elif budget_complete:
        terminal, outcome = True, "completed (step budget reached; no controller state)"
        a.problem("warning", "no-controller-state", "no controller state (no --bundle manifest or capture); terminal state inferred from the completed step budget")
    else:
        terminal, outcome = None, "unknown"
        a.problem("blocking", "terminal-unknown", "no controller state and the step budget is not complete: terminal state cannot be established")
    if budget is None:
        a.problem("warning", "budget-unknown", "step budget unknown (no max_steps in the configuration, no 'Training Step Progress: N / M' line)")
    return R.TerminalState(terminal=terminal, outcome=outcome, controller_state=ctrl["state"], controller_source=ctrl["source"],
                           last_step=last_step, budget=budget, budget_source=budget_source, budget_complete=budget_complete,
                           failure_count=ctrl.get("failure_count"), max_retries=ctrl.get("max_retries"))


def attempts_section(ev: Evidence, ts: R.TerminalState) -> list[R.Attempt]:
    return [R.Attempt(**x.as_dict(ts.budget)) for x in ev.facts.attempts]


def first_failure_section(ev: Evidence, attempts: list[R.Attempt], ts: R.TerminalState) -> R.FirstFailureCause | None:
    """The first causal error of the first attempt that failed before the budget was complete, else the controller's."""
    ctrl = ev.ctrl
    first_cause = None
    for x in attempts:
        if x.first_error and not x.after_budget_complete:
            first_cause = R.FirstFailureCause(attempt=x.attempt, **R.dump(x.first_error))
            break
    if first_cause is None:
        for x in ctrl["attempts"] or []:
            if isinstance(x, dict) and x.get("error"):
                first_cause = R.FirstFailureCause(attempt=x.get("attempt"), source=ctrl["source"], line=None, text=L.quote(str(x["error"])))
                break
    if first_cause is None and ts.terminal and ts.outcome not in ("succeeded",) and not ts.budget_complete:
        ev.a.problem("warning", "no-first-error", "run ended without success but no causal error line was found in the logs")
    return first_cause


def source_revision_section(ev: Evidence) -> R.SourceRevision:
    revs = []
    ep_rev = C.entrypoint_revision(ev.cfg)
    if ep_rev:
        revs.append({"source": ev.cfg.entrypoint_source + " --skyrl-ref", "kind": "entrypoint", "value": ep_rev, "attempt": None})
    revs += ev.facts.revisions
    values = sorted({r["value"] for r in revs})
    consistent = all(v.startswith(w) or w.startswith(v) for v in values for w in values)
    if not revs:
        ev.a.problem("warning", "revision-unknown", "source revision not found (no --skyrl-ref in the entrypoint, no 'MarinSkyRL now at <sha>' line)")
    elif not consistent:
        ev.a.problem("warning", "revision-disagreement", f"attempts ran different source revisions: {', '.join(values)}")
    return R.SourceRevision(value=max(values, key=len) if values and consistent else (values[-1] if values else None),
                            consistent=consistent, sources=revs[:20])


def resolved_configuration_section(ev: Evidence) -> R.ResolvedConfiguration:
    return R.ResolvedConfiguration(source=ev.cfg.source, entrypoint=ev.cfg.entrypoint_source,
                                   settings={k: redact(str(v)) if isinstance(v, str) else v for k, v in sorted(ev.settings.items())})


def saved_artifacts(ev: Evidence) -> Saved:
    """Every global_step_N checkpoint and every export, validated."""
    a = ev.a
    ck_root = a.checkpoint_root()
    latest, latest_src = a.latest_marker(ck_root)
    ck_dirs = []
    if ck_root is not None:
        for d in a.run.listdir(ck_root):
            m = STEP_DIR.match(d.name)
            if m and a.run.is_dir(d):
                ck_dirs.append((int(m[1]), d))
    ck_dirs.sort()
    ckpt_steps = {s for s, _ in ck_dirs}
    candidates = [a.checkpoint_candidate(d, s, latest, ev.metrics) for s, d in ck_dirs]
    exports = a.export_candidates(latest, ev.metrics, ckpt_steps)
    return Saved(ck_root, latest, latest_src, ck_dirs, candidates + exports, exports)


def checkpoints_section(ev: Evidence, saved: Saved) -> R.Checkpoints:
    steps = saved.steps
    return R.Checkpoints(root=ev.a.run.display(saved.ck_root) if saved.ck_root else None, latest_marker=saved.latest,
                         saved_steps=sorted(steps), last_saved_step=max(steps) if steps else None,
                         logged_saves=sorted(ev.facts.saved_steps))


def candidates_section(ev: Evidence, saved: Saved, ts: R.TerminalState) -> list[R.Candidate]:
    """The candidates, and what their validation means: a missing or stale latest marker, invalid
    artifacts, nothing valid to select."""
    a, latest, ckpt_steps, ck_dirs = ev.a, saved.latest, saved.steps, saved.ck_dirs
    if latest is not None and ck_dirs and latest not in ckpt_steps:
        a.problem("blocking", "latest-missing", f"latest_ckpt_global_step.txt says {latest} but no global_step_{latest}/ exists")
    if latest is not None and ck_dirs and max(ckpt_steps) > latest:
        a.problem("warning", "newer-than-latest", f"global_step_{max(ckpt_steps)}/ is newer than the atomic marker ({latest}): an interrupted save")
    for cand in saved.candidates:
        if not cand["valid"]:
            fails = "; ".join(c["detail"] for c in cand["checks"] if c["status"] == "fail")
            if cand["kind"] == "export":
                a.problem("blocking", "invalid-export", f"{cand['path']}: {fails}")
            elif cand["step"] == latest and not ts.budget_complete:
                a.problem("blocking", "invalid-latest-checkpoint", f"{cand['path']}: {fails}")
            else:
                a.problem("warning", "invalid-checkpoint", f"{cand['path']}: {fails}")
    if not ck_dirs and not saved.exports:
        a.problem("warning", "no-candidates", "no saved checkpoint or export found: nothing to validate or select")
    if (ck_dirs or saved.exports) and not any(c["valid"] for c in saved.candidates):
        a.problem("blocking", "no-valid-candidate", "no checkpoint or export passed validation")
    return [R.Candidate(**c) for c in saved.candidates]


def metrics_section(ev: Evidence) -> R.MetricWindow | None:
    """The metric window: the steps logged, the gaps, how the metrics were serialized."""
    facts, metrics = ev.facts, ev.metrics
    if not metrics:
        if facts.attempts:
            ev.a.problem("blocking", "metrics-absent", "logs present but no training metrics parsed (WANDB_MIRROR kind=train or python-dict blocks)")
        return None
    lo, hi = min(metrics), max(metrics)
    missing_count, missing = rank_gaps(metrics, lo, hi, 50)
    if facts.malformed and not facts.refused["counts"].get("malformed_metric_line"):
        ev.a.problem("warning", "metrics-malformed", f"{facts.malformed} metric line(s)/block(s) failed to parse")
    return R.MetricWindow(first_step=lo, last_step=hi, steps=len(metrics), missing_steps=missing, missing_count=missing_count,
                          malformed_lines=facts.malformed, repeated_steps=facts.duplicate_steps,
                          reward_key="reward/avg_raw_reward" if any("reward/avg_raw_reward" in m for m in metrics.values()) else None,
                          serializations=dict(sorted(facts.serializations.items())))


def metric_data_section(ev: Evidence) -> R.MetricData:
    """The metric data the audit refuses; each case is also a problem (``refuse_bad_metric_data``)."""
    refuse_bad_metric_data(ev.a, ev.facts)
    return R.MetricData(**ev.facts.refused)


def selection_section(ev: Evidence, saved: Saved, window: R.MetricWindow | None, attempts: list[dict]) -> R.Selection:
    """The declared policy applied to the valid exports (else checkpoints), or the choice left to the operator."""
    a, facts, metrics, exports = ev.a, ev.facts, ev.metrics, saved.exports
    valid = [c for c in saved.candidates if c["valid"]]
    export_steps = {c["step"] for c in exports if c["valid"] and c["step"] is not None}
    ckpt_valid = {c["step"] for c in saved.candidates if c["kind"] == "checkpoint" and c["valid"]}
    pool = export_steps if exports else ckpt_valid
    pool_kind = "export" if exports else "checkpoint"
    coverage = (f"{len(facts.attempts)} attempt(s) across {len(facts.files)} log file(s); metrics for "
                + (f"{window.steps} step(s) {window.first_step}..{window.last_step} ({window.missing_count} missing)" if window else "no step"))
    metric_window = f"steps {window.first_step}..{window.last_step}" if window else "none"
    if a.policy is None:
        return R.Selection(policy=None, status="unresolved", selected=None,
                           rationale="no selection policy declared; valid candidates listed, choice left to the operator",
                           valid_candidates=sorted(c["id"] for c in valid), table=[],
                           metric_window=metric_window, chain_coverage=coverage)
    interval = ev.settings.get("ckpt_interval")
    res = P.select(a.policy, pool, metrics, saved.latest, interval if isinstance(interval, int) else None)
    chosen = None
    if res["status"] == "selected":
        chosen = next(c for c in valid if c["kind"] == pool_kind and c["step"] == res["step"])
        chosen = R.SelectedArtifact(id=chosen["id"], kind=chosen["kind"], path=chosen["path"], step=chosen["step"],
                                    model_size=(chosen["model_size"] or {}).get("label"),
                                    **H.artifact_coverage(chosen["step"], metrics, attempts))
    else:
        a.problem("blocking", "policy-no-step", f"declared policy {a.policy.text!r} chose nothing: {res['rationale']}")
    if res["status"] == "selected" and window and res["step"] > window.last_step:
        a.problem("warning", "selection-beyond-metrics", "selected step lies beyond the metric window")
    return R.Selection(policy=a.policy.text, status=res["status"], selected=chosen, rationale=res["rationale"],
                       valid_candidates=sorted(c["id"] for c in valid), table=res.get("table", []),
                       metric_window=metric_window + (f" ({res['metric']})" if res.get("metric") else ""),
                       chain_coverage=coverage)


def behavioral_break_section(ev: Evidence, saved: Saved, attempts: list[dict], break_step: int | None,
                             break_time: datetime | None, diagnosis: Path | None) -> R.BehavioralBreak:
    """--break-step / --break-time, else the diagnosis report's break, and the last checkpoint that predates it."""
    brk = {"status": "none placed", "source": None, "step": break_step, "time": None, "kind": None, "evidence": None,
           "last_clean_checkpoint": None}
    if break_step is not None or break_time is not None:
        brk.update(status="placed", source=" and ".join(filter(None, ["--break-step" if break_step is not None else "",
                                                                       "--break-time" if break_time is not None else ""])),
                   kind="declared by the operator",
                   time=break_time.isoformat().replace("+00:00", "Z") if break_time else None)
    elif diagnosis is not None:
        found, why = H.diagnosis_break(diagnosis)
        if why:
            ev.a.problem("warning", "diagnosis-break-unreadable", why)
        if found:
            brk.update(status="placed", **found)
    if brk["status"] == "placed":
        btime = _parse_time(brk["time"]) if brk["time"] else None
        brk["last_clean_checkpoint"] = H.last_clean_checkpoint(
            {"step": brk["step"], "time_epoch": btime.timestamp() if btime else None}, saved.candidates, ev.facts.metric_ts,
            ev.metrics, attempts)
        if brk["last_clean_checkpoint"]["status"] == "absent":
            ev.a.problem("warning", "no-pre-break-checkpoint", brk["last_clean_checkpoint"]["rationale"])
    return R.BehavioralBreak(**brk)


def export_provenance_section(saved: Saved, selection: R.Selection) -> R.ExportProvenance | None:
    """Where the selected export (else the export at the selected step, else the newest valid export) came from."""
    exports, selected = saved.exports, selection.selected
    ck_by_step = {c["step"]: c for c in saved.candidates if c["kind"] == "checkpoint"}
    prov_export = None
    if selected and selected.kind == "export":
        prov_export = next(c for c in exports if c["id"] == selected.id)
    elif selected:
        prov_export = next((c for c in exports if c["step"] == selected.step), None)
    elif exports:
        prov_export = max((c for c in exports if c["valid"]), key=lambda c: c["step"] or -1, default=exports[-1])
    return R.ExportProvenance(**H.export_provenance(prov_export, ck_by_step, saved.latest)) if prov_export else None


def trials_found(ev: Evidence) -> dict:
    """The trace_jobs/ trial directories (bundle and run); a standard run that has some is a problem."""
    trials = ev.a.trials()
    if ev.mode == "standard" and trials["trials"]:
        ev.a.problem("warning", "mode-disagreement", "configuration has no agent harness but trace_jobs/ trial directories exist")
    return trials


def manifest_roots(a: Audit) -> list[tuple[Root, Path]]:
    return [(r, r.path) for r in (a.export, a.run) if r is not None]


def publication_section(ev: Evidence) -> R.Publication | None:
    """The downloaded published model (--published-dir): artifacts, weights, secrets, trace export manifest."""
    a = ev.a
    if a.published is None:
        return None
    if not a.published.is_dir(a.published.path):
        a.problem("blocking", "published-missing", f"--published-dir {a.published.path} is not a directory")
        return None
    publication = verify_published(a.published, ev.mode, manifest_roots(a))
    for art in publication["artifacts"]:
        if art["status"] == "absent":
            a.problem("blocking", "publication-incomplete", f"published model: {art['artifact']} absent ({art['detail']})")
    for chk in publication["weight_checks"]:
        if chk["status"] == "fail":
            a.problem("blocking", "published-weights-invalid", f"published weights: {chk['detail']}")
    secret_scan_problems(a, publication["secret_scan"], "", "the checked tree")
    te = publication["trace_export"]
    if te["passed"] is False:
        a.problem("blocking", "trace-export", f"trace export manifest: {te['detail']}")
    return R.Publication(**publication)


TRACE_CHECK_CODES = {"trace_tar": "trace-tar-absent", "sync_manifest": "trace-objects-skipped",
                     "extracted_trace_jobs": "trace-jobs-not-extracted", "export_manifest": "trace-export-manifest-absent",
                     "result_coverage": "trace-coverage-below-gate", "result_count": "trace-result-count-mismatch",
                     "shard_names": "trace-shard-names", "stale_shards": "trace-stale-shards",
                     "staged_shards": "trace-shards-not-staged", "row_count": "trace-row-count-mismatch",
                     "staged_rows": "trace-shard-unreadable"}
"""The problem code of each trace-rebuild check that does not pass."""


def trace_rebuild_section(ev: Evidence) -> R.TraceRebuild | None:
    """The durable trace rebuild (--trace-root), checked; each check that does not pass is a problem."""
    a = ev.a
    if a.trace_root is None:
        if ev.mode == "agentic":
            a.problem("warning", "trace-rebuild-unchecked", "agentic run: no --trace-root, so the durable trace rebuild "
                      "(tar, sync manifest objects_skipped, export coverage, staged shards) was not checked")
        return None
    if not a.trace_root.is_dir(a.trace_root.path):
        a.problem("blocking", "trace-root-missing", f"--trace-root {a.trace_root.path} is not a directory")
        return None
    trace_rebuild = check_trace_root(a.trace_root)
    for chk in trace_rebuild["checks"]:
        if chk["status"] == "pass":
            continue
        code = TRACE_CHECK_CODES[chk["check"]]
        if chk["check"] == "sync_manifest" and chk["status"] == "absent":
            code = "trace-sync-manifest-absent"
        severity = "warning" if chk["status"] in ("could not check",) or chk["check"] == "staged_shards" else "blocking"
        a.problem(severity, code, f"trace rebuild: {chk['check']} {chk['status']}: {chk['detail']}"
                  + (f" ({chk['path']})" if chk["path"] else ""))
    secret_scan_problems(a, trace_rebuild["secret_scan"], "trace-", f"the trace rebuild ({a.trace_root.path})")
    return R.TraceRebuild(**trace_rebuild)


def trace_export_section(ev: Evidence, publication: R.Publication | None, rebuild: R.TraceRebuild | None) -> R.TraceExport:
    """The trace export manifest: the published download's, else one beside the run or export, unless
    the trace rebuild holds one (its recomputed coverage)."""
    if publication is not None:
        trace_export = publication.trace_export
    else:
        trace_export = R.TraceExport(**trace_manifest_check(find_trace_manifest(manifest_roots(ev.a)), ev.mode != "standard"))
    if rebuild is not None and rebuild.export_manifest and (publication is None or trace_export.status != "present"):
        coverage = next(c for c in rebuild.checks if c.check == "result_coverage")
        trace_export = R.TraceExport(status="present", path=rebuild.export_manifest, result_coverage=rebuild.result_coverage,
                                     passed=coverage.status == "pass", detail=coverage.detail)
    return trace_export


def monitor_mirror_section(ev: Evidence) -> R.MonitorMirror | None:
    mirror = monitor_mirror(ev.a.bundle, ev.manifest)
    return R.MonitorMirror(**mirror) if mirror else None


def campaign_problems(ev: Evidence, publication: R.Publication | None) -> None:
    """The campaign record against what was verified: the trace destination, reclaimed storage and its authority."""
    a, campaign = ev.a, ev.campaign
    if campaign.trace_dataset and publication is not None:
        link = next((x for x in publication.artifacts if x.artifact == "training_traces_link" and x.status == "present"), None)
        if link and not re.search(r"huggingface\.co/datasets/" + re.escape(campaign.trace_dataset) + r"(?![\w.\-])", link.detail):
            a.problem("blocking", "trace-destination-mismatch",
                      f"the model card's Training Traces link ({link.detail}) is not the campaign's trace dataset {campaign.trace_dataset}")
    if campaign.reclaimed and campaign.reclaim_authorized:
        pending = [p for p in a.problems if p["severity"] == "blocking"] or publication is None
        if pending:
            a.problem("blocking", "reclaim-before-verification",
                      "the campaign record reports reclaimed storage but the destinations are not verified: "
                      + ", ".join(campaign.reclaimed)[:300])
    if campaign.reclaimed and not campaign.reclaim_authorized:
        a.problem("blocking", "reclaim-without-authority", "storage reported reclaimed without separate reclaim authority: "
                  + ", ".join(campaign.reclaimed)[:300])


def inventory_section(ev: Evidence, saved: Saved, trials: dict, mirror: R.MonitorMirror | None,
                      trace_export: R.TraceExport) -> list[R.InventoryItem]:
    """The evidence chain the runbook requires, item by item; a required item absent is a problem."""
    a, facts, metrics, cfg, ctrl, mode = ev.a, ev.facts, ev.metrics, ev.cfg, ev.ctrl, ev.mode
    agentic = mode != "standard"
    inv: list[R.InventoryItem] = []

    def item(name, status, detail, required=True):
        inv.append(R.InventoryItem(artifact=name, status=status, detail=redact(detail), required=required))

    item("controller state", "present" if ctrl["state"] else "absent",
         f"{ctrl['state']} ({ctrl['source']})" if ctrl["state"] else "no manifest job.state or capture state.json")
    item("attempt logs", "present" if facts.attempts else "absent",
         f"{len(facts.attempts)} attempt(s) in {', '.join(facts.files)}" if facts.attempts else "no finelog.log, logs/*.out or slurm_logs/*.out")
    item("training metrics", "present" if metrics else "absent",
         f"{len(metrics)} step(s), {min(metrics)}..{max(metrics)}" if metrics else "no WANDB_MIRROR kind=train lines")
    item("checkpoints", "present" if saved.ck_dirs else "absent",
         f"{len(saved.ck_dirs)} global_step_N dir(s) under {a.run.display(saved.ck_root)}; latest marker: "
         f"{saved.latest if saved.latest is not None else saved.latest_src}" if saved.ck_dirs
         else "no checkpoint directory with global_step_N/")
    er = a.export_root()
    item("export metadata", "present" if saved.exports else "absent",
         f"{len(saved.exports)} export(s) under {er[0].display(er[1])}" if saved.exports else "no exports/ directory and no --export-dir",
         required=False)
    item("resolved launch configuration", "present" if cfg.source or cfg.entrypoint_source else "absent",
         ", ".join(filter(None, [cfg.source, cfg.entrypoint_source])) or "no resolved config file and no manifest entrypoint")
    tstat = "not applicable" if not agentic else ("present" if trials["trials"] else "absent")
    item("trials (trace_jobs)", tstat, "standard run: no agent harness" if not agentic else
         (f"{trials['trials']} trial dir(s), {trials['results']} result.json" + (f" (monitor mirror: {mirror.status}, not the source of record)" if mirror else "")
          if trials["trials"] else "no trace_jobs/ trial directories"), required=agentic)
    vstat = "not applicable" if not agentic else ("present" if trials["verifier"] else "absent")
    item("verifier artifacts", vstat, "standard run: no verifier" if not agentic else f"{trials['verifier']} trial(s) with verifier/", required=agentic)
    item("trace export manifest", trace_export.status, trace_export.detail, required=agentic)
    for x in inv:
        if x.required and x.status == "absent" and x.artifact in ("attempt logs", "resolved launch configuration"):
            a.problem("blocking", "evidence-absent", f"required evidence absent: {x.artifact}")
        elif x.required and x.status == "absent" and x.artifact in ("trials (trace_jobs)", "verifier artifacts") and mode == "agentic":
            a.problem("warning", "evidence-absent", f"agentic run: {x.artifact} absent from the local evidence")
    if mode == "unknown":
        a.problem("blocking", "mode-unknown", "run cannot be classified: no resolved configuration; the audit reads "
                  + C.expected_layout(a.bundle is not None))
    return inv


def resume_safety_section(ev: Evidence, saved: Saved, ts: R.TerminalState) -> R.ResumeSafety:
    """Resume safety: the newest complete checkpoint (optimizer state present, step consistent)."""
    return R.ResumeSafety(**H.resume_assessment(ts.budget_complete, ts.last_step, ts.budget, saved.latest, saved.ck_dirs,
                                                saved.candidates, ev.facts.saved_steps))


def preserved_locations_section(ev: Evidence, saved: Saved, trials: dict, mirror: R.MonitorMirror | None,
                                run: Path, bundle: Path | None, published: Path | None,
                                trace_root: Path | None) -> list[R.PreservedLocation]:
    preserved = [{"what": "run directory", "path": str(run)}]
    if bundle:
        preserved.append({"what": "evidence bundle", "path": str(bundle)})
    if saved.ck_root is not None:
        preserved.append({"what": "checkpoints", "path": str(saved.ck_root)})
    er = ev.a.export_root()
    if er is not None:
        preserved.append({"what": "exports", "path": str(er[1])})
    for loc in trials["locations"]:
        sample = mirror is not None and loc["path"] == mirror.path
        preserved.append({"what": f"trials (monitor mirror, {mirror.status})" if sample else "trials", "path": loc["path"]})
    if published:
        preserved.append({"what": "published model (downloaded copy)", "path": str(published)})
    if trace_root:
        preserved.append({"what": "trace rebuild (source of record)", "path": str(trace_root)})
    if ev.campaign.tracker_url:
        preserved.append({"what": "tracker URL (campaign record)", "path": redact(ev.campaign.tracker_url)})
    trials_uri = (ev.manifest or {}).get("trials_uri") if ev.manifest else None
    if isinstance(trials_uri, str):
        preserved.append({"what": "remote trials (manifest trials_uri)", "path": redact(trials_uri)})
    return [R.PreservedLocation(**p) for p in preserved]


def file_access_problems(a: Audit) -> None:
    """Every path the confined reads refused (outside its root: blocking) or could not read."""
    for root in [r for r in (a.run, a.bundle, a.export, a.published, a.trace_root) if r is not None]:
        for iss in root.issues:
            sev = "blocking" if "outside" in iss["problem"] else "warning"
            a.problem(sev, "unsafe-path" if sev == "blocking" else "unreadable", f"{iss['path']}: {iss['problem']}")


def remaining_work_section(ev: Evidence, selection: R.Selection, publication: R.Publication | None, trace_export: R.TraceExport,
                           rebuild: R.TraceRebuild | None, brk: R.BehavioralBreak, ts: R.TerminalState) -> list[str]:
    """What is left before the hand-off is complete: every blocking problem, then the checks not yet made."""
    mode = ev.mode
    remaining = [f"resolve: {p['message']}" for p in ev.a.problems if p["severity"] == "blocking"]
    if selection.status == "unresolved":
        remaining.append("declare a selection policy or choose among the valid candidates: " + (", ".join(selection.valid_candidates) or "none"))
    if publication is None:
        remaining.append("publication not verified: download the published model fresh and re-run with --published-dir")
    if mode == "agentic" and trace_export.status != "present":
        remaining.append("trace dataset export not verified (no trace_export_manifest.json)")
    if mode == "agentic" and rebuild is None:
        remaining.append("check the durable trace rebuild: re-run with --trace-root <TRACE_ROOT>")
    if mode == "agentic" and ev.campaign.source is None:
        remaining.append("name the campaign record (--campaign) for destinations, registration and reclaim authority")
    if brk.status == "placed" and brk.last_clean_checkpoint.selected is None:
        remaining.append("no checkpoint predates the behavioral break: decide whether any artifact is publishable")
    if not ts.terminal:
        remaining.append("re-run the audit once the controller reports a terminal state")
    return remaining


def problems_section(a: Audit) -> list[R.Problem]:
    """Every problem once (by code and message), blocking first, then by code and message."""
    problems = sorted(a.problems, key=lambda p: (p["severity"] != "blocking", p["code"], p["message"]))
    seen = set()
    return [R.Problem(**p) for p in problems if not ((p["code"], p["message"]) in seen or seen.add((p["code"], p["message"])))]


def campaign_section(campaign: Campaign) -> R.CampaignSection:
    return R.CampaignSection(source=campaign.source, model_repo=campaign.model_repo, trace_dataset=campaign.trace_dataset,
                             base_model=campaign.base_model, registration_authorized=campaign.registration_authorized,
                             reclaim_authorized=campaign.reclaim_authorized)


def build_record(run: Path, bundle: Path | None, export_dir: Path | None, published: Path | None,
                 policy: P.Policy | None, now: datetime, *, trace_root: Path | None = None,
                 campaign: Campaign | None = None, break_step: int | None = None,
                 break_time: datetime | None = None, diagnosis: Path | None = None) -> dict:
    """The completion record: each section built by its function (in this order: later sections read
    the problems earlier ones raised), assembled into an ``AuditRecord`` and returned as its dict."""
    campaign = campaign or Campaign()
    if policy is None and campaign.selection_policy:
        try:
            policy = P.parse_policy(campaign.selection_policy)
        except P.PolicyError as exc:
            policy = None
            campaign.problems.append(f"campaign record: selection_policy {campaign.selection_policy!r} is not a valid policy ({exc})")
    a = Audit(run, bundle, export_dir, published, policy, now, trace_root)
    ev = gather(a, campaign)
    ts = terminal_state_section(ev)
    attempts = attempts_section(ev, ts)
    attempt_dicts = [R.dump(x) for x in attempts]
    first_cause = first_failure_section(ev, attempts, ts)
    revision = source_revision_section(ev)
    saved = saved_artifacts(ev)
    candidates = candidates_section(ev, saved, ts)
    window = metrics_section(ev)
    metric_data = metric_data_section(ev)
    selection = selection_section(ev, saved, window, attempt_dicts)
    brk = behavioral_break_section(ev, saved, attempt_dicts, break_step, break_time, diagnosis)
    provenance = export_provenance_section(saved, selection)
    trials = trials_found(ev)
    publication = publication_section(ev)
    rebuild = trace_rebuild_section(ev)
    trace_export = trace_export_section(ev, publication, rebuild)
    mirror = monitor_mirror_section(ev)
    campaign_problems(ev, publication)
    inventory = inventory_section(ev, saved, trials, mirror, trace_export)
    resume = resume_safety_section(ev, saved, ts)
    preserved = preserved_locations_section(ev, saved, trials, mirror, run, bundle, published, trace_root)
    file_access_problems(a)
    remaining = remaining_work_section(ev, selection, publication, trace_export, rebuild, brk, ts)
    problems = problems_section(a)
    sections = dict(
        schema_=R.SCHEMA, evaluated_at=now.isoformat().replace("+00:00", "Z"),
        run=run_section(ev, run, bundle, export_dir, published),
        status="blocked" if any(p.severity == "blocking" for p in problems) else "complete",
        mode=mode_section(ev), terminal_state=ts, source_revision=revision, resolved_configuration=resolved_configuration_section(ev),
        attempts=attempts, first_failure_cause=first_cause, inventory=inventory, metrics=window, metric_data=metric_data,
        checkpoints=checkpoints_section(ev, saved), candidates=candidates, selection=selection, publication=publication,
        trace_export=trace_export, preserved_locations=preserved, resume_safety=resume, problems=problems,
        remaining_work=remaining, behavioral_break=brk, export_provenance=provenance, trace_rebuild=rebuild,
        monitor_mirror=mirror, campaign=campaign_section(campaign))
    draft = R.dump(R.AuditRecord(**sections, preservation_steps=[], completion_record=[]))    # what the hand-off reads
    steps = H.preservation_steps(draft, campaign, draft["trace_rebuild"]) if ev.mode == "agentic" else []
    fields = H.completion_fields(draft, campaign, draft["trace_rebuild"], steps)
    return R.dump(R.AuditRecord(**sections, preservation_steps=steps, completion_record=fields))
