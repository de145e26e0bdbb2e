"""Megatron / torch distributed-checkpoint (``.distcp``) validation, read-only and without unpickling.

Layout (reference log-formats §8.3, marin-artifacts §3.6): ``global_step_N/policy/`` holds
``__<rank>_<i>.distcp`` shard files, torch DCP's ``.metadata`` (a pickled
``torch.distributed.checkpoint.metadata.Metadata`` whose ``storage_data`` maps every tensor chunk to
the ``relative_path`` of the shard holding it) and, for Megatron dist-checkpointing,
``metadata.json`` (``{"sharded_backend": ...}``).

``.metadata`` is a pickle from the run: it is NEVER loaded (loading a pickle executes code). Its
opcodes are walked with ``pickletools.genops``, which only decodes, to collect the strings it
holds: the class names (it must be a DCP ``Metadata``), the shard files it references and the
state-dict keys (optimizer state present or not). Checks:
  * metadata present and readable (``.metadata`` decodes and is a DCP Metadata; ``metadata.json``,
    when present, is a JSON object);
  * every shard the metadata references is present and non-empty; a rank with no shard at all is
    named; shards on disk the metadata does not reference are reported (another save's leftovers);
  * optimizer state: the metadata carries ``optimizer`` keys.
"""
from __future__ import annotations

import json
import pickletools
import re
from pathlib import Path

from rlhealth.audit.ranges import gaps as rank_gaps
from rlhealth.audit.safefs import Root
from rlhealth.probes.parse import COUNT

SHARD = re.compile(rf"^__({COUNT})_({COUNT})\.distcp$")
MAX_METADATA_BYTES = 256 << 20
DCP_CLASS = "torch.distributed.checkpoint.metadata"
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING", "GLOBAL"}


def _c(check, status, detail):
    return {"check": check, "status": status, "detail": detail}


def metadata_strings(data: bytes) -> list[str]:
    """Every string literal and global name in a pickle, decoded without executing it."""
    out = []
    for op, arg, _pos in pickletools.genops(data):
        if op.name in _STRING_OPS and isinstance(arg, (str, bytes)):
            out.append(arg.decode("utf-8", "replace") if isinstance(arg, bytes) else arg)
    return out


def has_distcp(root: Root, d: Path) -> bool:
    return any(SHARD.match(p.name) for p in root.listdir(d))


def validate_distcp(root: Root, d: Path) -> tuple[list[dict], dict]:
    """(checks, facts) for a distributed checkpoint directory ``d``.

    facts: ``ranks`` (sorted ranks with a shard), ``optimizer_state`` (present / absent / could not check)."""
    checks: list[dict] = []
    files = {p.name: p for p in root.listdir(d)}
    shards = {n: (int(m[1]), int(m[2])) for n in files if (m := SHARD.match(n))}
    facts = {"ranks": sorted({r for r, _ in shards.values()}), "optimizer_state": "could not check", "shards": len(shards)}
    mj = d / "metadata.json"
    if "metadata.json" in files:
        text = root.read_text(mj, limit=1 << 20)
        try:
            doc = json.loads(text) if text is not None else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            checks.append(_c("distcp_metadata_json", "pass", "metadata.json readable"
                             + (f" (sharded_backend={doc['sharded_backend']})" if isinstance(doc.get("sharded_backend"), str) else "")))
        else:
            checks.append(_c("distcp_metadata_json", "fail", "metadata.json is not a JSON object"))
    meta = d / ".metadata"
    referenced: set[str] | None = None
    if ".metadata" not in files or not root.is_file(meta):
        checks.append(_c("distcp_metadata", "fail", ".metadata (torch DCP index) absent: the shard set cannot be verified"))
    else:
        size = root.size(meta) or 0
        data = root.read_bytes(meta, MAX_METADATA_BYTES) if 0 < size <= MAX_METADATA_BYTES else None
        strings = None
        if data:
            try:
                strings = metadata_strings(data)
            except Exception as exc:  # genops raises ValueError and friends on corrupt input
                checks.append(_c("distcp_metadata", "fail", f".metadata does not decode as a pickle ({type(exc).__name__})"))
        else:
            checks.append(_c("distcp_metadata", "fail", f".metadata is empty or larger than {MAX_METADATA_BYTES} bytes"))
        if strings is not None:
            if not any(DCP_CLASS in s for s in strings):
                checks.append(_c("distcp_metadata", "fail", f".metadata is a pickle but not a {DCP_CLASS}.Metadata"))
            else:
                referenced = {s for s in strings if SHARD.match(s)}
                checks.append(_c("distcp_metadata", "pass", f".metadata readable: a DCP Metadata referencing {len(referenced)} shard file(s)"))
                facts["optimizer_state"] = "present" if any(s.startswith("optimizer") or ".optimizer" in s for s in strings) else "absent"
    if not shards:
        checks.append(_c("rank_shards", "fail", "no __<rank>_<i>.distcp shard files"))
        return checks, facts
    if referenced:
        missing = sorted(n for n in referenced if n not in files or not root.is_file(d / n) or not root.size(d / n))
        ranks_expected = sorted({int(SHARD.match(n)[1]) for n in referenced})
        ranks_missing = sorted({int(SHARD.match(n)[1]) for n in missing})
        extra = sorted(set(shards) - referenced)
        if missing:
            checks.append(_c("rank_shards", "fail", f"{len(missing)} shard file(s) referenced by .metadata missing or empty: "
                             f"{', '.join(missing[:6])} (rank(s) {ranks_missing[:8]} of {len(ranks_expected)})"))
        else:
            checks.append(_c("rank_shards", "pass", f"all {len(referenced)} shard file(s) of {len(ranks_expected)} rank(s) present"))
        if extra:
            checks.append(_c("unreferenced_shards", "warn", f"{len(extra)} .distcp file(s) not in .metadata (another save's leftovers?): "
                             + ", ".join(extra[:6])))
    else:
        ranks = facts["ranks"]
        _, gaps = rank_gaps(ranks, 0, max(ranks), 8)
        if gaps:
            checks.append(_c("rank_shards", "fail", f"rank(s) {gaps[:8]} have no .distcp shard (ranks on disk 0..{max(ranks)})"))
        else:
            checks.append(_c("rank_shards", "warn", f"{len(shards)} shard file(s) for ranks 0..{max(ranks)}; "
                             "no readable .metadata, so the expected shard set is unverified"))
    return checks, facts
