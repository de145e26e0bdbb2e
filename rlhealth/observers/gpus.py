"""gpu_role: live GPU polls grouped by role (policy / inference / unknown)."""
from __future__ import annotations

import math

from rlhealth.facts import Evidence, GpuRoleMeasured
from rlhealth.observers.base import Observation, as_key, capture_rel, finite_mean, median
from rlhealth.probes.textio import quote


def _numbers(rows, key):
    """The finite numbers of ``key`` in ``rows`` (a bool, NaN or infinity is no reading)."""
    return [v for r in rows if isinstance(v := r.get(key), (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def observe(obs: Observation) -> None:
    read = obs.read
    if not read.gpu_polls:
        return
    by_role: dict[str, dict[tuple, list[dict]]] = {}
    for row in read.gpu_polls:
        role = row.get("role") if row.get("role") in ("policy", "inference") else "unknown"
        by_role.setdefault(role, {}).setdefault((str(row.get("host")), as_key(row.get("gpu"))), []).append(row)
    for role in sorted(by_role):
        gpus = by_role[role]
        keys = sorted(gpus, key=str)
        utils = [u for k in keys for u in _numbers(gpus[k], "util_pct")]
        mems = [m for k in keys for m in _numbers(gpus[k], "mem_used_mib")]
        fractions = [max(_numbers(gpus[k], "mem_used_mib")) / max(_numbers(gpus[k], "mem_total_mib"))
                     for k in keys if _numbers(gpus[k], "mem_used_mib") and _numbers(gpus[k], "mem_total_mib")
                     and max(_numbers(gpus[k], "mem_total_mib")) > 0]
        medians = [median(_numbers(gpus[k], "util_pct")) for k in keys if _numbers(gpus[k], "util_pct")]
        quiet = min(keys, key=lambda k: (max(_numbers(gpus[k], "util_pct") or [0]), str(k)))
        row = gpus[quiet][-1]
        text = (f'{{"host": "{row.get("host")}", "gpu": {row.get("gpu")}, "role": "{role}", "util_pct": {row.get("util_pct")}, '
                f'"mem_used_mib": {row.get("mem_used_mib")}, "t": "{row.get("t")}"}}')
        obs.add(GpuRoleMeasured(
            fact_id=f"gpu_role:{role}", evidence=(Evidence(source=f"{capture_rel(read)}/gpu_polls.jsonl", text=quote(text)),),
            role=role, gpus=len(gpus), polls=min(len(v) for v in gpus.values()),
            max_util_pct=max(utils) if utils else None, min_mem_used_mib=min(mems) if mems else None,
            max_median_util_pct=max(medians) if medians else None,
            max_mem_used_fraction=round(max(fractions), 3) if fractions else None,
            mean_util_pct=round(mean_util, 1) if (mean_util := finite_mean(utils)) is not None else None))
