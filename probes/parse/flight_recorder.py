"""A bounded, safe reader of PyTorch NCCL flight-recorder dumps and a per-rank summary.

The watchdog writes one file per rank at ``${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-/tmp/nccl_trace_rank_}<rank>``
(log-formats §2.4): a pickle of plain containers (``{"version", "pg_config", "pg_status",
"entries": [{"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id",
"profiling_name", "state", "time_created_ns", "input_sizes", ...}]}``); newer builds can write the
same document as JSON. The pickle is read with an unpickler that refuses every global (no code
runs while reading a file taken from a cluster); files larger than ``MAX_DUMP_BYTES`` or with more
than ``MAX_ENTRIES`` entries are read in part and say so.

``summarize`` measures, it does not judge: per rank, per process group, the last completed
collective sequence number and the first collective that did not complete (its name, sequence
number and state); across ranks, which ranks wait in the same collective and which ranks never
reached it (their last sequence number is behind the group's). PyTorch's ``fr_trace`` analysis,
when torch is installed, is run by the probe next to this summary.
"""
from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

from rlhealth.probes.parse import COUNT, read_count

MAX_DUMP_BYTES = 32 * 1024 * 1024
MAX_ENTRIES = 100_000
_RANK_SUFFIX = re.compile(rf"({COUNT})$")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D401 - pickle hook
        raise pickle.UnpicklingError(f"refused global {module}.{name}: dumps hold plain containers only")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused persistent id")


def load_dump(data: bytes) -> tuple[dict | None, str | None]:
    """(document, error): a dump's bytes as a dict, or why not."""
    if not data:
        return None, "empty file"
    try:
        if data.lstrip()[:1] == b"{":
            doc = json.loads(data.decode("utf-8", "replace"))
        else:
            doc = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - any malformed dump is a reason, never a crash
        return None, f"not a readable flight-recorder dump: {type(exc).__name__}: {str(exc)[:200]}"
    if not isinstance(doc, dict):
        return None, f"not a flight-recorder dump: top level is {type(doc).__name__}"
    return doc, None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _pg_name(entry: dict) -> str:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        name = _text(pg[0])
        desc = _text(pg[1]) if len(pg) > 1 else ""
        return f"{name}:{desc}" if desc and desc != name else name
    if pg is not None:
        return _text(pg)
    return f"pg{entry.get('pg_id', '?')}"


def rank_summary(doc: dict) -> dict:
    """One rank's dump -> ``{"version", "entries", "truncated", "groups": {pg: {...}}}``."""
    entries = doc.get("entries")
    entries = entries if isinstance(entries, list) else []
    truncated = len(entries) > MAX_ENTRIES
    groups: dict[str, dict] = {}
    for entry in entries[:MAX_ENTRIES]:
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        seq = read_count(entry.get("collective_seq_id"))
        if seq is None:
            continue
        pg = _pg_name(entry)
        g = groups.setdefault(pg, {"last_completed_seq": None, "last_enqueued_seq": None, "first_pending": None})
        state = _text(entry.get("state", ""))
        if g["last_enqueued_seq"] is None or seq > g["last_enqueued_seq"]:
            g["last_enqueued_seq"] = seq
        if state == "completed":
            if g["last_completed_seq"] is None or seq > g["last_completed_seq"]:
                g["last_completed_seq"] = seq
        elif g["first_pending"] is None or seq < g["first_pending"]["seq"]:
            g["first_pending"] = {"seq": seq, "collective": _text(entry.get("profiling_name", "?")),
                                  "state": state or "unknown", "record_id": read_count(entry.get("record_id")),
                                  "input_sizes": entry.get("input_sizes") if isinstance(entry.get("input_sizes"), list) else None}
    return {"version": _text(doc.get("version", "?")), "entries": len(entries), "truncated": truncated,
            "groups": {k: groups[k] for k in sorted(groups)}}


def rank_of(file_name: str, prefix_name: str) -> int | None:
    """``nccl_trace_rank_12`` with prefix ``nccl_trace_rank_`` -> 12."""
    rest = file_name[len(prefix_name):] if file_name.startswith(prefix_name) else file_name
    m = _RANK_SUFFIX.search(rest)
    return int(m.group(1)) if m else None


def summarize(files: list[tuple[str, int | None, bytes]]) -> dict:
    """``[(capture-relative path, rank, bytes)]`` -> the summary written as ``flight_recorder/summary.json``.

    ``ranks``: per rank its file, readable or the reason not, and its per-group summary.
    ``stuck``: per process group and pending collective (name, sequence number), the ranks waiting
    in it. ``behind``: per process group, ranks whose last enqueued sequence number is below the
    highest any rank enqueued (they never reached the collective the others wait in), with both numbers.
    """
    ranks: list[dict] = []
    for rel, rank, data in sorted(files, key=lambda f: (f[1] is None, f[1] if f[1] is not None else 0, f[0])):
        truncated_bytes = len(data) > MAX_DUMP_BYTES
        doc, error = load_dump(data[:MAX_DUMP_BYTES]) if not truncated_bytes else (None, f"larger than {MAX_DUMP_BYTES} bytes; not read")
        row: dict[str, Any] = {"rank": rank, "file": rel, "bytes": len(data)}
        if error:
            row["error"] = error
        else:
            row.update(rank_summary(doc))
        ranks.append(row)
    stuck: dict[tuple[str, str, int], list[int]] = {}
    highest: dict[str, int] = {}
    for row in ranks:
        for pg, g in (row.get("groups") or {}).items():
            if g["last_enqueued_seq"] is not None:
                highest[pg] = max(highest.get(pg, g["last_enqueued_seq"]), g["last_enqueued_seq"])
            fp = g["first_pending"]
            if fp is not None and row["rank"] is not None:
                stuck.setdefault((pg, fp["collective"], fp["seq"]), []).append(row["rank"])
    behind = []
    for row in ranks:
        for pg, g in (row.get("groups") or {}).items():
            top = highest.get(pg)
            if top is not None and g["last_enqueued_seq"] is not None and g["last_enqueued_seq"] < top and row["rank"] is not None:
                behind.append({"process_group": pg, "rank": row["rank"], "last_enqueued_seq": g["last_enqueued_seq"],
                               "group_highest_seq": top})
    return {
        "ranks": ranks,
        "readable_ranks": sum(1 for r in ranks if "error" not in r),
        "stuck": [{"process_group": pg, "collective": name, "seq": seq, "ranks": sorted(rs)}
                  for (pg, name, seq), rs in sorted(stuck.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1]))],
        "behind": sorted(behind, key=lambda b: (b["process_group"], b["rank"])),
    }


def summarize_dir(directory: Path, capture_dir: Path, prefix_name: str) -> dict:
    """``summarize`` over the dump files copied into ``directory`` (any depth, e.g. one folder per node)."""
    files = []
    for p in sorted(Path(directory).rglob("*")):
        if p.is_file() and p.name.startswith(prefix_name):
            try:
                with open(p, "rb") as handle:
                    data = handle.read(MAX_DUMP_BYTES + 1)
            except OSError:
                continue
            files.append((p.relative_to(capture_dir).as_posix(), rank_of(p.name, prefix_name), data))
    return summarize(files)
