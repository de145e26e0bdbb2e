"""Publication verification of a downloaded model directory (reference marin-artifacts §6.1, §6.2).

Check mode only: nothing is modified. Secrets are reported by file, line and shape with the line
quoted redacted; the secret itself is never printed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from rlhealth.audit.knowledge import threshold
from rlhealth.audit.safefs import Root
from rlhealth.audit.weights import config_and_tokenizer, validate_weights
from rlhealth.redact import redact, scan

TRACES_LINK = re.compile(r"^##\s+Training Traces\s*$.*?https://huggingface\.co/datasets/[\w.\-]+/[\w.\-]+", re.M | re.S)
SCAN_LIMIT = 256 << 20
SKIP_SUFFIXES = (".safetensors", ".bin", ".pt", ".parquet", ".arrow", ".gz", ".tar", ".zip")



def _artifact(name, status, detail):
    return {"artifact": name, "status": status, "detail": detail}


def secret_scan(root: Root) -> dict:
    findings, skipped, scanned = [], [], 0
    for p in root.walk_files(root.path):
        rel = root.rel(p)
        if p.name.endswith(SKIP_SUFFIXES):
            head = root.read_bytes(p, 8192) or b""
            if b"\x00" in head or p.name.endswith(".safetensors"):
                skipped.append({"file": rel, "reason": "binary"})
                continue
        size = root.size(p)
        if size is None:
            skipped.append({"file": rel, "reason": "unreadable"})
            continue
        if size > SCAN_LIMIT:
            skipped.append({"file": rel, "reason": f"larger than {SCAN_LIMIT} bytes; not scanned"})
            continue
        data = root.read_bytes(p, SCAN_LIMIT)
        if data is None:
            skipped.append({"file": rel, "reason": "unreadable"})
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append({"file": rel, "reason": "binary" if b"\x00" in data[:8192] else "not UTF-8"})
            continue
        scanned += 1
        if not scan(text):
            continue
        lines = text.split("\n")
        for m in scan(text):
            quoted = redact(lines[m.line - 1]).strip()
            findings.append({"file": rel, "line": m.line, "shape": m.shape,
                             "redacted": quoted if len(quoted) <= 300 else quoted[:299] + "…"})
    unscanned_text = [s for s in skipped if s["reason"] not in ("binary",)]
    status = "findings" if findings else ("incomplete" if unscanned_text else "clean")
    return {"status": status, "files_scanned": scanned, "findings": findings, "skipped": skipped}


def find_trace_manifest(roots: list[tuple[Root, Path]]) -> tuple[Root, Path] | None:
    for root, d in roots:
        for p in (d / "trace_export_manifest.json", d / "training_logs" / "trace_export_manifest.json"):
            if root.is_file(p):
                return root, p
    return None


def trace_manifest_check(found: tuple[Root, Path] | None, required: bool) -> dict:
    if found is None:
        return {"status": "absent" if required else "not applicable", "path": None, "result_coverage": None,
                "passed": None if not required else False,
                "detail": "trace_export_manifest.json not found" if required else "standard run: no trace dataset"}
    root, p = found
    text = root.read_text(p)
    try:
        doc = json.loads(text) if text is not None else None
    except ValueError:
        doc = None
    cov = doc.get("result_coverage") if isinstance(doc, dict) else None
    if isinstance(cov, bool) or not isinstance(cov, (int, float)):
        return {"status": "present", "path": root.display(p), "result_coverage": None, "passed": False,
                "detail": "result_coverage missing or not a number"}
    gate = threshold("trace_min_result_coverage_ratio")
    ok = cov >= gate
    return {"status": "present", "path": root.display(p), "result_coverage": cov, "passed": ok,
            "detail": f"result_coverage {cov:.4g} {'>=' if ok else '<'} {gate} gate"}


def verify_published(root: Root, mode: str, extra_manifest_roots: list[tuple[Root, Path]]) -> dict:
    d = root.path
    traces_required = mode != "standard"
    arts = []
    weights = [p.name for p in root.listdir(d) if p.name.endswith(".safetensors") and root.is_file(p)]
    nested = [root.rel(p) for p in root.walk_files(d, max_depth=3) if p.name.endswith(".safetensors") and p.parent != d]
    if weights:
        arts.append(_artifact("weights", "present", f"{len(weights)} safetensors file(s) at the repository root"))
    else:
        arts.append(_artifact("weights", "absent", "no *.safetensors at the root" + (f" (nested only: {', '.join(nested[:3])})" if nested else "")))
    ct = config_and_tokenizer(root, d)
    ok = all(c["status"] == "pass" for c in ct)
    arts.append(_artifact("tokenizer_configuration", "present" if ok else "absent", "; ".join(c["detail"] for c in ct)))
    logs = [p for p in root.walk_files(d / "training_logs")] if root.is_dir(d / "training_logs") else []
    arts.append(_artifact("training_logs", "present" if logs else "absent",
                          f"{len(logs)} file(s) under training_logs/" if logs else "training_logs/ missing or empty"))
    readme = root.read_text(d / "README.md") if root.is_file(d / "README.md") else None
    link = TRACES_LINK.search(readme) if readme else None
    if link:
        arts.append(_artifact("training_traces_link", "present", "README.md: " + redact(link.group(0).split("\n")[-1].strip())[:200]))
    elif traces_required:
        arts.append(_artifact("training_traces_link", "absent", "README.md has no '## Training Traces' section linking https://huggingface.co/datasets/..."))
    else:
        arts.append(_artifact("training_traces_link", "not applicable", "standard run: no trace dataset"))
    weight_checks, size = validate_weights(root, d) if weights else ([], None)
    manifest = trace_manifest_check(find_trace_manifest([(root, d)] + extra_manifest_roots), traces_required)
    missing = [a["artifact"] for a in arts if a["status"] == "absent"]
    return {"path": str(d), "artifacts": arts, "weight_checks": weight_checks, "model_size": size,
            "secret_scan": secret_scan(root), "trace_export": manifest,
            "complete": not missing,
            "message": f"Incomplete RL model publication: missing {', '.join(missing)}" if missing else "all applicable publication artifacts present"}
