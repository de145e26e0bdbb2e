"""Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output.

Values are read as strings first: ``[N/A]`` / ``[Not Supported]`` become ``None``,
units (``%``, ``MiB``, ``W``) are stripped. Unknown columns are ignored.
"""
from __future__ import annotations

import csv
import functools
import io
import math
import re

from rlhealth.probes.parse import COUNT, read_count

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
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None      # "inf", "nan", 1e999: no reading


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


def parse_gpu_inventory(text: str) -> list[dict]:
    """``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader`` -> ``[{"gpu", "uuid", "name"}]``.

    ``name`` is last so a GPU name containing commas survives.
    """
    rows = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        cells = [c.strip() for c in line.split(",", 2)]
        gpu = read_count(cells[0]) if len(cells) >= 3 else None
        if gpu is None:
            continue
        rows.append({"gpu": gpu, "uuid": cells[1], "name": cells[2], "line": lineno})
    return rows


# The product name as nvidia-smi prints it in a log: a row of its default table
# ("|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |") or ``nvidia-smi -L``
# ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)").
GPU_NAME_LINE_PATTERN = r"(?:\|\s+[0-9]+\s+NVIDIA [A-Za-z0-9]|GPU [0-9]+: NVIDIA [A-Za-z0-9][^()]*\(UUID: )"
_TABLE_ROW_NAME = re.compile(r"\|\s+\d+\s+(NVIDIA [^|]*?)\s+(?:On|Off)\s+\|")
_LIST_NAME = re.compile(r"GPU \d+: (NVIDIA [^()]*?)\s*\(UUID: ")


def gpu_name_from_line(text: str) -> str | None:
    """The GPU product name an nvidia-smi table row or ``nvidia-smi -L`` line names, or None."""
    m = _TABLE_ROW_NAME.search(text) or _LIST_NAME.search(text)
    return m.group(1).strip() if m else None


@functools.lru_cache(maxsize=1)
def gpu_name_table() -> tuple[tuple[re.Pattern, str, str], ...]:
    """rules/tables/gpu_names.csv (data): ``(pattern, hardware class, source)`` in file order; the
    first pattern found in a product name, node label value or launch word names the class."""
    from importlib import resources
    text = resources.files("rlhealth.rules").joinpath("tables", "gpu_names.csv").read_text(encoding="utf-8")
    return tuple((re.compile(row["pattern"], re.I), row["gpu"], row["source"]) for row in csv.DictReader(io.StringIO(text)))


def gpu_class_or_none(name: str) -> str | None:
    """The hardware class a GPU name maps to in rules/tables/gpu_names.csv, or None."""
    for pattern, cls, _ in gpu_name_table():
        if pattern.search(name or ""):
            return cls
    return None


def gpu_class(name: str) -> str:
    """nvidia-smi product name -> the contract's hardware class (``NVIDIA H100 80GB HBM3`` -> ``H100-80GB-SXM``);
    a name the table does not know is returned as written."""
    return gpu_class_or_none(name) or name.strip() or "unknown"


# ---- GPU health: ``nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`` and kernel Xid lines -----

QUERY_INVENTORY_ARG = "--query-gpu=index,uuid,name"
QUERY_APPS_ARG = "--query-compute-apps=" + ",".join(QUERY_APPS_FIELDS)
HEALTH_ARGS = ["-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER"]

_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")
_SECTION = re.compile(r"^(\s*)(\S.*?)\s*$")
_XID = re.compile(rf"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): ({COUNT})\b")

# measurement -> (section path prefix, leaf test); values are summed over the matching leaves
_COUNTERS = {
    "ecc_volatile_uncorrectable": (("ECC Errors", "Volatile"), "uncorrectable"),
    "ecc_volatile_correctable": (("ECC Errors", "Volatile"), "correctable"),
    "ecc_aggregate_uncorrectable": (("ECC Errors", "Aggregate"), "uncorrectable"),
    "ecc_aggregate_correctable": (("ECC Errors", "Aggregate"), "correctable"),
    "retired_pages_single_bit": (("Retired Pages",), "single bit ecc"),
    "retired_pages_double_bit": (("Retired Pages",), "double bit ecc"),
    "remapped_rows_correctable": (("Remapped Rows",), "correctable error"),
    "remapped_rows_uncorrectable": (("Remapped Rows",), "uncorrectable error"),
}
_FLAGS = {
    "retired_pages_pending": (("Retired Pages",), "pending page blacklist"),
    "remapped_rows_pending": (("Remapped Rows",), "pending"),
    "remapping_failure": (("Remapped Rows",), "remapping failure occurred"),
}


def _leaf_matches(path: tuple[str, ...], prefix: tuple[str, ...], leaf: str) -> bool:
    """True for a leaf under ``prefix`` named ``leaf``; ECC counters of the older layout
    (``Volatile > Double Bit > Device Memory``) count as uncorrectable, ``Single Bit`` as correctable."""
    low = [p.lower() for p in path]
    if [p.lower() for p in path[:len(prefix)]] != [p.lower() for p in prefix]:
        return False
    name = low[-1]
    if leaf in ("uncorrectable", "correctable") and prefix[0] == "ECC Errors":
        if "total" in name or "aggregate" == name:
            return False
        parents = low[len(prefix):-1]
        if "double bit" in parents and leaf == "uncorrectable":
            return True
        if "single bit" in parents and leaf == "correctable":
            return True
        return name.endswith(leaf) and not (leaf == "correctable" and name.endswith("uncorrectable"))
    return name == leaf


def parse_gpu_health(text: str) -> list[dict]:
    """Per GPU (in file order): ``{"gpu": index, "bus_id", "<measurement>": int | bool | None, ...,
    "evidence": {"<measurement>": [line numbers]}}`` for the counters and flags above.

    A counter is the sum of its leaves (``N/A`` leaves are skipped; None when every leaf is N/A or
    absent); a flag is True when any of its leaves says ``Yes``. Line numbers are 1-based.
    """
    gpus: list[dict] = []
    cur: dict | None = None
    stack: list[tuple[int, str]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = _GPU_HEADER.match(line)
        if m:
            cur = {"gpu": len(gpus), "bus_id": m.group(1), "evidence": {}}
            for key in _COUNTERS:
                cur[key] = None
            for key in _FLAGS:
                cur[key] = None
            gpus.append(cur)
            stack = []
            continue
        if cur is None:
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        kv = _KV.match(line)
        if kv is None or kv.group(3) == "":
            name = (kv.group(2) if kv else line).strip()
            stack.append((indent, name))
            continue
        path = tuple(name for _, name in stack) + (kv.group(2).strip(),)
        value = kv.group(3).strip()
        for key, (prefix, leaf) in _COUNTERS.items():
            if _leaf_matches(path, prefix, leaf):
                number = _number(value)
                total = (cur[key] or 0) + number if number is not None else None
                if total is not None and math.isfinite(total):      # two leaves of 1e308: no reading
                    cur[key] = int(total)
                    cur["evidence"].setdefault(key, []).append(lineno)
        for key, (prefix, leaf) in _FLAGS.items():
            if _leaf_matches(path, prefix, leaf) and value.lower() in ("yes", "no"):
                cur[key] = bool(cur[key]) or value.lower() == "yes"
                cur["evidence"].setdefault(key, []).append(lineno)
    return gpus


def parse_xid_lines(text: str) -> list[dict]:
    """``NVRM: Xid (PCI:0000:18:00): 79, pid=..., ...`` kernel lines -> ``[{"line", "pci", "xid", "text"}]``."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        m = _XID.search(raw)
        if m:
            out.append({"line": lineno, "pci": m.group(1), "xid": int(m.group(2)), "text": raw.strip()[:500]})
    return out
