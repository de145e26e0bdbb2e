"""engines and throughput: every engine seen (one canonical identity per engine over every file it
logs to), the configured engine count, vLLM stats over the recent stats window, and the hardware
table's row."""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from rlhealth.facts import EngineGpusMeasured, EngineMeasured, EnginesConfigured, EnginesMeasured, Evidence, ThroughputMeasured
from rlhealth.observers.base import Observation, as_dict, as_key, capture_rel, locate, median, quantile, rounded
from rlhealth.probes.backends import bundle_log_is_current_leg
from rlhealth.probes.bundle import BundleRead, _current_attempt_start, _slurm_leg
from rlhealth.probes.parse.timestamps import iso
from rlhealth.probes.parse.vllm import PREFIX_RE
from rlhealth.probes.textio import clean_line, quote

# Ray's per-process log files: worker-<worker id>-<job id>-<pid>.out|err (log-formats §3.3)
RAY_WORKER_FILE_RE = re.compile(r"^worker-[0-9a-f]+-[0-9a-f]+-(\d+)\.(?:out|err)$")
# Ray's log deduplication folds similar lines of several processes into one (log-formats §2.1,
# marin-artifacts §2.3): the folded engines' stats lines are not in that stream
RAY_DEDUP_RE = re.compile(r"\[repeated \d+x across cluster\]")
SETTING_RE = r"num_inference_engines[\"'\\]*\s*[=:]\s*[\"'\\]*{value}\b"


def stats_text(sample) -> str:
    """A stats sample restated (a summary of the parsed line, not the line itself)."""
    return (f"Engine {sample.engine.rsplit('#', 1)[-1] if '#' in sample.engine else ''}: "
            f"Avg generation throughput: {sample.gen_tok_s} tokens/s, Running: {sample.running} reqs, "
            f"Waiting: {sample.waiting} reqs" + (f", GPU KV cache usage: {sample.kv_pct}%" if sample.kv_pct is not None else ""))


@functools.lru_cache(maxsize=4096)      # called per stats sample; a bundle has few sources
def pod_of(source: str) -> str | None:
    """The pod (or node directory) a per-pod log file belongs to: ``pod_logs/<pod>.log`` and
    ``ray_vllm_logs/<pod>/...`` (also under a capture directory); None for aggregated streams."""
    parts = PurePosixPath(source).parts
    for i, part in enumerate(parts[:-1]):
        if part == "pod_logs" and i == len(parts) - 2:
            return PurePosixPath(parts[-1]).stem
        if part == "ray_vllm_logs" and i + 2 < len(parts):
            return parts[i + 1]
    return None


def pod_addresses(read: BundleRead) -> dict[str, str]:
    """Pod name -> pod IP from pods.json (Ray names a remote actor by that IP)."""
    items = read.pods.get("items") if isinstance(read.pods, dict) else None
    out: dict[str, str] = {}
    for pod in items if isinstance(items, list) else []:
        if not isinstance(pod, dict):
            continue
        name = as_dict(pod.get("metadata")).get("name")
        ip = as_dict(pod.get("status")).get("podIP")
        if isinstance(name, str) and isinstance(ip, str) and ip:
            out[name] = ip
    return out


@dataclass
class Engine:
    """One engine: the process that prints its stats lines, wherever they were read."""
    scope: str
    """``ip`` (the host address is known), ``pod`` (only the pod whose file it is), ``stream`` (an
    aggregated stream such as the finelog, host unknown) or ``file`` (no process identity at all)."""
    pid: str | None
    label: str
    samples: list = field(default_factory=list)
    sources: set = field(default_factory=set)
    index: str | None = None
    """The ``Engine NNN`` index of a file-scoped engine."""
    ip: str | None = None
    """The host address of an ``ip``-scoped engine."""
    indexed: bool = False
    """A file-scoped engine told apart by its ``Engine NNN`` index: its file carries several distinct
    indices (one process serving several data-parallel engines, each logging its own index)."""

    @property
    def attributed(self) -> bool:
        return self.pid is not None or self.indexed

    def hosts(self, addresses: dict[str, str]) -> set[str]:
        """Where the engine runs, by every name the evidence gives it: the IP of its actor prefix,
        the pod (or node directory) of each per-pod file it logs to, and each such pod's IP."""
        out = {self.ip} if self.ip else set()
        for source in self.sources:
            pod = pod_of(source)
            if pod:
                out.add(pod)
                if addresses.get(pod):
                    out.add(addresses[pod])
        by_ip = {ip: pod for pod, ip in addresses.items()}
        if self.ip in by_ip:
            out.add(by_ip[self.ip])
        return out


def raw_identity(sample, addresses: dict[str, str]) -> tuple[tuple, str]:
    """(identity key, label) of one stats line. The process is the line's ``(Actor pid=N[, ip=A])``
    prefix (Ray, vLLM V1 multiprocessing), else the pid in a Ray worker file's name; its host is
    the prefix's ip, else the pod IP (pods.json) of a per-pod file, else that pod, else unknown (an
    aggregated stream such as the finelog). A line with neither prefix nor worker file name is
    identified by its file and ``Engine NNN`` index only (unattributed)."""
    pod = pod_of(sample.source)
    m = PREFIX_RE.search(sample.text) if sample.text else None
    worker_pid = None if m else _worker_file_pid(sample.source)
    if m or worker_pid:
        pid = m.group("pid") if m else worker_pid
        actor = f"{m.group('actor')} " if m else ""
        ip = (m.group("ip") if m else None) or addresses.get(pod or "")
        if ip:
            return ("ip", ip, pid), f"{actor}pid={pid}, ip={ip}"
        if pod:
            return ("pod", pod, pid), f"{actor}pid={pid} on {pod}"
        return ("stream", None, pid), f"{actor}pid={pid}"
    index = sample.engine.rsplit("#", 1)[-1] if "#" in sample.engine else None
    return ("file", sample.source, index), f"{sample.source}" + (f" Engine {index}" if index else "")


@functools.lru_cache(maxsize=4096)
def _worker_file_pid(source: str) -> str | None:
    """The pid in a Ray worker file's name, else None."""
    worker = RAY_WORKER_FILE_RE.match(PurePosixPath(source).name)
    return worker.group(1) if worker else None


def _merge_into_unique(engines: dict[tuple, Engine], scope: str, targets: tuple[str, ...]) -> None:
    """Each engine of ``scope`` joins the one engine of a ``targets`` scope with the same pid, when
    exactly one exists (same pid on two hosts stays two engines)."""
    for ident in [i for i in engines if i[0] == scope]:
        same_pid = [i for i in engines if i[0] in targets and i[2] == ident[2]]
        if len(same_pid) == 1:
            target, orphan = engines[same_pid[0]], engines.pop(ident)
            target.samples += orphan.samples
            target.sources |= orphan.sources


_MISSING = object()


def _time_order(s) -> tuple:
    """A stats sample's place in time (undated first), then its file and line."""
    return (s.ts if s.ts is not None else -math.inf, s.source, s.line)


def canonical_engines(read: BundleRead) -> list[Engine]:
    """The engines of the bundle, each once: the same process seen in the finelog, a pod log and a
    Ray worker file is one engine. An engine known only by its pod joins the one engine with that
    pid and a known address; one seen only in an aggregated stream joins the one per-pod engine
    with that pid. Ambiguous matches stay apart (the count errs high, never low)."""
    addresses = pod_addresses(read)
    engines: dict[tuple, Engine] = {}
    # raw_identity reads the same actor prefix the sample's engine key was derived from: it is
    # the same for every sample of one (source, engine key, text or none)
    identities: dict[tuple, tuple[tuple, str]] = {}
    for key in sorted(read.stats):
        for sample in read.stats[key]:
            memo = (sample.source, sample.engine, not sample.text)
            engine = identities.get(memo)
            if engine is None:
                ident, label = raw_identity(sample, addresses)
                engine = engines.get(ident)
                if engine is None:
                    engine = engines[ident] = Engine(scope=ident[0], pid=ident[2] if ident[0] != "file" else None,
                                                     label=label, index=ident[2] if ident[0] == "file" else None,
                                                     ip=ident[1] if ident[0] == "ip" else None)
                engine.sources.add(sample.source)
                identities[memo] = engine
            engine.samples.append(sample)
    _merge_into_unique(engines, "pod", ("ip",))
    _merge_into_unique(engines, "stream", ("ip", "pod"))
    indices: dict[str, set] = {}
    for ident, engine in engines.items():
        if ident[0] == "file" and engine.index is not None:
            indices.setdefault(ident[1], set()).add(engine.index)
    for ident, engine in engines.items():
        engine.indexed = ident[0] == "file" and engine.index is not None and len(indices.get(ident[1], ())) > 1
    out = []
    for engine in engines.values():
        seen, unique = set(), []
        index_of: dict[str, str | None] = {}
        for s in sorted(engine.samples, key=_time_order):
            index = index_of.get(s.engine, _MISSING)
            if index is _MISSING:
                index = index_of[s.engine] = s.engine.rsplit("#", 1)[-1] if "#" in s.engine else None
            dedup = (s.ts, index, s.gen_tok_s, s.prompt_tok_s, s.running, s.waiting, s.kv_pct)
            if s.ts is not None and dedup in seen:
                continue       # the same line read from a second file
            seen.add(dedup)
            unique.append(s)
        engine.samples = unique
        out.append(engine)
    return sorted(out, key=lambda e: e.label)


def _poll_pids(row: dict) -> set[str]:
    """The pids of a poll row's compute processes (``"<pid> <args>"`` each)."""
    out = set()
    procs = row.get("processes")
    for proc in procs if isinstance(procs, list) else []:
        head = str(proc).split(" ", 1)[0]
        if head.isdigit():
            out.add(head)
    return out


def _numbers(rows: list[dict], key: str) -> list[float]:
    return [v for r in rows if isinstance(v := r.get(key), (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def engine_gpu_groups(read: BundleRead, engines: list[Engine], param: dict) -> list[EngineGpusMeasured]:
    """The live polls' inference GPUs grouped by engine. A GPU belongs to the engine whose pid is
    one of its compute processes on that host (the engine's pod, its pod's IP, or its actor
    prefix's IP), else to the only engine logging from that host; a GPU no engine of the logs
    matches is grouped with the other unmatched GPUs of its host."""
    rows_by_gpu: dict[tuple[str, object], list[dict]] = {}
    for row in read.gpu_polls:
        if row.get("role") == "inference":
            rows_by_gpu.setdefault((str(row.get("host")), as_key(row.get("gpu"))), []).append(row)
    if not rows_by_gpu:
        return []
    addresses = pod_addresses(read)
    hosts = [(engine, engine.hosts(addresses)) for engine in engines]
    groups: dict[str, dict] = {}
    for (host, gpu), rows in sorted(rows_by_gpu.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        names = {host, addresses.get(host) or host}
        here = [e for e, where in hosts if where & names]
        pids = set().union(*(_poll_pids(r) for r in rows))
        by_pid = [e for e in here if e.pid is not None and e.pid in pids]
        if len(by_pid) == 1:
            engine, how = by_pid[0], "pid"
        elif len(here) == 1 and not by_pid:
            engine, how = here[0], "host"
        else:
            engine, how = None, "none"
        key = engine.label if engine is not None else f"inference GPUs on {host}"
        g = groups.setdefault(key, {"engine": engine, "how": set(), "gpus": {}, "hosts": set()})
        g["gpus"][(host, gpu)] = rows
        g["hosts"].add(host)
        g["how"].add(how)
    out = []
    cap = capture_rel(read)
    for key in sorted(groups):
        g = groups[key]
        gpus = g["gpus"]
        utils = [u for rows in gpus.values() for u in _numbers(rows, "util_pct")]
        mems = [m for rows in gpus.values() for m in _numbers(rows, "mem_used_mib")]
        medians = [median(_numbers(rows, "util_pct")) for rows in gpus.values() if _numbers(rows, "util_pct")]
        quiet = min(gpus, key=lambda k: (max(_numbers(gpus[k], "util_pct") or [0]), str(k)))
        row = gpus[quiet][-1]
        text = (f'{{"host": "{row.get("host")}", "gpu": {row.get("gpu")}, "role": "inference", "util_pct": {row.get("util_pct")}, '
                f'"mem_used_mib": {row.get("mem_used_mib")}, "processes": {json.dumps(row.get("processes") or [])}, "t": "{row.get("t")}"}}')
        out.append(EngineGpusMeasured(
            fact_id=f"engine_gpus:{key}", identity=key, matched_by="+".join(sorted(g["how"])), host=", ".join(sorted(g["hosts"])),
            gpu_list=", ".join(str(k[1]) for k in sorted(gpus, key=lambda k: (k[0], str(k[1])))), gpus=len(gpus),
            polls=min(len(v) for v in gpus.values()), max_util_pct=max(utils) if utils else None,
            max_median_util_pct=max(medians) if medians else None, min_mem_used_mib=min(mems) if mems else None,
            in_logs=g["engine"] is not None,
            evidence=(Evidence(source=f"{cap}/gpu_polls.jsonl", text=quote(text)),)))
    return out


def configured_engines(obs: Observation) -> EnginesConfigured | None:
    """num_inference_engines and the configuration line it was read from (capture job.json,
    manifest.json's launch command, pods.json's container args), else the source the job observer named."""
    expected = obs.job.get("num_inference_engines")
    if not expected:
        return None
    read = obs.read
    found = locate(obs, re.compile(SETTING_RE.format(value=int(expected))))
    if found is not None:
        rel, lineno, text, _ = found
        return EnginesConfigured(fact_id="engines_configured", expected=int(expected), source=f"{rel}:{lineno}",
                                 evidence=(Evidence(source=rel, line=lineno, text=quote(text)),))
    source = "capture job.json placement" if (read.job_info or {}).get("placement") else "launch configuration"
    return EnginesConfigured(fact_id="engines_configured", expected=int(expected), source=source,
                             evidence=(Evidence(source=capture_rel(read) or "manifest.json",
                                                text=quote(f"num_inference_engines: {expected}"), summary=True),))


def attempt_start(read: BundleRead, engines: list[Engine]) -> float | None:
    """When the current attempt started: the newest attempt boundary line, else the controller's
    record, else (a Slurm chain) the first stats line read from the current leg's own log."""
    starts = [o.ts for o in read.attempt_boundaries if o.ts is not None]
    if starts:
        return max(starts)
    recorded = _current_attempt_start(read)
    if recorded is not None or len(read.leg_ids) < 2:
        return recorded
    current = read.leg_ids[-1]

    def in_current_leg(source: str) -> bool:
        # in a chain layout (Slurm) the bundle's own finelog is its own job's log, the newest leg
        return _slurm_leg(source) == current or (bundle_log_is_current_leg(read.layout)
                                                 and source in ("finelog.log", "finelog.stderr"))
    in_leg = [s.ts for e in engines for s in e.samples if s.ts is not None and in_current_leg(s.source)]
    return min(in_leg) if in_leg else None


def log_capture_problems(read: BundleRead) -> str | None:
    """Evidence problems that can hide log lines: sync or probe failures on log sources (the
    liveness-gated artifacts and probes) and unreadable or missing inputs (gate ``all``)."""
    found = [f"{p.source}: {p.reason}" for p in read.problems if p.gate in ("liveness", "all")]
    return "; ".join(sorted(found)[:5]) or None


def observe(obs: Observation) -> None:
    read, job, param = obs.read, obs.job, obs.param
    configured = configured_engines(obs)
    if configured is not None:
        obs.add(configured)
    common = dict(expected_engines=job.get("num_inference_engines"), log_files=len(read.log_files),
                  log_capture_problems=log_capture_problems(read))
    engines = canonical_engines(read) if read.stats else []
    groups = engine_gpu_groups(read, engines, param)
    for group in groups:
        obs.add(group)
    common.update(gpu_groups=len(groups), gpu_groups_busy_unlogged=sum(
        1 for g in groups if not g.in_logs and (g.max_median_util_pct or 0) > param["gpu_idle_util_pct"]))
    if not read.stats:
        obs.add(EnginesMeasured(fact_id="engines", seen=0, **common))
        return
    newest = max((s.ts for e in engines for s in e.samples if s.ts is not None), default=None)
    since = attempt_start(read, engines)
    window_start = (newest - param["throughput_recent_window_s"]) if newest is not None else None
    per_engine, recent_samples, newest_sample, present = [], [], None, 0
    for engine in engines:
        samples = engine.samples
        last = samples[-1]
        current = since is None or last.ts is None or last.ts >= since
        present += current
        if newest_sample is None or (last.ts or 0) >= (newest_sample.ts or 0):
            newest_sample = last
        window = [s for s in samples if window_start is None or s.ts is None or s.ts >= window_start]
        if window:
            recent_samples.extend(window)
            per_engine.append(median([s.gen_tok_s for s in window]))
        obs.add(EngineMeasured(
            fact_id=f"engine:{engine.label}", identity=engine.label, sources=", ".join(sorted(engine.sources)),
            samples=len(samples), last_stats=iso(last.ts) if last.ts is not None else None,
            lag_s=rounded(newest - last.ts) if newest is not None and last.ts is not None else None,
            last_gen_tok_s=last.gen_tok_s, last_running=last.running, in_current_attempt=current,
            evidence=(Evidence(source=last.source, line=last.line, text=quote(clean_line(last.text))) if last.text else
                      Evidence(source=last.source, line=last.line, text=quote(stats_text(last)), summary=True),)))
    gen_median = median(per_engine)
    persistent = 1.0 - param["queue_persistent_fraction"]
    ratios = [s.waiting / max(s.running, 1) for s in recent_samples]
    demand, supply = job.get("n_concurrent_trials"), None
    if job.get("max_num_seqs"):
        supply = job["max_num_seqs"] * (job.get("num_inference_engines") or len(engines))
    ratio_p = quantile(ratios, persistent)
    waiting_p = quantile([s.waiting for s in recent_samples], persistent)
    # quote the newest sample at least as queued as the persistent level, when the queue is non-empty
    queued = [s for s, r in zip(recent_samples, ratios) if waiting_p and r >= ratio_p and s.waiting >= waiting_p]
    quoted = queued[-1] if queued else newest_sample
    evidence = [Evidence(source=quoted.source, line=quoted.line, text=quote(clean_line(quoted.text)))] if quoted.text else \
        [Evidence(source=quoted.source, line=quoted.line, text=quote(stats_text(quoted)), summary=True)]
    obs.add(EnginesMeasured(
        fact_id="engines", evidence=tuple(evidence), seen=len(engines), fresh=len(per_engine), present=present,
        identities="; ".join(e.label for e in engines),
        unattributed_files=len({src for e in engines if not e.attributed for src in e.sources}),
        deduplicated_lines=sum(1 for e in engines for s in e.samples if s.text and RAY_DEDUP_RE.search(s.text)),
        stats_lines=read.stats_count, eras=",".join(sorted(read.stats_eras)) or None, newest_stats=iso(newest),
        stats_age_s=rounded(obs.evidence_time - newest) if newest is not None else None,
        gen_tok_s_per_engine=rounded(gen_median), running_median=median([s.running for s in recent_samples]),
        waiting_median=median([s.waiting for s in recent_samples]),
        waiting_p_persistent=waiting_p, waiting_over_running_p_persistent=rounded(ratio_p, 2),
        kv_cache_pct_median=median([s.kv_pct for s in recent_samples if s.kv_pct is not None]),
        n_concurrent_trials=demand, max_num_seqs=job.get("max_num_seqs"),
        demand_over_supply=round(demand / supply, 2) if demand and supply else None, **common))
    if gen_median is None:
        return
    table = throughput_floor(obs)
    # the floor's GPU row rests on where the GPU was read: the chosen source, or every disputed one
    gpu_fact = next((f for f in obs.facts if f.kind == "gpu_type"), None)
    gpu_evidence = () if gpu_fact is None or table["floor_assumption"] and not table["floor_fastest_tok_s"] \
        else gpu_fact.evidence[:2] if table["floor_fastest_tok_s"] else gpu_fact.evidence[:1]
    obs.add(ThroughputMeasured(
        fact_id="throughput", evidence=tuple(evidence[:1]) + tuple(gpu_evidence), measured_tok_s=round(gen_median, 1),
        running_median=median([s.running for s in recent_samples]), enforce_eager=job.get("enforce_eager"),
        enforce_eager_source=job.get("enforce_eager_source"), **table))


def throughput_floor(obs: Observation) -> dict:
    """The decode-throughput table row for the model's active parameters, scaled to the GPU's HBM
    bandwidth (rules/tables/*.csv). When the model or the GPU is unknown, the most conservative
    row the tables justify (the lowest floor) is used and the assumption is named. When the GPU
    sources disagree, the floor is that of the slowest GPU named (``floor_fastest_tok_s`` that of
    the fastest), and the disagreement is named."""
    job, catalog = obs.job, obs.catalog
    active, gpu = job.get("active_params_b"), job.get("gpu")
    hbm = {row["gpu"]: row for row in catalog.hbm_bandwidth}
    slowest = min(hbm.values(), key=lambda r: r["hbm_bandwidth_tb_s"])
    assumptions = []
    if active and math.isfinite(active) and active > 0:     # else (garbled too) unknown
        row = min(catalog.decode_table, key=lambda r: abs(math.log(r["active_params_b"] / active)))
    else:
        row = min(catalog.decode_table, key=lambda r: (r["awful_below_tok_s"], -r["active_params_b"]))
        assumptions.append(f"model active parameters unknown: assumed the lowest-floor row {row['model_class']}")
    named = [g for g in (job.get("gpu_classes") or "").split(",") if g] or [gpu]
    rows = sorted((hbm.get(g, slowest) for g in named), key=lambda r: r["hbm_bandwidth_tb_s"])
    gpu_row, fastest_row = rows[0], rows[-1]
    if len(named) > 1:
        assumptions.append(f"GPU sources disagree ({job.get('gpu_disagreement')}): judged against the slowest, {gpu_row['gpu']}")
    elif gpu not in hbm:
        assumptions.append((f"GPU {gpu} not in the bandwidth table" if gpu else "GPU type unknown")
                           + f": assumed the slowest GPU in the table, {gpu_row['gpu']}")
    reference = hbm["H100-80GB-SXM"]["hbm_bandwidth_tb_s"]
    active_b = active or row["active_params_b"]
    single_stream = gpu_row["hbm_bandwidth_tb_s"] * 1e12 / (2 * active_b * 1e9 * 2)   # bf16: HBM_BW / (2 x bytes)
    floor = round(row["awful_below_tok_s"] * gpu_row["hbm_bandwidth_tb_s"] / reference, 1)
    fastest = round(row["awful_below_tok_s"] * fastest_row["hbm_bandwidth_tb_s"] / reference, 1)
    return {"table_row": row["model_class"], "gpu": gpu_row["gpu"], "floor_tok_s": floor,
            "healthy_low_tok_s": round(row["healthy_aggregate_low_tok_s"] * gpu_row["hbm_bandwidth_tb_s"] / reference, 1),
            "single_stream_bound_tok_s": round(single_stream, 1), "table_source": f"{row['source']}; {gpu_row['source']}",
            "floor_assumption": "; ".join(assumptions) or None,
            "gpu_source": job.get("gpu_source") if len(named) == 1 and gpu in hbm else None,
            "floor_fastest_tok_s": fastest if len(named) > 1 and fastest > floor else None}
