"""engines and throughput: vLLM stats over the recent stats window, and the hardware table's row."""
from __future__ import annotations

import math

from rlhealth.facts import EnginesMeasured, Evidence, ThroughputMeasured
from rlhealth.observers.base import Observation, median, quantile, rounded
from rlhealth.probes.parse.timestamps import iso
from rlhealth.probes.textio import clean_line, quote


def stats_text(sample) -> str:
    """A stats sample restated (a summary of the parsed line, not the line itself)."""
    return (f"Engine {sample.engine.rsplit('#', 1)[-1] if '#' in sample.engine else ''}: "
            f"Avg generation throughput: {sample.gen_tok_s} tokens/s, Running: {sample.running} reqs, "
            f"Waiting: {sample.waiting} reqs" + (f", GPU KV cache usage: {sample.kv_pct}%" if sample.kv_pct is not None else ""))


def observe(obs: Observation) -> None:
    read, job, param = obs.read, obs.job, obs.param
    if not read.stats:
        obs.add(EnginesMeasured(fact_id="engines", seen=0, expected_engines=job.get("num_inference_engines")))
        return
    newest = max((s.ts for q in read.stats.values() for s in q if s.ts is not None), default=None)
    window_start = (newest - param["throughput_recent_window_s"]) if newest is not None else None
    per_engine, recent_samples, newest_sample = [], [], None
    for name in sorted(read.stats):
        samples = list(read.stats[name])
        last = samples[-1]
        if newest_sample is None or (last.ts or 0) >= (newest_sample.ts or 0):
            newest_sample = last
        window = [s for s in samples if window_start is None or s.ts is None or s.ts >= window_start]
        if window:
            recent_samples.extend(window)
            per_engine.append(median([s.gen_tok_s for s in window]))
    gen_median = median(per_engine)
    persistent = 1.0 - param["queue_persistent_fraction"]
    ratios = [s.waiting / max(s.running, 1) for s in recent_samples]
    demand, supply = job.get("n_concurrent_trials"), None
    if job.get("max_num_seqs"):
        supply = job["max_num_seqs"] * (job.get("num_inference_engines") or len(read.stats))
    ratio_p = quantile(ratios, persistent)
    waiting_p = quantile([s.waiting for s in recent_samples], persistent)
    # quote the newest sample at least as queued as the persistent level, when the queue is non-empty
    queued = [s for s, r in zip(recent_samples, ratios) if waiting_p and r >= ratio_p and s.waiting >= waiting_p]
    quoted = queued[-1] if queued else newest_sample
    evidence = [Evidence(source=quoted.source, line=quoted.line, text=quote(clean_line(quoted.text)))] if quoted.text else \
        [Evidence(source=quoted.source, line=quoted.line, text=quote(stats_text(quoted)), summary=True)]
    obs.add(EnginesMeasured(
        fact_id="engines", evidence=tuple(evidence), seen=len(read.stats), fresh=len(per_engine),
        stats_lines=read.stats_count, eras=",".join(sorted(read.stats_eras)) or None, newest_stats=iso(newest),
        stats_age_s=rounded(obs.evidence_time - newest) if newest is not None else None,
        gen_tok_s_per_engine=rounded(gen_median), running_median=median([s.running for s in recent_samples]),
        waiting_median=median([s.waiting for s in recent_samples]),
        waiting_p_persistent=waiting_p, waiting_over_running_p_persistent=rounded(ratio_p, 2),
        kv_cache_pct_median=median([s.kv_pct for s in recent_samples if s.kv_pct is not None]),
        expected_engines=job.get("num_inference_engines"), n_concurrent_trials=demand,
        max_num_seqs=job.get("max_num_seqs"),
        demand_over_supply=round(demand / supply, 2) if demand and supply else None))
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
    if active:
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
