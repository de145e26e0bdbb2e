"""From what the bundle reader parsed to the summary facts the rule base reasons on.

Pure functions of (``BundleRead``, thresholds, evaluation time). Comparisons that need
arithmetic (cadence, table lookups, series windows) happen here and are stored as
named fields; the rules in ``rules/rulesets/*.yaml`` draw the conclusions.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from rlhealth.catalog import Catalog
from rlhealth.facts import AnyFact, Evidence, Occurrence, make_fact
from rlhealth.probes.bundle import BundleRead, SignatureAgg, first_errors_by_attempt
from rlhealth.probes.capture import TERMINAL_STATES
from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.parse.timestamps import iso, parse_iso
from rlhealth.probes.parse.vllm import eager_from_config
from rlhealth.probes.textio import quote

AGENTIC_MARKERS = re.compile(r"terminal_bench|harbor|daytona|trials[_-]dir|TerminalBenchGenerator|agent_harness|sandbox", re.I)
MODEL_PATH_RE = re.compile(r"(?:model_path|model\.path|--model|pretrain|model_name)[\"']?\s*[=: ]\s*[\"']?([A-Za-z0-9_./-]+)")
PARAMS_RE = re.compile(r"(\d+(?:\.\d+)?)[Bb](?:-A(\d+(?:\.\d+)?)[Bb])?\b")
GPU_RE = re.compile(r"\b(H100|H200|GH200|B200|GB200|A100)\b")
INT_SETTING = "{key}[\"']?\\s*[=:]\\s*[\"']?(\\d+)"
NCCL_STACK_RE = re.compile(r"ncclKernel|all_reduce|allreduce|all_gather|reduce_scatter|broadcast|barrier|ProcessGroupNCCL|wait_tensor|_wait_for_work|c10d", re.I)
ISO_STAMP = "%Y-%m-%dT%H:%M:%SZ"
STATE_ALIASES = {"terminated": "killed", "worker failed": "worker_failed", "awaiting placement": "pending",
                 "completed": "succeeded", "timeout": "failed", "cancelled": "killed", "unknown": None}


def ev(occ: Occurrence | None) -> list[Evidence]:
    if occ is None:
        return []
    return [Evidence(source=occ.source, line=occ.line, text=quote(occ.text))]


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else None


@dataclass
class Observation:
    """All facts for one diagnosis plus context the report needs."""
    facts: list[AnyFact] = field(default_factory=list)
    job: dict[str, Any] = field(default_factory=dict)
    duty_cycle: dict[str, Any] | None = None
    phase_table: list[dict[str, Any]] = field(default_factory=list)
    metric_window: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    restarts: dict[str, Any] = field(default_factory=dict)
    first_error: Evidence | None = None

    def add(self, kind: str, fact_id: str, evidence: list[Evidence] | None = None, **fields: Any) -> AnyFact:
        fact = make_fact(kind, fact_id, evidence or [], **fields)
        self.facts.append(fact)
        return fact


def observe(read: BundleRead, catalog: Catalog, *, now: float, max_age_s: float,
            mode_override: str | None = None) -> Observation:
    thr = catalog.thresholds
    obs = Observation()
    for i, problem in enumerate(read.problems):
        obs.add("problem", f"problem:{i}", [Evidence(source=problem.source, text=quote(problem.reason))],
                source=problem.source, reason=problem.reason, gate=problem.gate)
    job = _job(read, obs, now=now, max_age_s=max_age_s, mode_override=mode_override)
    evidence_time = read.newest_evidence or now
    trainer = _trainer(read, obs, thr, evidence_time, job)
    _signatures(read, obs, trainer, job)
    _engines(read, obs, thr, evidence_time, job)
    _gpus(read, obs, thr, job)
    _stacks(read, obs, job)
    _pods(read, obs, trainer)
    _rollouts(read, obs, thr, catalog, job, trainer)
    _dynamics(read, obs, thr, trainer)
    _restarts(read, obs, thr, job)
    return obs


# ---------------------------------------------------------------- job
def _config_text(read: BundleRead) -> tuple[str, str]:
    """(launch configuration text, where it came from)."""
    texts, sources = [], []
    if read.job_info and read.job_info.get("resolved_config"):
        import json
        texts.append(json.dumps(read.job_info["resolved_config"], sort_keys=True))
        sources.append("capture job.json resolved_config")
    job = (read.manifest or {}).get("job") if isinstance(read.manifest, dict) else None
    if isinstance(job, dict) and job.get("entrypoint"):
        texts.append(str(job["entrypoint"]))
        sources.append("manifest.json job.entrypoint")
    pod_args = _pod_launch_args(read)
    if pod_args and not texts:
        texts.append(pod_args)
        sources.append("pods.json container command/args")
    return "\n".join(texts), " + ".join(sources)


def _pod_launch_args(read: BundleRead) -> str:
    """The task containers' command, args and env values as the API returned them (launch configuration)."""
    items = read.pods.get("items") if isinstance(read.pods, dict) else None
    parts: list[str] = []
    for pod in items if isinstance(items, list) else []:
        spec = pod.get("spec") if isinstance(pod, dict) else None
        for container in (spec or {}).get("containers") or []:
            if not isinstance(container, dict):
                continue
            parts += [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
            parts += [str(e.get("value")) for e in container.get("env") or [] if isinstance(e, dict) and e.get("value")]
    return " ".join(parts)


def _state(read: BundleRead) -> tuple[str | None, str, Evidence | None]:
    cap_state = read.state.get("state") if isinstance(read.state, dict) else None
    man_job = (read.manifest or {}).get("job") if isinstance(read.manifest, dict) else None
    man_state = man_job.get("state") if isinstance(man_job, dict) else None
    if isinstance(man_state, str):
        man_state = man_state.strip().lower()
        man_state = STATE_ALIASES.get(man_state, man_state)
    cap_rel = read.capture_dir.relative_to(read.root).as_posix() if read.capture_dir else None
    cap_newer = read.captured_at is not None and (read.synced_at is None or read.captured_at >= read.synced_at)
    if cap_state and (cap_newer or not man_state):
        return cap_state, "capture", Evidence(source=f"{cap_rel}/state.json", text=quote(f'"state": "{cap_state}"'))
    if man_state:
        return man_state, "manifest", Evidence(source="manifest.json", text=quote(f'"job": {{"state": "{man_state}"}}'))
    if cap_state:
        return cap_state, "capture", Evidence(source=f"{cap_rel}/state.json", text=quote(f'"state": "{cap_state}"'))
    return None, "none", None


def _job(read: BundleRead, obs: Observation, *, now: float, max_age_s: float, mode_override: str | None) -> dict:
    manifest = read.manifest if isinstance(read.manifest, dict) else {}
    capture = read.capture if isinstance(read.capture, dict) else {}
    job_id = capture.get("job_id") or manifest.get("job_id") or read.root.name
    cluster = capture.get("cluster") or manifest.get("cluster") or "unknown"
    backend = capture.get("backend") or ("slurm" if read.layout == "jupiter" else "iris")
    state, state_source, state_ev = _state(read)
    pods_count = None
    if isinstance(read.pods, dict) and isinstance(read.pods.get("items"), list):
        pods_count = len(read.pods["items"])
    contradiction = None
    if state == "absent" and pods_count:
        contradiction = f"controller says absent but pods.json lists {pods_count} pod(s)"
    if state == "running" and pods_count == 0 and backend == "iris" and state_source == "capture":
        contradiction = "controller says running but the capture found no pods"
    known = state is None or state in TERMINAL_STATES or state in ("pending", "building", "running") or state.startswith("state")
    terminal = bool(state in TERMINAL_STATES) and contradiction is None
    newest = read.newest_evidence
    age = None if newest is None else max(0.0, now - newest)
    stale = (not terminal) and (age is None or age > max_age_s)
    live = bool(read.capture_dir is not None and read.captured_at is not None and now - read.captured_at <= max_age_s
                and not terminal and (read.gpu_polls or read.stacks))
    config_text, config_source = _config_text(read)
    mode, mode_source = None, "undetermined"
    if mode_override:
        mode, mode_source = mode_override, "--mode"
    elif read.job_info and read.job_info.get("mode_hint") in ("agentic", "standard"):
        mode, mode_source = read.job_info["mode_hint"], "capture job.json mode_hint"
    elif config_text:
        mode = "agentic" if AGENTIC_MARKERS.search(config_text) else "standard"
        mode_source = config_source
    elif read.generator_init is not None:
        mode, mode_source = "agentic", f"launch log {read.generator_init.source}:{read.generator_init.line}"
    elif read.metric_records and min(r.step for r in read.metric_records) <= 1 and read.source_rev is not None:
        mode = "standard"
        mode_source = (f"launch log {read.source_rev.source}: the trainer started ({read.source_rev.text[-40:].strip()}) "
                       "and stepped without initializing an agent-harness generator")
    # model / hardware / placement
    info = read.job_info or {}
    model = info.get("model") or {}
    hardware = info.get("hardware") or {}
    placement = info.get("placement") or {}
    active_b, model_name, model_source = model.get("active_params_b"), model.get("name"), model.get("source")
    if active_b is None and config_text:
        m = MODEL_PATH_RE.search(config_text)
        if m:
            model_name = m.group(1)
            p = PARAMS_RE.search(model_name)
            if p:
                active_b = float(p.group(2) or p.group(1))
                model_source = f"model path in {config_source}"
    gpu = hardware.get("gpu")
    if gpu is None and config_text:
        g = GPU_RE.search(config_text)
        gpu = {"H100": "H100-80GB-SXM", "H200": "H200-141GB", "GH200": "GH200-96GB", "B200": "B200-180GB",
               "GB200": "GB200-186GB", "A100": "A100-80GB"}.get(g.group(1)) if g else None

    def setting(key: str) -> int | None:
        if placement.get(key) is not None:
            return int(placement[key])
        m = re.search(INT_SETTING.format(key=key), config_text)
        return int(m.group(1)) if m else None

    n_trials = setting("n_concurrent_trials")
    if n_trials is None and read.generator_init is not None:
        m = re.search(r"Concurrent trials: (\d+)", read.generator_init.text)
        n_trials = int(m.group(1)) if m else None
    eager = eager_from_config(config_text) if config_text else None
    eager_source = config_source if eager is not None else None
    if eager is None and read.eager_lines:
        value, occ = read.eager_lines[-1]
        eager, eager_source = value, f"{occ.source}:{occ.line}"
    job = dict(job_id=job_id, cluster=cluster, backend=backend, layout=read.layout, state=state or "unknown",
               state_known=state is not None and known, state_source=state_source, terminal=terminal,
               stale=stale, evidence_age_s=round(age, 1) if age is not None else None,
               evidence_time=iso(newest), has_manifest=read.manifest is not None, has_capture=read.capture_dir is not None,
               live_evidence=live, contradiction=contradiction, mode=mode or "unknown", mode_source=mode_source,
               model_name=model_name, model_source=model_source, active_params_b=active_b, gpu=gpu,
               n_concurrent_trials=n_trials, max_num_seqs=setting("max_num_seqs"),
               num_inference_engines=setting("num_inference_engines"), enforce_eager=eager, enforce_eager_source=eager_source,
               max_age_s=max_age_s, log_files=len(read.log_files))
    evidence = [state_ev] if state_ev else []
    if read.capture_dir is not None:
        cap_rel = read.capture_dir.relative_to(read.root).as_posix()
        evidence.append(Evidence(source=f"{cap_rel}/capture.json", text=quote(f'"captured_at": "{iso(read.captured_at)}"')))
    if read.synced_at is not None:
        evidence.append(Evidence(source="manifest.json", text=quote(f'"synced_at": "{manifest.get("synced_at")}"')))
    obs.job = job
    obs.add("job", "job", evidence, **{k: v for k, v in job.items()})
    return job


# ---------------------------------------------------------------- trainer
def _trainer(read: BundleRead, obs: Observation, thr: dict, evidence_time: float, job: dict) -> dict:
    records: dict[int, tp.MetricRecord] = {}
    for rec in read.metric_records:
        records.setdefault(rec.step, rec)   # first occurrence of a step wins across the chain
    steps = sorted(records)
    last = read.last_trainer_line
    step_times = [r.metrics.get("timing/step") for r in records.values() if r.metrics.get("timing/step")]
    step_times += read.phase_costs.get("step", [])
    ts_sorted = sorted(r.ts for r in records.values() if r.ts is not None)
    if not step_times and len(ts_sorted) >= 3:
        step_times = [b - a for a, b in zip(ts_sorted, ts_sorted[1:]) if b > a]
    median_step = _median(step_times)
    completed = max(len(steps), read.steps_finished, (read.step_progress or (0, 0))[0])
    last_step = steps[-1] if steps else (read.step_progress or (None, None))[0]
    if completed >= 1:
        threshold = max(thr["trainer_stall_min_s"], thr["trainer_stall_step_factor"] * (median_step or 0))
    else:
        threshold = thr["bring_up_stall_s"]
    age = (evidence_time - last.ts) if last is not None and last.ts is not None else None
    activity = bool(read.trainer_lines or read.malformed_metric_lines or read.steps_finished or read.step_progress)
    open_phase = None
    if read.phases_open:
        name, occ = max(read.phases_open.items(), key=lambda kv: (kv[1].ts or 0, kv[1].line))
        open_phase = name
    genbuf_frozen = None
    if read.genbuf_last_change is not None and read.genbuf_last_seen is not None \
            and read.genbuf_last_change.ts is not None and read.genbuf_last_seen.ts is not None:
        genbuf_frozen = (read.genbuf_last_seen.ts - read.genbuf_last_change.ts) > threshold
    trainer = dict(activity=activity, metric_records=len(records), malformed_records=read.malformed_metric_lines,
                   steps_completed=completed, last_step=last_step,
                   total_steps=(read.step_progress or (None, None))[1], last_progress=iso(last.ts) if last and last.ts else None,
                   progress_age_s=round(age, 1) if age is not None else None,
                   progress_timestamped=bool(last is not None and last.ts is not None),
                   stall_threshold_s=round(threshold, 1), median_step_s=round(median_step, 1) if median_step else None,
                   frozen=bool(age is not None and age > threshold), open_phase=open_phase,
                   genbuf_frozen=genbuf_frozen, serialization=records[steps[-1]].serialization if steps else None,
                   stage="training" if completed >= 1 else "bring_up", has_logs=bool(read.log_files),
                   metrics_usable=bool(records))
    evidence = ev(last)
    if not records and read.malformed_example is not None:
        evidence = ev(read.malformed_example) + evidence
    obs.add("trainer", "trainer", evidence, **trainer)
    trainer["_records"] = records
    trainer["_last"] = last
    return trainer


def _progress_after(occ: Occurrence | None, trainer: dict) -> bool:
    last: Occurrence | None = trainer.get("_last")
    if occ is None or last is None:
        return False
    if occ.ts is not None and last.ts is not None:
        return last.ts > occ.ts + 1.0
    if occ.source == last.source:
        return last.line > occ.line
    return False


def _signatures(read: BundleRead, obs: Observation, trainer: dict, job: dict) -> None:
    current = max([o.attempt or 0 for a in read.signatures.values() for o in a.first_by_attempt.values()] +
                  [len(read.attempt_boundaries), len(read.leg_ids)] + [0]) + (1 if read.current_leg_missing else 0)
    job["current_attempt"] = current
    for sig_id in sorted(read.signatures):
        agg: SignatureAgg = read.signatures[sig_id]
        sig = agg.signature
        cur = [o for k, o in agg.first_by_attempt.items() if k in (current, -1)]
        cur_first = min(cur, key=lambda o: (o.ts if o.ts is not None else float("inf"), o.line)) if cur else None
        cur_last = agg.last if agg.last is not None and (agg.last.attempt in (current, None)) else cur_first
        in_current = cur_first is not None
        evidence = ev(cur_first or agg.first)
        if cur_last is not None and cur_first is not None and cur_last != cur_first:
            evidence += ev(cur_last)
        obs.add("signature", f"signature:{sig_id}", evidence, sig=sig_id, family=sig.family, severity=sig.severity,
                gate=sig.gate, title=sig.title, count=agg.count, in_current_attempt=in_current,
                progress_after=_progress_after(cur_last, trainer) if in_current else False,
                transient=sig.transient, remediation=sig.remediation, files=len(agg.files))
    for sig_id, n in sorted(read.suppressed.items()):
        obs.add("suppressed", f"suppressed:{sig_id}", [], sig=sig_id, count=n)


# ---------------------------------------------------------------- engines / throughput
def _engines(read: BundleRead, obs: Observation, thr: dict, evidence_time: float, job: dict) -> None:
    if not read.stats:
        obs.add("engines", "engines", [], seen=0, recent=0, generating=False, stats_lines=0)
        return
    newest = max((s.ts for q in read.stats.values() for s in q if s.ts is not None), default=None)
    window_start = (newest - thr["throughput_recent_window_s"]) if newest is not None else None
    per_engine = []
    recent_samples = []
    newest_sample = None
    for name in sorted(read.stats):
        samples = list(read.stats[name])
        last = samples[-1]
        if newest_sample is None or (last.ts or 0) >= (newest_sample.ts or 0):
            newest_sample = last
        window = [s for s in samples if window_start is None or s.ts is None or s.ts >= window_start]
        fresh = last.ts is not None and newest is not None and evidence_time - last.ts <= thr["engine_fresh_s"]
        if window:
            recent_samples.extend(window)
            per_engine.append(dict(engine=name, fresh=fresh, gen=_median([s.gen_tok_s for s in window]),
                                   running=_median([s.running for s in window]), waiting=_median([s.waiting for s in window])))
    recent = [e for e in per_engine if e["fresh"]]
    gen_median = _median([e["gen"] for e in recent]) if recent else None
    running_median = _median([s.running for s in recent_samples]) if recent_samples else None
    waiting_median = _median([s.waiting for s in recent_samples]) if recent_samples else None
    starved = [s for s in recent_samples
               if s.waiting >= thr["queue_waiting_over_running_ratio"] * max(s.running, 1) and s.waiting >= thr["queue_min_waiting_reqs"]]
    starved_fraction = len(starved) / len(recent_samples) if recent_samples else 0.0
    engines = dict(seen=len(read.stats), recent=len(recent), stats_lines=read.stats_count,
                   eras=",".join(sorted(read.stats_eras)), newest_stats=iso(newest),
                   stats_age_s=round(evidence_time - newest, 1) if newest is not None else None,
                   generating=bool(recent and (gen_median or 0) > 0),
                   gen_tok_s_per_engine=round(gen_median, 1) if gen_median is not None else None,
                   running_median=running_median, waiting_median=waiting_median,
                   queue_starved=bool(recent_samples and starved_fraction >= thr["queue_persistent_fraction"]),
                   starved_fraction=round(starved_fraction, 2),
                   expected_engines=job.get("num_inference_engines"),
                   n_concurrent_trials=job.get("n_concurrent_trials"), max_num_seqs=job.get("max_num_seqs"))
    demand, supply = job.get("n_concurrent_trials"), None
    if job.get("max_num_seqs") and (job.get("num_inference_engines") or read.stats):
        supply = job["max_num_seqs"] * (job.get("num_inference_engines") or len(read.stats))
    engines["demand_over_supply"] = round(demand / supply, 2) if demand and supply else None
    evidence = [Evidence(source=newest_sample.source, line=newest_sample.line,
                         text=quote(_stats_text(read, newest_sample)))] if newest_sample else []
    if starved:
        evidence = [Evidence(source=starved[-1].source, line=starved[-1].line, text=quote(_stats_text(read, starved[-1])))]
    obs.add("engines", "engines", evidence, **engines)
    # throughput against the hardware lookup table
    table = _throughput_floor(job, thr, obs_catalog=None)
    if gen_median is None:
        return
    throughput = dict(measured_tok_s=round(gen_median, 1), running_median=running_median,
                      enforce_eager=job.get("enforce_eager"), enforce_eager_known=job.get("enforce_eager") is not None,
                      enforce_eager_source=job.get("enforce_eager_source"),
                      many_running=bool((running_median or 0) >= thr["throughput_min_running_reqs"]))
    throughput.update(table)
    if table.get("floor_tok_s"):
        throughput["below_floor"] = gen_median < table["floor_tok_s"]
        throughput["ratio_to_floor"] = round(gen_median / table["floor_tok_s"], 3)
    else:
        throughput["below_floor"] = False
    obs.add("throughput", "throughput", evidence[:1], **throughput)


_TABLES: dict[str, Any] = {}


def set_tables(catalog: Catalog) -> None:
    _TABLES["hbm"] = {row["gpu"]: row for row in catalog.hbm_bandwidth}
    _TABLES["decode"] = catalog.decode_table


def _throughput_floor(job: dict, thr: dict, obs_catalog=None) -> dict:
    active = job.get("active_params_b")
    gpu = job.get("gpu")
    if not active or not _TABLES:
        return {"table_row": None, "floor_tok_s": None, "floor_reason": "model active parameters unknown" if not active else "no table"}
    hbm = _TABLES["hbm"]
    h100 = hbm.get("H100-80GB-SXM")
    row = min(_TABLES["decode"], key=lambda r: abs(math.log(r["active_params_b"] / active)))
    scale, gpu_row = 1.0, None
    if gpu and gpu in hbm:
        gpu_row = hbm[gpu]
        scale = gpu_row["hbm_bandwidth_tb_s"] / h100["hbm_bandwidth_tb_s"]
    elif gpu:
        return {"table_row": row["model_class"], "floor_tok_s": None, "floor_reason": f"GPU {gpu} not in the bandwidth table"}
    else:
        return {"table_row": row["model_class"], "floor_tok_s": None, "floor_reason": "GPU type unknown"}
    bw = gpu_row["hbm_bandwidth_tb_s"] * 1e12
    single_stream = bw / (2 * active * 1e9 * 2)   # bf16: 2 bytes/param; HBM_BW / (2 x active_param_bytes)
    return {"table_row": row["model_class"], "gpu": gpu, "floor_tok_s": round(row["awful_below_tok_s"] * scale, 1),
            "healthy_low_tok_s": round(row["healthy_aggregate_low_tok_s"] * scale, 1),
            "single_stream_bound_tok_s": round(single_stream, 1), "table_source": f"{row['source']}; {gpu_row['source']}",
            "floor_reason": None}


def _stats_text(read: BundleRead, sample) -> str:
    return (f"Engine {sample.engine.rsplit('#', 1)[-1] if '#' in sample.engine else ''}: "
            f"Avg generation throughput: {sample.gen_tok_s} tokens/s, Running: {sample.running} reqs, "
            f"Waiting: {sample.waiting} reqs" + (f", GPU KV cache usage: {sample.kv_pct}%" if sample.kv_pct is not None else ""))


# ---------------------------------------------------------------- live GPU / stacks / pods
def _gpus(read: BundleRead, obs: Observation, thr: dict, job: dict) -> None:
    if not read.gpu_polls:
        return
    cap_rel = read.capture_dir.relative_to(read.root).as_posix() if read.capture_dir else ""
    by_role: dict[str, dict[tuple, list[dict]]] = {}
    for row in read.gpu_polls:
        role = row.get("role") if row.get("role") in ("policy", "inference") else "unknown"
        by_role.setdefault(role, {}).setdefault((str(row.get("host")), row.get("gpu")), []).append(row)
    for role in sorted(by_role):
        gpus = by_role[role]
        idle_resident, busy, pinned, polls = [], [], [], 0
        example = None
        for key in sorted(gpus, key=str):
            rows = gpus[key]
            polls = max(polls, len(rows))
            utils = [r.get("util_pct") for r in rows if isinstance(r.get("util_pct"), (int, float))]
            mems = [r.get("mem_used_mib") for r in rows if isinstance(r.get("mem_used_mib"), (int, float))]
            totals = [r.get("mem_total_mib") for r in rows if isinstance(r.get("mem_total_mib"), (int, float))]
            if len(utils) >= thr["gpu_min_polls"] and all(u <= thr["gpu_idle_util_pct"] for u in utils) \
                    and mems and min(mems) >= thr["gpu_resident_mem_mib"]:
                idle_resident.append(key)
                example = example or rows[-1]
            if utils and _median(utils) > thr["gpu_idle_util_pct"]:
                busy.append(key)
            if mems and totals and max(mems) >= thr["gpu_mem_pinned_fraction"] * max(totals):
                pinned.append(key)
        row = example or gpus[sorted(gpus, key=str)[0]][-1]
        text = (f'{{"host": "{row.get("host")}", "gpu": {row.get("gpu")}, "role": "{role}", "util_pct": {row.get("util_pct")}, '
                f'"mem_used_mib": {row.get("mem_used_mib")}, "t": "{row.get("t")}"}}')
        all_util = [r.get("util_pct") for rows in gpus.values() for r in rows if isinstance(r.get("util_pct"), (int, float))]
        obs.add("gpu_role", f"gpu_role:{role}", [Evidence(source=f"{cap_rel}/gpu_polls.jsonl", text=quote(text))],
                role=role, gpus=len(gpus), polls=polls, idle_resident=len(idle_resident), busy=len(busy),
                all_idle_resident=bool(gpus) and len(idle_resident) == len(gpus), pinned=len(pinned),
                mean_util_pct=round(statistics.fmean(all_util), 1) if all_util else None, live=job["live_evidence"])


def _stacks(read: BundleRead, obs: Observation, job: dict) -> None:
    if not read.stacks:
        return
    in_collective = []
    for rel, text in read.stacks:
        if NCCL_STACK_RE.search(text):
            in_collective.append(rel)
    first = in_collective[0] if in_collective else read.stacks[0][0]
    line_text = next((ln.strip() for rel, text in read.stacks if rel == first for ln in text.splitlines()
                      if NCCL_STACK_RE.search(ln)), read.stacks[0][1].splitlines()[0] if read.stacks[0][1] else "")
    obs.add("stacks", "stacks", [Evidence(source=first, text=quote(line_text))], count=len(read.stacks),
            in_collective=len(in_collective), all_in_collective=len(in_collective) == len(read.stacks),
            live=job["live_evidence"])


def _pods(read: BundleRead, obs: Observation, trainer: dict) -> None:
    if not isinstance(read.pods, dict) or not isinstance(read.pods.get("items"), list):
        return
    cap_rel = read.capture_dir.relative_to(read.root).as_posix() if read.capture_dir else ""
    oom, pull, crash, restarts, phases = [], [], [], 0, []
    oom_times: list[float] = []
    for pod in read.pods["items"]:
        if not isinstance(pod, dict):
            continue
        name = str((pod.get("metadata") or {}).get("name"))
        status = pod.get("status") or {}
        phases.append(str(status.get("phase")))
        for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
            if not isinstance(cs, dict):
                continue
            restarts += int(cs.get("restartCount") or 0)
            for which in ("state", "lastState"):
                st = cs.get(which) or {}
                term = st.get("terminated") or {}
                wait = st.get("waiting") or {}
                if term.get("reason") == "OOMKilled":
                    finished = parse_iso(term.get("finishedAt"))
                    if finished is not None:
                        oom_times.append(finished)
                    oom.append(f'pod {name} container {cs.get("name")} {which}.terminated.reason=OOMKilled exitCode={term.get("exitCode")}')
                if wait.get("reason") in ("ImagePullBackOff", "ErrImagePull"):
                    pull.append(f'pod {name} container {cs.get("name")} state.waiting.reason={wait.get("reason")}')
                if wait.get("reason") == "CrashLoopBackOff":
                    crash.append(f'pod {name} container {cs.get("name")} state.waiting.reason=CrashLoopBackOff')
        if status.get("reason") == "Evicted":
            oom.append(f"pod {name} status.reason=Evicted {status.get('message', '')}")
    texts = oom[:1] + pull[:1] + crash[:1]
    last: Occurrence | None = trainer.get("_last")
    recovered = bool(oom and oom_times and len(oom_times) == len(oom) and last is not None and last.ts is not None
                     and last.ts > max(oom_times) and not crash)
    obs.add("pods", "pods", [Evidence(source=f"{cap_rel}/pods.json", text=quote(t)) for t in texts],
            count=len(read.pods["items"]), oomkilled=len(oom), oom_recovered=recovered,
            last_oom=iso(max(oom_times)) if oom_times else None, image_pull_backoff=len(pull), crashloop=len(crash),
            restarts=restarts, running=phases.count("Running"), pending=phases.count("Pending"))


# ---------------------------------------------------------------- rollouts
def _rollouts(read: BundleRead, obs: Observation, thr: dict, catalog: Catalog, job: dict, trainer: dict) -> None:
    infra = catalog.trial_exceptions.get("infra") or {}
    benign = catalog.trial_exceptions.get("benign") or {}
    s = read.trials
    if s is None:
        obs.add("trials", "trials", [], present=False, trace_dir=read.trace_dir_exists)
    else:
        finished = s.completed - s.unreadable
        top_exc, top_n = (s.exceptions.most_common(1)[0] if s.exceptions else (None, 0))
        nonzero = sum(1 for r in s.rewards if r > 0)
        incoherent_fraction = (s.incoherent / s.coherence_sampled) if s.coherence_sampled else None
        turns_mean = statistics.fmean(s.turns) if s.turns else None
        evidence = []
        if top_exc and s.exception_example.get(top_exc):
            evidence.append(Evidence(source=f"trace_jobs/{s.exception_example[top_exc]}",
                                     text=quote(f'exception_type: {top_exc} ({top_n}/{finished} finished trials)')))
        if s.incoherent_example:
            evidence.append(Evidence(source=f"trace_jobs/{s.incoherent_example[0]}", text=quote(s.incoherent_example[1])))
        elif s.coherent_example:
            evidence.append(Evidence(source=f"trace_jobs/{s.coherent_example[0]}", text=quote(s.coherent_example[1])))
        rewards_line = f"{nonzero}/{len(s.rewards)} trials with reward > 0; mean reward {statistics.fmean(s.rewards):.3f}" if s.rewards else "no rewards read"
        prior = f" ({s.prior_generation} from earlier attempts excluded)" if s.prior_generation else ""
        evidence.append(Evidence(source="trace_jobs/", text=quote(f"{s.started} trial dirs, {s.completed} with result.json; {rewards_line}{prior}")))
        for problem in s.problems[:1]:
            evidence.append(Evidence(source=problem.split(":")[0], text=quote(problem)))
        remedy = infra.get(top_exc) or {}
        obs.add("trials", "trials", evidence, present=True, started=s.started, prior_generation=s.prior_generation, completed=s.completed, unreadable=s.unreadable,
                finished=finished, rewards=len(s.rewards), nonzero_rewards=nonzero,
                all_zero=bool(s.rewards) and nonzero == 0,
                mean_reward=round(statistics.fmean(s.rewards), 4) if s.rewards else None,
                top_exception=top_exc, top_exception_count=top_n,
                top_exception_fraction=round(top_n / finished, 3) if finished else 0.0,
                top_exception_infra=top_exc in infra, top_exception_benign=top_exc in benign,
                infra_cause=remedy.get("cause"), infra_fix=remedy.get("fix"),
                uniform_infra=bool(top_exc in infra and finished and top_n / finished >= thr["uniform_exception_fraction"]),
                turns_mean=round(turns_mean, 2) if turns_mean is not None else None,
                coherence_sampled=s.coherence_sampled, incoherent=s.incoherent,
                incoherent_fraction=round(incoherent_fraction, 3) if incoherent_fraction is not None else None,
                salad=bool(incoherent_fraction is not None and incoherent_fraction >= thr["salad_fraction"]),
                enough=finished >= thr["rollout_verdict_min_trials"], weight_reload_markers=read.weight_reload,
                unreadable_fraction=round(s.unreadable / s.completed, 3) if s.completed else 0.0)
        medians = {p: _median(v) for p, v in s.phases.items() if v}
        if medians:
            total = sum(medians.values())
            obs.duty_cycle = {"trials_timed": max(len(v) for v in s.phases.values()),
                              "median_s": {p: round(v, 1) for p, v in sorted(medians.items())},
                              "share": {p: round(v / total, 3) for p, v in sorted(medians.items())} if total else {},
                              "p90_environment_setup_s": round(_quantile(s.phases["environment_setup"], 0.9), 1)
                              if s.phases["environment_setup"] else None}
    # standard-run rollout evidence from the trainer log
    records: dict[int, tp.MetricRecord] = trainer["_records"]
    steps = sorted(records)
    rewards = [(st, tp.metric(records[st].metrics, "reward")) for st in steps]
    rewards = [(st, r) for st, r in rewards if r is not None and not math.isnan(r)]
    gen_tokens = [tp.metric(records[st].metrics, "gen_avg_tokens") for st in steps]
    gen_tokens = [g for g in gen_tokens if g is not None]
    zero_reward_steps = sum(1 for _, r in rewards if r == 0)
    top_batch_exc, top_batch_n = (max(read.exc_breakdown.items(), key=lambda kv: kv[1]) if read.exc_breakdown else (None, 0))
    total_batch_exc = sum(read.exc_breakdown.values())
    batch_total = sum(b["total"] for b, _ in read.batch_complete)
    batch_ok = sum(b["successful"] for b, _ in read.batch_complete)
    evidence = []
    if rewards:
        st = rewards[-1][0]
        evidence.append(Evidence(source=records[st].source, line=records[st].line,
                                 text=quote(f"step {st}: reward {rewards[-1][1]}")))
    if read.exc_breakdown_occ is not None:
        evidence += ev(read.exc_breakdown_occ)
    obs.add("std_rollouts", "std_rollouts", evidence, reward_steps=len(rewards),
            all_zero_reward=bool(len(rewards) >= thr["all_zero_reward_min_steps"] and zero_reward_steps == len(rewards)),
            last_reward=rewards[-1][1] if rewards else None, gen_tokens_zero=bool(gen_tokens) and max(gen_tokens) == 0,
            batch_exception=top_batch_exc, batch_exception_infra=top_batch_exc in infra,
            batch_exception_fraction=round(top_batch_n / total_batch_exc, 3) if total_batch_exc else 0.0,
            batch_success_fraction=round(batch_ok / batch_total, 3) if batch_total else None,
            batch_infra_cause=(infra.get(top_batch_exc) or {}).get("cause"),
            batch_infra_fix=(infra.get(top_batch_exc) or {}).get("fix"))


def _quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# ---------------------------------------------------------------- dynamics
def _dynamics(read: BundleRead, obs: Observation, thr: dict, trainer: dict) -> None:
    records: dict[int, tp.MetricRecord] = trainer["_records"]
    steps = sorted(records)
    window = steps[-50:]
    series: dict[str, list[float]] = {}
    for name in ("reward", "entropy", "policy_loss", "grad_norm", "tis_imp_ratio_mean", "tis_log_ratio_abs_mean",
                 "tis_exact_match", "log_ratio_abs_max"):
        vals = [tp.metric(records[s].metrics, name) for s in window]
        series[name] = [v for v in vals if v is not None]
    nan_metrics = sorted(n for n, v in series.items() if any(math.isnan(x) or math.isinf(x) for x in v))

    def finite(name):
        return [x for x in series[name] if not (math.isnan(x) or math.isinf(x))]

    lr_max = max(finite("log_ratio_abs_max"), default=None)
    loss_max = max((abs(x) for x in finite("policy_loss")), default=None)
    grad_max = max(finite("grad_norm"), default=None)
    imp = finite("tis_imp_ratio_mean")
    broken = []
    worst_step = None
    for s in window:
        m = records[s].metrics
        flags = []
        v = tp.metric(m, "log_ratio_abs_max")
        if v is not None and not math.isnan(v) and v >= thr["broken_replay_log_ratio_abs_max_nats"]:
            flags.append(f"log_ratio_abs_max={v:g}")
        v = tp.metric(m, "policy_loss")
        if v is not None and not math.isnan(v) and abs(v) >= thr["broken_replay_policy_loss_abs_loss"]:
            flags.append(f"policy_loss={v:g}")
        v = tp.metric(m, "grad_norm")
        if v is not None and not math.isnan(v) and v >= thr["broken_replay_grad_norm_l2"]:
            flags.append(f"grad_norm={v:g}")
        if flags:
            broken.append((s, flags))
            worst_step = worst_step or s
    rewards = finite("reward")
    plateau = bool(len(rewards) >= thr["dynamics_min_steps"] and (max(rewards) - min(rewards)) < thr["plateau_reward_range_reward"])
    evidence = []
    if broken:
        s = broken[0][0]
        evidence.append(Evidence(source=records[s].source, line=records[s].line,
                                 text=quote(f"step {s}: " + ", ".join(broken[0][1]))))
    elif window:
        s = window[-1]
        keys = [k for k in ("reward", "entropy", "policy_loss", "grad_norm") if tp.metric(records[s].metrics, k) is not None]
        evidence.append(Evidence(source=records[s].source, line=records[s].line,
                                 text=quote(f"step {s}: " + ", ".join(f"{k}={tp.metric(records[s].metrics, k):.4g}" for k in keys))))
    obs.add("dynamics", "dynamics", evidence, steps=len(steps), window=len(window),
            enough=len(steps) >= thr["dynamics_min_steps"], broken_replay=bool(broken),
            broken_steps=len(broken), nan_metrics=",".join(nan_metrics) or None, has_nan=bool(nan_metrics),
            log_ratio_abs_max=lr_max, policy_loss_abs_max=loss_max, grad_norm_max=grad_max,
            tis_imp_ratio_mean=imp[-1] if imp else None,
            tis_out_of_range=bool(imp and not (thr["tis_imp_ratio_mean_low_ratio"] <= imp[-1] <= thr["tis_imp_ratio_mean_high_ratio"])),
            plateau=plateau, reward_first=rewards[0] if rewards else None, reward_last=rewards[-1] if rewards else None,
            activity=trainer["activity"], metrics_usable=trainer["metrics_usable"], use_tis=read.use_tis)
    if window:
        obs.metric_window = {"first_step": window[0], "last_step": window[-1], "steps": len(window),
                             "series": {k: [round(x, 4) for x in v[-10:]] for k, v in series.items() if v}}
        timings: dict[str, list[float]] = {}
        for s in window:
            for k, v in records[s].metrics.items():
                if k.startswith("timing/"):
                    timings.setdefault(k[len("timing/"):], []).append(v)
        obs.phase_table = [{"phase": k, "median_s": round(_median(v), 2), "last_s": round(v[-1], 2), "n": len(v)}
                           for k, v in sorted(timings.items())]
    elif read.phase_costs:
        obs.phase_table = [{"phase": k, "median_s": round(_median(v), 2), "last_s": round(v[-1], 2), "n": len(v)}
                           for k, v in sorted(read.phase_costs.items())]


# ---------------------------------------------------------------- restarts
def _normalize_error(text: str) -> str:
    text = re.sub(r"^\s*\([^)]*\)\s*", "", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[ T][0-9:.,]+", "", text)
    text = re.sub(r"0x[0-9a-f]+|\b\d+\b", "N", text)
    return " ".join(text.split())[:160]


def _restarts(read: BundleRead, obs: Observation, thr: dict, job: dict) -> None:
    first_by_attempt = first_errors_by_attempt(read.signatures)
    timeout_attempts: set[int] = set()
    if "slurm_time_limit" in read.signatures:
        timeout_attempts = set(read.signatures["slurm_time_limit"].first_by_attempt)
    attempts: list[dict] = []
    state = read.state if isinstance(read.state, dict) else {}
    cap_attempts = state.get("attempts") if isinstance(state.get("attempts"), list) else []
    current = job.get("current_attempt", 0)
    if cap_attempts:
        for i, a in enumerate(cap_attempts):
            if not isinstance(a, dict):
                continue
            idx = int(a.get("attempt", i))
            log_err = first_by_attempt.get(idx + 1)   # log attempts are 1-based (boundaries / chain legs)
            if log_err is None and len(cap_attempts) == 1:
                log_err = first_by_attempt.get(0) or first_by_attempt.get(-1)
            attempts.append(dict(attempt=idx, state=str(a.get("state")), first_error=a.get("error") or (log_err[0].text if log_err else None),
                                 signature=log_err[1] if log_err else None, transient=log_err[2] if log_err else False,
                                 occ=log_err[0] if log_err else None, timeout="TIME LIMIT" in str(a.get("error") or "")
                                 or str(a.get("state")).lower() == "timeout" or (idx + 1) in timeout_attempts))
    else:
        n = max(len(read.attempt_boundaries), len(read.leg_ids) + (1 if read.current_leg_missing else 0), 1)
        for idx in range(1, n + 1):
            log_err = first_by_attempt.get(idx)
            if idx == 1 and log_err is None:
                log_err = first_by_attempt.get(0) or first_by_attempt.get(-1) if n == 1 else first_by_attempt.get(0)
            is_last = idx == n
            if is_last:
                st = job["state"]
            else:
                st = "timeout" if idx in timeout_attempts else ("failed" if log_err else "unknown")
            attempts.append(dict(attempt=idx - 1, state=st, first_error=log_err[0].text if log_err else None,
                                 signature=log_err[1] if log_err else None, transient=log_err[2] if log_err else False,
                                 occ=log_err[0] if log_err else None, timeout=idx in timeout_attempts))
    failed_states = {"failed", "worker_failed", "killed", "timeout", "out_of_memory", "node_fail", "cancelled"}
    burned = []
    for i, a in enumerate(attempts):
        is_last = i == len(attempts) - 1
        if is_last and not job["terminal"]:
            continue
        failed = a["state"].lower() in failed_states or (a["first_error"] is not None and a["state"] in ("unknown",))
        if not failed:
            continue
        if a["timeout"] and not is_last:
            a["interpretation"] = "wall-clock TIMEOUT with a successor: chain restart, not a burn"
            continue
        burned.append(a)
    keys = [(_normalize_error(a["first_error"]) if a["first_error"] else None) for a in burned]
    same = len(burned) >= thr["same_failure_min_attempts"] and all(k is not None and k == keys[0] for k in keys)
    failure_count = int(state.get("failure_count") or 0)
    manifest_job = (read.manifest or {}).get("job") if isinstance(read.manifest, dict) else None
    max_retries = state.get("max_retries")
    burned_n = max(len(burned), failure_count)
    recovered = bool(burned and not job["terminal"] and not same)
    transient_only = bool(burned) and all(a["transient"] for a in burned)
    evidence = []
    for a in burned[:3]:
        if a["occ"] is not None:
            evidence += ev(a["occ"])
        elif a["first_error"]:
            evidence.append(Evidence(source="state.json", text=quote(a["first_error"])))
    obs.attempts = [{"attempt": a["attempt"], "state": a["state"], "first_error": quote(a["first_error"]) if a["first_error"] else None,
                     **({"interpretation": a["interpretation"]} if a.get("interpretation") else {})} for a in attempts]
    obs.restarts = dict(burned=burned_n, max_retries=max_retries, same_failure=same, attempts=obs.attempts)
    firsts = [a for a in attempts if a["occ"] is not None]
    cur = [a for a in attempts if a["occ"] is not None and a is attempts[-1]]
    target = cur[0] if cur else (firsts[0] if firsts else None)
    if target is not None:
        obs.first_error = ev(target["occ"])[0]
    obs.add("restarts", "restarts", evidence, burned=burned_n, attempts=len(attempts), same_failure=same,
            recovered_transient=recovered and transient_only, recovered=recovered,
            max_retries=max_retries, remaining=(max_retries - burned_n) if isinstance(max_retries, int) else None,
            last_attempt_first_error=attempts[-1]["first_error"] is not None if attempts else False,
            last_attempt_transient=attempts[-1]["transient"] if attempts else False,
            terminal=job["terminal"], first_signature=burned[0]["signature"] if burned else None)
