"""Series for the HTML report's plots, measured from one bundle read (no judgement here).

``collect_series`` is called only when an HTML report is asked for. Every series is bounded
(the bundle reader already keeps bounded samples; here at most ``MAX_POINTS`` per series), and
every value is a plain number so the result is JSON-safe.
"""
from __future__ import annotations

import math
from typing import Any

MAX_POINTS = 2000
METRICS = ("reward", "entropy", "tis_imp_ratio_mean", "grad_norm")
"""Semantic metric names (aliases resolved by the trainer parser), in plot order."""


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _thin(rows: list, limit: int = MAX_POINTS) -> list:
    if len(rows) <= limit:
        return rows
    stride = math.ceil(len(rows) / limit)
    return rows[::stride] + ([rows[-1]] if (len(rows) - 1) % stride else [])


def metric_series(read) -> dict[str, Any]:
    """Per-step training metrics and ``timing/*`` phase durations (first record of a step wins)."""
    from rlhealth.observers import spans
    from rlhealth.probes.parse import trainer as tp

    records: dict[int, Any] = {}
    for rec in getattr(read, "metric_records", None) or []:
        records.setdefault(rec.step, rec)
    steps = _thin(sorted(records))
    metrics = {name: [_num(tp.metric(records[s].metrics, name)) for s in steps] for name in METRICS}
    metrics = {k: v for k, v in metrics.items() if any(x is not None for x in v)}
    per_step = spans.step_rows([records[s].metrics for s in steps])
    phases = spans.stacked_parts(per_step)
    if not phases:
        phase_names = sorted({k for row in per_step for k in row})
        phases = {p: [row.get(p) for row in per_step] for p in phase_names}
    phase_steps = steps
    if not phases and getattr(read, "phase_costs", None):
        # phase timers from the trainer log ("Finished <phase> ... took N s"), one value per finished step
        costs = {p: list(v) for p, v in read.phase_costs.items() if p != "step" and v}
        n = max((len(v) for v in costs.values()), default=0)
        phase_steps = list(range(1, n + 1))
        phases = {p: [None] * (n - len(v)) + [_num(x) for x in v] for p, v in sorted(costs.items())}
    return {"steps": steps, "metrics": metrics, "phase_steps": phase_steps, "phases": phases}


def throughput_series(read) -> dict[str, list[list[float]]]:
    """Per engine (one canonical identity per engine, rlhealth.observers.engines): ``[[epoch seconds,
    generation tok/s], ...]`` from the kept vLLM stats samples."""
    from rlhealth.observers.engines import canonical_engines
    out: dict[str, list[list[float]]] = {}
    engines = canonical_engines(read) if getattr(read, "stats", None) else []
    for engine, samples in ((e.label, e.samples) for e in engines):
        rows = [[float(s.ts), float(s.gen_tok_s)] for s in samples
                if getattr(s, "ts", None) is not None and _num(getattr(s, "gen_tok_s", None)) is not None]
        if rows:
            out[engine] = _thin(sorted(rows))
    return out


def trial_series(read) -> dict[str, Any] | None:
    s = getattr(read, "trials", None)
    if s is None:
        return None
    rewards = [r for r in (_num(x) for x in s.rewards) if r is not None]
    exceptions = sum(s.exceptions.values())
    outcomes = {"reward > 0": sum(1 for r in rewards if r > 0), "reward = 0": sum(1 for r in rewards if r <= 0),
                "exception": exceptions, "unreadable": s.unreadable, "running": max(0, s.started - s.completed)}
    return {"rewards": rewards, "outcomes": outcomes, "exceptions": dict(s.exceptions.most_common(8))}


def gpu_series(read) -> list[dict[str, Any]]:
    """Live GPU polls: one row per GPU per poll (time as epoch seconds)."""
    from rlhealth.probes.parse.timestamps import parse_iso

    rows = []
    for p in getattr(read, "gpu_polls", None) or []:
        t = parse_iso(p.get("t")) if isinstance(p.get("t"), str) else None
        if t is None:
            continue
        rows.append({"t": t, "host": str(p.get("host")), "gpu": p.get("gpu"), "role": str(p.get("role") or "unknown"),
                     "util_pct": _num(p.get("util_pct")), "mem_used_mib": _num(p.get("mem_used_mib")),
                     "mem_total_mib": _num(p.get("mem_total_mib"))})
    return _thin(rows, 20 * MAX_POINTS)


def progress_series(read, obs, report, result=None) -> dict[str, Any] | None:
    """Trainer progress over time: ``points`` ``[[epoch seconds, step], ...]`` of the dated metric
    records (first record of a step), the newest progress line (``last_progress``), the freshness
    limit the rules applied to its age (``limit_s``, from the derived fact that measured it, None
    when no rule did), the newest evidence time the age is measured at and the evaluation time."""
    from rlhealth.probes.parse.timestamps import parse_iso

    records: dict[int, Any] = {}
    for rec in getattr(read, "metric_records", None) or []:
        records.setdefault(rec.step, rec)
    points = sorted([float(r.ts), float(step)] for step, r in records.items() if _num(r.ts) is not None)
    last = getattr(obs, "last_progress", None)
    last_ts = _num(getattr(last, "ts", None))
    if not points and last_ts is None:
        return None
    limit = None
    for d in (getattr(result, "derived", None) or []):
        fields = getattr(d, "fields", None) or {}
        if _num(fields.get("limit_s")) is not None and _num(fields.get("age_s")) is not None:
            limit = _num(fields["limit_s"])
            break
    evaluated = parse_iso(report.evaluated_at) if isinstance(report.evaluated_at, str) else None
    return {"points": _thin(points), "last_progress": last_ts, "limit_s": limit,
            "evidence_time": _num(getattr(obs, "evidence_time", None)), "evaluated": evaluated}


def collect_series(read, obs, report, result=None) -> dict[str, Any]:
    throughput_fact = next((f for f in obs.facts if f.kind == "throughput"), None)
    floor = _num(getattr(throughput_fact, "floor_tok_s", None)) if throughput_fact is not None else None
    return {"training": metric_series(read), "window": report.metric_window,
            "progress": progress_series(read, obs, report, result),
            "throughput": throughput_series(read), "floor_tok_s": floor,
            "floor_row": getattr(throughput_fact, "table_row", None) if throughput_fact is not None else None,
            "trials": trial_series(read), "gpu": gpu_series(read)}
