"""Safetensors shard validation and model-size derivation (reference marin-artifacts §6.3, §6.4).

A safetensors file starts with an 8-byte little-endian u64 header length N, then N bytes of JSON:
``{"<tensor>": {"dtype", "shape", "data_offsets": [start, end]}, "__metadata__": {...}}``, then
the data region. Nothing in a header is trusted: the length is bounded, the JSON must be an
object of well-formed entries, offsets must lie inside the file and match shape x dtype size.
"""
from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from rlhealth.audit.safefs import Root
from rlhealth.probes.parse import COUNT, MAX_COUNT_DIGITS, read_count

MAX_HEADER_BYTES = 64 << 20   # real headers are KBs to a few MB; more is treated as corrupt
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
SHARD_NAME = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.safetensors$")
SIZE_TOLERANCE = 0.15


@dataclass
class Header:
    path: str
    ok: bool
    error: str | None = None
    tensors: dict = field(default_factory=dict)   # name -> (shape tuple, nbytes)
    params: int = 0
    nbytes: int = 0


def read_header(root: Root, p: Path) -> Header:
    disp = root.display(p)
    size = root.size(p)
    if size is None:
        return Header(disp, False, "file missing or not readable")
    if size < 8:
        return Header(disp, False, f"truncated: {size} bytes, shorter than the 8-byte header length")
    head = root.read_bytes(p, 8)
    if head is None or len(head) < 8:
        return Header(disp, False, "header length unreadable")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_BYTES:
        return Header(disp, False, f"header length {n} exceeds the {MAX_HEADER_BYTES}-byte bound; not read")
    if 8 + n > size:
        return Header(disp, False, f"truncated header: declares {n} bytes, file has {size - 8} after the length")
    raw = root.read_bytes(p, n, offset=8)
    if raw is None or len(raw) != n:
        return Header(disp, False, "header bytes unreadable")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return Header(disp, False, f"header is not JSON ({type(exc).__name__})")
    if not isinstance(doc, dict):
        return Header(disp, False, "header JSON is not an object")
    data_len = size - 8 - n
    h = Header(disp, True)
    max_end = 0
    for name, entry in sorted(doc.items()):
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            return Header(disp, False, f"tensor {name!r}: entry is not an object")
        dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            return Header(disp, False, f"tensor {name!r}: malformed shape")
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
                and 0 <= offs[0] <= offs[1]):
            return Header(disp, False, f"tensor {name!r}: malformed data_offsets")
        if offs[1] > data_len:
            return Header(disp, False, f"tensor {name!r}: data_offsets end {offs[1]} beyond the data region ({data_len} bytes); file truncated")
        nbytes = offs[1] - offs[0]
        count = math.prod(shape)
        if read_count(count) is None:      # more elements than MAX_COUNT_DIGITS digits: no real tensor
            return Header(disp, False, f"tensor {name!r}: shape of more than 10**{MAX_COUNT_DIGITS} elements")
        if dtype in DTYPE_BYTES and count * DTYPE_BYTES[dtype] != nbytes:
            return Header(disp, False, f"tensor {name!r}: {dtype}{shape} needs {count * DTYPE_BYTES[dtype]} bytes, offsets span {nbytes}")
        h.tensors[name] = (tuple(shape), nbytes)
        h.params += count
        h.nbytes += nbytes
        max_end = max(max_end, offs[1])
    if max_end != data_len:
        h.ok = False
        h.error = f"data region is {data_len} bytes but tensors end at {max_end}"
    return h


def _check(name, status, detail):
    return {"check": name, "status": status, "detail": detail}


def validate_weights(root: Root, d: Path) -> tuple[list[dict], dict | None]:
    """Checks for a directory holding safetensors weights; returns (checks, model_size or None)."""
    checks: list[dict] = []
    files = [p for p in root.listdir(d) if p.name.endswith(".safetensors")]
    index_path = d / "model.safetensors.index.json"
    headers: dict[str, Header] = {}
    index_total = None
    total_parameters = None
    if root.is_file(index_path):
        text = root.read_text(index_path)
        try:
            index = json.loads(text) if text is not None else None
        except ValueError:
            index = None
        if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
            checks.append(_check("index", "fail", "model.safetensors.index.json unreadable or has no weight_map object"))
            return checks, None
        weight_map = index["weight_map"]
        meta = index.get("metadata") if isinstance(index.get("metadata"), dict) else {}
        index_total = meta.get("total_size")
        total_parameters = meta.get("total_parameters")
        shards = sorted({str(v) for v in weight_map.values()})
        missing = [s for s in shards if "/" in s or s.startswith(".") or not root.is_file(d / s)]
        for s in shards:
            if s not in missing:
                headers[s] = read_header(root, d / s)
        bad = {s: h.error for s, h in headers.items() if not h.ok}
        unresolved = sorted(t for t, s in weight_map.items()
                            if str(s) in missing or (str(s) in headers and headers[str(s)].ok and t not in headers[str(s)].tensors))
        if missing:
            checks.append(_check("shards_present", "fail", f"{len(missing)} of {len(shards)} referenced shard(s) missing: {', '.join(missing)}"))
        else:
            checks.append(_check("shards_present", "pass", f"all {len(shards)} referenced shard(s) present"))
        for s, err in sorted(bad.items()):
            checks.append(_check("shard_header", "fail", f"{s}: {err}"))
        if not bad and headers:
            checks.append(_check("shard_header", "pass", f"{len(headers)} shard header(s) well-formed, data regions complete"))
        if unresolved:
            checks.append(_check("weight_map_resolves", "fail", f"{len(unresolved)} tensor(s) do not resolve to a present shard, e.g. {unresolved[0]}"))
        elif not missing and not bad:
            checks.append(_check("weight_map_resolves", "pass", f"all {len(weight_map)} tensors in weight_map resolve to their shard"))
        extra = sorted(t for s, h in headers.items() if h.ok for t in h.tensors if weight_map.get(t) != s)
        if extra:
            checks.append(_check("index_covers_shards", "fail", f"{len(extra)} tensor(s) in shard headers not mapped to that shard by the index, e.g. {extra[0]}"))
        # naming: model-00001-of-00004 style must agree with the shard count
        named = [SHARD_NAME.match(s) for s in shards]
        if all(named) and shards:
            ns = {int(m["n"]) for m in named}
            idx = sorted(int(m["i"]) for m in named)
            if len(ns) != 1 or ns != {len(shards)} or idx != list(range(1, len(shards) + 1)):
                checks.append(_check("shard_naming", "fail", f"shard names disagree with the shard count ({len(shards)}): {', '.join(shards)}"))
            else:
                checks.append(_check("shard_naming", "pass", f"{len(shards)} shard(s) numbered 1..{len(shards)}"))
        orphan = sorted(p.name for p in files if p.name not in shards)
        if orphan:
            checks.append(_check("unindexed_files", "warn", f"safetensors file(s) not referenced by the index: {', '.join(orphan)}"))
        if not missing and not bad:
            summed = sum(h.nbytes for h in headers.values())
            if not isinstance(index_total, int) or isinstance(index_total, bool):
                checks.append(_check("total_size", "fail", f"index metadata.total_size missing or not an integer ({index_total!r}); tensors sum to {summed} bytes"))
            elif index_total != summed:
                checks.append(_check("total_size", "fail", f"index metadata.total_size={index_total} but shard tensors sum to {summed} bytes"))
            else:
                checks.append(_check("total_size", "pass", f"index total_size {index_total} bytes equals the sum of tensor bytes"))
    elif files:
        if len(files) > 1:
            checks.append(_check("index", "fail", f"{len(files)} safetensors files and no model.safetensors.index.json"))
        for p in files:
            headers[p.name] = read_header(root, p)
        bad = {s: h.error for s, h in headers.items() if not h.ok}
        for s, err in sorted(bad.items()):
            checks.append(_check("shard_header", "fail", f"{s}: {err}"))
        if not bad:
            checks.append(_check("shard_header", "pass", f"{len(headers)} unsharded file(s), header well-formed, data region complete"))
    else:
        checks.append(_check("weights", "fail", "no *.safetensors weights and no model.safetensors.index.json"))
        return checks, None

    good = [h for h in headers.values() if h.ok]
    size = None
    if good and len(good) == len(headers) and not any(c["status"] == "fail" for c in checks if c["check"] in ("shards_present", "index")):
        size = model_size(root, d, good, total_parameters, checks)
    return checks, size


def model_size(root: Root, d: Path, headers: list[Header], total_parameters, checks: list[dict]) -> dict:
    params = sum(h.params for h in headers)
    tensors = {}
    for h in headers:
        tensors.update(h.tensors)
    out = {"parameters": params, "source": "sum of tensor shapes in safetensors headers",
           "billions_rounded": round(params / 1e9), "label": _label(params),
           "estimate": None, "estimate_disagreement": None, "index_total_parameters": None}
    if isinstance(total_parameters, int) and not isinstance(total_parameters, bool):
        out["index_total_parameters"] = total_parameters
        if total_parameters != params:
            checks.append(_check("total_parameters", "warn", f"index metadata.total_parameters={total_parameters} but tensor shapes sum to {params}"))
    cfg = _read_config(root, d)
    if cfg is None:
        return out
    H, L, V = (cfg.get(k) for k in ("hidden_size", "num_hidden_layers", "vocab_size"))
    if all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (H, L, V)):
        est = 12 * L * H * H + 2 * V * H
        dis = abs(params - est) / params if params else None
        out["estimate"] = est
        out["estimate_disagreement"] = None if dis is None else round(dis, 4)
        if dis is None or dis > SIZE_TOLERANCE:
            checks.append(_check("size_crosscheck", "warn",
                                 f"tensors sum to {params} parameters, config estimate 12*L*H^2+2*V*H = {est} "
                                 f"(L={L}, H={H}, V={V}); disagreement {dis:.0%} > 15%; the summed value is used" if dis is not None
                                 else "tensors hold 0 parameters"))
        else:
            checks.append(_check("size_crosscheck", "pass", f"summed {params} vs estimate {est}: {dis:.1%} apart (within 15%)"))
    # direct shape agreement: embeddings vs (vocab_size, hidden_size), layer count vs num_hidden_layers
    mism = []
    for name, (shape, _) in sorted(tensors.items()):
        if name.endswith("embed_tokens.weight") and len(shape) == 2 and isinstance(V, int) and isinstance(H, int):
            if tuple(shape) != (V, H):
                mism.append(f"{name} shape {list(shape)} != [vocab_size={V}, hidden_size={H}]")
    layers = {int(m.group(1)) for name in tensors for m in [re.search(rf"\blayers\.({COUNT})\.", name)] if m}
    if layers and isinstance(L, int) and len(layers) != L:
        mism.append(f"tensors hold {len(layers)} layer(s) but num_hidden_layers={L}")
    if mism:
        checks.append(_check("config_matches_tensors", "fail", "config.json disagrees with the weights: " + "; ".join(mism)))
    elif layers or any(n.endswith("embed_tokens.weight") for n in tensors):
        checks.append(_check("config_matches_tensors", "pass", "embedding shape and layer count agree with config.json"))
    return out


def _label(params: int) -> str:
    b = round(params / 1e9)
    return f"{b}B" if b >= 1 else f"<1B ({params} parameters)"


def _read_config(root: Root, d: Path) -> dict | None:
    text = root.read_text(d / "config.json", limit=4 << 20) if root.is_file(d / "config.json") else None
    if text is None:
        return None
    try:
        cfg = json.loads(text)
    except ValueError:
        return None
    if isinstance(cfg, dict) and isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:
        cfg = cfg["text_config"]
    return cfg if isinstance(cfg, dict) else None


def config_and_tokenizer(root: Root, d: Path) -> list[dict]:
    checks = []
    cfg_path = d / "config.json"
    if not root.is_file(cfg_path):
        checks.append(_check("config_json", "fail", "config.json absent"))
    elif _read_config(root, d) is None:
        checks.append(_check("config_json", "fail", "config.json is not a JSON object"))
    else:
        checks.append(_check("config_json", "pass", "config.json present and parses"))
    toks = sorted(p.name for p in root.listdir(d) if p.name.startswith("tokenizer") and root.is_file(p))
    if toks:
        checks.append(_check("tokenizer", "pass", f"tokenizer file(s): {', '.join(toks)}"))
    else:
        checks.append(_check("tokenizer", "fail", "no tokenizer* file"))
    return checks
