"""Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output.

Values are read as strings first: ``[N/A]`` / ``[Not Supported]`` become ``None``,
units (``%``, ``MiB``, ``W``) are stripped. Unknown columns are ignored.
"""
from __future__ import annotations

import re

_NA = {"[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", ""}
_UNIT = re.compile(r"\s*(%|MiB|W|GiB|MHz|C)\s*$")

QUERY_GPU_FIELDS = ["index", "utilization.gpu", "memory.used", "memory.total", "power.draw"]
QUERY_GPU_ARG = "--query-gpu=" + ",".join(QUERY_GPU_FIELDS)
QUERY_APPS_FIELDS = ["gpu_uuid", "pid", "process_name", "used_memory"]


def _number(value: str) -> float | None:
    value = value.strip()
    if value in _NA:
        return None
    value = _UNIT.sub("", value)
    try:
        return float(value)
    except ValueError:
        return None


def parse_query_gpu(text: str, fields: list[str] | None = None) -> list[dict]:
    """Rows of ``{"gpu", "util_pct", "mem_used_mib", "mem_total_mib", "power_w"}``.

    A header line (``index, utilization.gpu [%], ...``) overrides ``fields``.
    Lines that do not parse (driver errors, blank lines) are skipped.
    """
    fields = list(fields or QUERY_GPU_FIELDS)
    rows = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if cells and cells[0].startswith("index"):
            fields = [re.sub(r"\s*\[.*\]$", "", c) for c in cells]
            continue
        if len(cells) != len(fields):
            continue
        record = dict(zip(fields, cells))
        index = _number(record.get("index", ""))
        if index is None:
            continue
        mem_used = _number(record.get("memory.used", ""))
        mem_total = _number(record.get("memory.total", ""))
        rows.append({
            "gpu": int(index),
            "util_pct": _number(record.get("utilization.gpu", "")),
            "mem_used_mib": int(mem_used) if mem_used is not None else None,
            "mem_total_mib": int(mem_total) if mem_total is not None else None,
            "power_w": _number(record.get("power.draw", "")),
        })
    return rows


def parse_compute_apps(text: str) -> list[dict]:
    """Rows of ``{"gpu_uuid", "pid", "process_name", "used_memory_mib"}`` from
    ``--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader``."""
    rows = []
    for raw in text.splitlines():
        cells = [c.strip() for c in raw.split(",")]
        if len(cells) < 4 or cells[0].startswith("gpu_uuid"):
            continue
        pid = _number(cells[1])
        if pid is None:
            continue
        mem = _number(cells[-1])
        rows.append({"gpu_uuid": cells[0], "pid": int(pid), "process_name": ",".join(cells[2:-1]),
                     "used_memory_mib": int(mem) if mem is not None else None})
    return rows
