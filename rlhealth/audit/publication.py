"""Publication verification of a downloaded model directory (reference marin-artifacts §6.1, §6.2).

Check mode only: nothing is modified. Secrets are reported by file, line and shape with the line
quoted redacted (a tar member or a parquet row's field is named as ``location``, a parquet row as
``line``); the secret itself is never printed. The same scan covers the trace rebuild
(``rlhealth.audit.traces``).
"""
from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from rlhealth.audit.knowledge import threshold
from rlhealth.audit.rows import scan_rows
from rlhealth.audit.safefs import Root
from rlhealth.audit.weights import config_and_tokenizer, validate_weights
from rlhealth.redact import redact, scan

TRACES_LINK = re.compile(r"^##\s+Training Traces\s*$.*?https://huggingface\.co/datasets/[\w.\-]+/[\w.\-]+", re.M | re.S)
SCAN_LIMIT = 256 << 20
SKIP_SUFFIXES = (".safetensors", ".bin", ".pt", ".arrow", ".gz", ".zip")
PARQUET_SUFFIXES = (".parquet",)
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")



def _artifact(name, status, detail):
    return {"artifact": name, "status": status, "detail": detail}


def _text_findings(text: str, file: str, location: str | None = None) -> list[dict]:
    found = scan(text)
    if not found:
        return []
    lines = text.split("\n")
    out = []
    for m in found:
        quoted = redact(lines[m.line - 1]).strip()
        f = {"file": file, "line": m.line, "shape": m.shape,
             "redacted": quoted if len(quoted) <= 300 else quoted[:299] + "…"}
        if location is not None:
            f["location"] = location
        out.append(f)
    return out


def _scan_tar(root: Root, p: Path, rel: str, findings: list, skipped: list) -> bool:
    """Every text member of a tar (plain or compressed), streamed; binary members are passed over.
    False when the archive could not be read to its end (listed as skipped)."""
    f = root.open_file(p)
    if f is None:
        skipped.append({"file": rel, "reason": "unreadable"})
        return False
    try:
        with f, tarfile.open(fileobj=f, mode="r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                if member.size > SCAN_LIMIT:
                    skipped.append({"file": f"{rel}:{member.name}", "reason": f"larger than {SCAN_LIMIT} bytes; not scanned"})
                    continue
                data = tar.extractfile(member).read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    if b"\x00" not in data[:8192]:
                        skipped.append({"file": f"{rel}:{member.name}", "reason": "not UTF-8"})
                    continue
                findings += _text_findings(text, rel, member.name)
    except (tarfile.TarError, OSError, EOFError) as exc:
        skipped.append({"file": rel, "reason": f"archive read failed ({type(exc).__name__})"})
        return False
    return True


def secret_scan(root: Root, max_depth: int = 8) -> dict:
    """Credential shapes in every file below ``root``: text files by line, tar members by member
    and line, parquet rows by row and field (``rlhealth.audit.rows``). A file that could not be
    read is listed as skipped and leaves the scan incomplete; a secret is never quoted."""
    findings, skipped, scanned, deep = [], [], 0, []
    files = root.walk_files(root.path, max_depth=max_depth, too_deep=deep)
    for d in deep:
        skipped.append({"file": root.rel(d) + "/", "reason": f"more than {max_depth} directory levels deep; not scanned"})
    for p in files:
        rel = root.rel(p)
        if p.name.endswith(PARQUET_SUFFIXES):
            found, rows, why = scan_rows(root, p)
            for f in found:
                findings.append({"file": rel, **f})
            if why:
                skipped.append({"file": rel, "reason": why})
            else:
                scanned += 1
            continue
        if p.name.endswith(TAR_SUFFIXES):
            scanned += _scan_tar(root, p, rel, findings, skipped)
            continue
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
        findings += _text_findings(text, rel)
    unscanned_text = [s for s in skipped if s["reason"] not in ("binary",)]
    status = "findings" if findings else ("incomplete" if unscanned_text else "clean")
    return {"status": status, "files_scanned": scanned, "findings": findings, "skipped": skipped}


def find_trace_manifest(roots: list[tuple[Root, Path]]) -> tuple[Root, Path] | None:
    for root, d in roots:
        for p in (d / "trace_export_manifest.json", d / "training_logs" / "trace_export_manifest.json"):
            if root.is_file(p):
                return root, p
    return None


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def coverage_of(rows: int, results: int) -> float | None:
    """Rows exported per source ``result.json`` (MarinSkyRL ``trace_export_manifest``): an empty
    source with no rows is complete (1.0); rows without any source result have no coverage."""
    return rows / results if results else (1.0 if rows == 0 else None)


def trace_manifest_check(found: tuple[Root, Path] | None, required: bool, *, rows: int | None = None,
                         results: int | None = None, rows_source: str = "", results_source: str = "") -> dict:
    """The export manifest's coverage, recomputed: rows / results from the counts given (the staged
    shards' rows and the extracted trace_jobs/ result.json files, when the caller has them), else
    the manifest's own ``row_count`` / ``result_count``. A written ``result_coverage`` that disagrees
    with the recomputed one fails, naming both; the gate applies to the recomputed value."""
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
    shown = root.display(p)
    if not isinstance(doc, dict):
        return {"status": "present", "path": shown, "result_coverage": None, "passed": False,
                "detail": f"{shown} is not a JSON object, so its result_coverage is missing or not a number"}
    written = doc.get("result_coverage")
    written = None if isinstance(written, bool) or not isinstance(written, (int, float)) else float(written)
    if rows is None and _count(doc.get("row_count")) is not None:
        rows, rows_source = doc["row_count"], "manifest row_count"
    if results is None and _count(doc.get("result_count")) is not None:
        results, results_source = doc["result_count"], "manifest result_count"
    gate = threshold("trace_min_result_coverage_ratio")
    if rows is None or results is None:
        if written is None:
            return {"status": "present", "path": shown, "result_coverage": None, "passed": False,
                    "detail": "result_coverage missing or not a number, and no row and result counts to recompute it from"}
        ok = written >= gate
        return {"status": "present", "path": shown, "result_coverage": written, "passed": ok,
                "detail": f"result_coverage {written:.4g} {'>=' if ok else '<'} {gate} gate (as written: no row and result "
                          "counts to recompute it from)"}
    cov = coverage_of(rows, results)
    basis = f"{rows} row(s) ({rows_source}) / {results} result.json ({results_source})"
    if cov is None:
        return {"status": "present", "path": shown, "result_coverage": None, "passed": False,
                "detail": f"{basis}: rows without any source result.json, so no coverage"}
    if written is not None and abs(written - cov) > threshold("trace_result_coverage_tolerance_ratio"):
        return {"status": "present", "path": shown, "result_coverage": cov, "passed": False,
                "detail": f"result_coverage={written:.4g} written in {shown}, but {basis} = {cov:.4g}: "
                          "the manifest does not describe these rows"}
    ok = cov >= gate
    return {"status": "present", "path": shown, "result_coverage": cov, "passed": ok,
            "detail": f"recomputed result_coverage {cov:.4g} {'>=' if ok else '<'} {gate} gate ({basis})"}


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
