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

Per process group (``groups``) the summary follows what ``fr_trace`` and NVIDIA's resiliency
extension read from the same dumps: the group's members are the ``ranks`` its ``pg_config`` entry
lists (a dump's own roster, so a member that wrote no entry is still known); the stuck collective
is the lowest sequence number a member has not completed; ``in_collective`` are the members with an
entry for it; ``absent`` are members whose dump was read and which never enqueued it (their last
enqueued sequence number, from the entries and ``pg_status.last_enqueued_collective``, is below
it: a host-side stall); ``lagging`` are members that enqueued it but whose entry is in an earlier
state (``scheduled``) than the most advanced member's (``started``/``completed``: the rank whose
GPU work never ran); ``no_dump`` are members whose dump is missing or unreadable (undecided).
``suspected`` = absent + lagging. ``node`` of a rank is the folder its dump was stored in
(``dumps/<node>/<file>``).
"""
from __future__ import annotations

import ast
import io
import json
import pickle
import re
from pathlib import Path, PurePosixPath
from typing import Any

from rlhealth.probes.parse import COUNT, read_count

MAX_DUMP_BYTES = 32 * 1024 * 1024
MAX_ENTRIES = 100_000
MAX_MEMBERS = 100_000
MAX_PENDING_KEPT = 64
STATE_RANK = {"scheduled": 0, "started": 1, "completed": 2}
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
    pg_ids: dict[str, str] = {}
    for entry in entries[:MAX_ENTRIES]:
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        seq = read_count(entry.get("collective_seq_id"))
        if seq is None:
            continue
        pg = _pg_name(entry)
        g = groups.setdefault(pg, {"last_completed_seq": None, "last_enqueued_seq": None, "first_pending": None,
                                   "pending": {}})
        state = _text(entry.get("state", ""))
        pg_id = _text(entry.get("pg_id")) if entry.get("pg_id") is not None else None
        if pg_id is not None:
            pg_ids.setdefault(pg_id, pg)
        if g["last_enqueued_seq"] is None or seq > g["last_enqueued_seq"]:
            g["last_enqueued_seq"] = seq
        if state == "completed":
            if g["last_completed_seq"] is None or seq > g["last_completed_seq"]:
                g["last_completed_seq"] = seq
        else:
            if len(g["pending"]) < MAX_PENDING_KEPT or seq in g["pending"]:
                g["pending"][seq] = state or "unknown"
        if state != "completed" and (g["first_pending"] is None or seq < g["first_pending"]["seq"]):
            g["first_pending"] = {"seq": seq, "collective": _text(entry.get("profiling_name", "?")),
                                  "state": state or "unknown", "record_id": read_count(entry.get("record_id")),
                                  "input_sizes": entry.get("input_sizes") if isinstance(entry.get("input_sizes"), list) else None}
    members = _members(doc)
    for pg_id, status in (doc.get("pg_status") if isinstance(doc.get("pg_status"), dict) else {}).items():
        pg = pg_ids.get(_text(pg_id)) or (_text(pg_id) if _text(pg_id) in members else None)
        enqueued = read_count(status.get("last_enqueued_collective")) if isinstance(status, dict) else None
        completed = read_count(status.get("last_completed_collective")) if isinstance(status, dict) else None
        if pg is None or (enqueued is None and completed is None):
            continue
        g = groups.setdefault(pg, {"last_completed_seq": None, "last_enqueued_seq": None, "first_pending": None, "pending": {}})
        if enqueued is not None and (g["last_enqueued_seq"] is None or enqueued > g["last_enqueued_seq"]):
            g["last_enqueued_seq"] = enqueued
        if completed is not None and (g["last_completed_seq"] is None or completed > g["last_completed_seq"]):
            g["last_completed_seq"] = completed
    for g in groups.values():
        g["pending"] = {str(k): g["pending"][k] for k in sorted(g["pending"])}
    return {"version": _text(doc.get("version", "?")), "entries": len(entries), "truncated": truncated,
            "groups": {k: groups[k] for k in sorted(groups)}, "members": members}


def _rank_list(value: Any) -> list[int] | None:
    """A ``pg_config`` ``ranks`` value (``"[0, 1]"`` as PyTorch writes it, or a list) as counts."""
    if isinstance(value, (bytes, str)):
        text = _text(value)
        if len(text) > 16 * MAX_MEMBERS:
            return None
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(value, (list, tuple)) or len(value) > MAX_MEMBERS:
        return None
    ranks = [read_count(r) for r in value]
    return sorted(set(ranks)) if all(r is not None for r in ranks) else None


def _members(doc: dict) -> dict[str, list[int]]:
    """Process group name (as ``_pg_name`` spells it) -> its member ranks, from ``pg_config``."""
    config = doc.get("pg_config")
    out: dict[str, list[int]] = {}
    for key, cfg in (config.items() if isinstance(config, dict) else []):
        if not isinstance(cfg, dict):
            continue
        ranks = _rank_list(cfg.get("ranks"))
        if ranks is None:
            continue
        name = _text(cfg.get("name", key))
        desc = _text(cfg.get("desc", "")) if cfg.get("desc") is not None else ""
        out[f"{name}:{desc}" if desc and desc != name else name] = ranks
    return out


def _node_of(rel: str) -> str | None:
    parent = PurePosixPath(rel).parent.name
    return parent if parent and parent != "dumps" else None


def group_analysis(ranks: list[dict]) -> list[dict]:
    """Per process group: members, the stuck collective, and which members are in it, lag in it,
    never enqueued it, or left no readable dump (see the module docstring)."""
    readable = [r for r in ranks if "error" not in r and r["rank"] is not None]
    dumped = {r["rank"] for r in readable}
    declared: dict[str, set[int]] = {}
    conflicts: dict[str, bool] = {}
    for row in readable:
        for pg, members in (row.get("members") or {}).items():
            if pg in declared and declared[pg] != set(members):
                conflicts[pg] = True
            declared.setdefault(pg, set(members))
    names = sorted(set(declared) | {pg for row in readable for pg in (row.get("groups") or {})})
    out = []
    for pg in names:
        info = {row["rank"]: (row.get("groups") or {}).get(pg) for row in readable}
        pendings = [(g["first_pending"]["seq"], g["first_pending"]["collective"]) for g in info.values()
                    if g and g.get("first_pending")]
        if not pendings:
            continue
        seq, collective = min(pendings)
        members = declared.get(pg) or {r for r, g in info.items() if g}
        state_of: dict[int, int] = {}
        absent = []
        for rank in sorted(members & dumped):
            g = info.get(rank)
            if g and g.get("last_completed_seq") is not None and g["last_completed_seq"] >= seq:
                state_of[rank] = STATE_RANK["completed"]
            elif g and str(seq) in (g.get("pending") or {}):
                state_of[rank] = STATE_RANK.get(g["pending"][str(seq)], 0)
            elif g and g.get("last_enqueued_seq") is not None and g["last_enqueued_seq"] >= seq:
                state_of[rank] = 0      # enqueued (pg_status) but its entry left the ring buffer
            else:
                absent.append(rank)
        top = max(state_of.values(), default=0)
        lagging = sorted(r for r, s in state_of.items() if s < top)
        nodes = {r["rank"]: r.get("node") for r in readable if r.get("node")}
        suspected = sorted(set(absent) | set(lagging))
        out.append({"process_group": pg, "members": sorted(members), "members_from": "pg_config" if pg in declared else "entries",
                    "members_conflict": bool(conflicts.get(pg)), "collective": collective, "seq": seq,
                    "in_collective": sorted(state_of), "lagging": lagging, "absent": sorted(absent),
                    "no_dump": sorted(members - dumped), "suspected": suspected,
                    "suspected_nodes": {str(r): nodes[r] for r in suspected if r in nodes}})
    return out


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
        if _node_of(rel):
            row["node"] = _node_of(rel)
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
    groups = group_analysis(ranks)
    return {
        "groups": groups,
        "suspected": sorted({r for g in groups for r in g["suspected"]}),
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
