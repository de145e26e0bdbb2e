"""Trace preservation checks: the durable trace rebuild (``--trace-root``) and the monitor mirror.

Seed 002 step 5 and reference marin-artifacts §1.2, §3.4, §3.5. The trace rebuild's root holds
``<job>_trace_jobs.tar`` (``sync_rl_logs.py --trace-jobs``, the source of record), its sync
manifest (any ``*manifest*.json`` beside the tar carrying ``objects_skipped``; non-zero means the
mirror is evidence-only), the extracted ``trace_jobs/`` and, when the export was staged with
``--stage-only``, the staged dataset tree with ``trace_export_manifest.json`` and deterministic
``train-{idx:05d}.parquet`` shards. The monitor's ``trace_jobs/`` in the bundle mirrors only the
newest traces fleet-wide: it is flagged as a sample, never taken as the source of record.

The export's coverage is recomputed, never trusted as written: the rows of the staged shards (their
parquet footers) over the ``result.json`` files of the extracted ``trace_jobs/``; a manifest whose
``result_coverage`` or ``row_count`` disagrees with them fails. Every file under the root -- the
tar's members, the extracted trials, the staged parquet rows -- is scanned for credential shapes
(``publication.secret_scan``), never echoing one.

Python measures (counts, names, coverage); the gate values and names are data (``rules/audit.yaml``).
Every check is ``{"check", "status", "path", "detail"}`` with status ``pass`` / ``fail`` / ``absent``
/ ``could not check`` / ``sample``.
"""
from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

from rlhealth.audit.knowledge import audit_rules, threshold
from rlhealth.audit.publication import secret_scan, trace_manifest_check
from rlhealth.audit.rows import row_count
from rlhealth.audit.safefs import Root

SEARCH_DEPTH = 3   # staged tree below the trace root: <root>/<staging>/<data>/...
SCAN_DEPTH = 16    # the secret scan's walk: trace_jobs/<job>/<trial>/agent/<episode>/... (deeper is reported, not read)


def _check(check: str, status: str, detail: str, path: str | None = None) -> dict:
    return {"check": check, "status": status, "path": path, "detail": detail}


def _json(root: Root, p: Path):
    text = root.read_text(p, limit=64 << 20)
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def _skipped_count(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return len(value)
    return None


def count_results(root: Root, d: Path) -> tuple[int, int]:
    """(trial dirs, trial dirs holding result.json) directly under ``d`` (one wrapper level allowed)."""
    trials = [p for p in root.listdir(d) if root.is_dir(p)]
    results = sum(1 for t in trials if root.is_file(t / "result.json"))
    if results == 0 and len(trials) == 1:
        inner = [p for p in root.listdir(trials[0]) if root.is_dir(p)]
        inner_results = sum(1 for t in inner if root.is_file(t / "result.json"))
        if inner_results:
            return len(inner), inner_results
    return len(trials), results


def _find_dirs_with(root: Root, base: Path, name: str, skip: str) -> list[Path]:
    """Directories at depth <= SEARCH_DEPTH below ``base`` holding file ``name`` (``skip`` not entered)."""
    found, frontier = [], [base]
    for _ in range(SEARCH_DEPTH + 1):
        nxt = []
        for d in frontier:
            if root.is_file(d / name):
                found.append(d)
            nxt += [p for p in root.listdir(d) if p.name != skip and root.is_dir(p)]
        frontier = nxt
    return sorted(found)


def check_trace_root(root: Root) -> dict:
    rules = audit_rules()["trace_rebuild"]
    base = root.path
    checks: list[dict] = []
    top = root.listdir(base)
    # 1. the --trace-jobs tar (source of record)
    tars = [p for p in top if p.name.endswith(tuple(rules["tar_suffixes"])) and root.is_file(p)]
    if tars:
        checks.append(_check("trace_tar", "pass", ", ".join(f"{root.rel(p)} ({root.size(p)} bytes)" for p in tars),
                             root.display(tars[0])))
    else:
        checks.append(_check("trace_tar", "absent", f"no *{' / *'.join(rules['tar_suffixes'])} in the trace root"))
    # 2. the sync manifest beside the tar
    export_name = rules["export_manifest_name"]
    sync = []
    for p in top:
        if fnmatch.fnmatch(p.name, rules["sync_manifest_glob"]) and p.name != export_name and root.is_file(p):
            doc = _json(root, p)
            if isinstance(doc, dict) and "objects_skipped" in doc:
                sync.append((p, doc))
    if not sync:
        checks.append(_check("sync_manifest", "absent",
                             "no *manifest*.json carrying objects_skipped beside the tar: skipped objects cannot be ruled out"))
    for p, doc in sync:
        n = _skipped_count(doc["objects_skipped"])
        if n is None:
            checks.append(_check("sync_manifest", "fail", f"objects_skipped is {type(doc['objects_skipped']).__name__}, not a count or list",
                                 root.display(p)))
        elif n:
            checks.append(_check("sync_manifest", "fail", f"objects_skipped={n}: the synced trace tree is incomplete, "
                                 "evidence-only, not a source of record for the dataset", root.display(p)))
        else:
            checks.append(_check("sync_manifest", "pass", "objects_skipped=0", root.display(p)))
    # 3. the extracted trace_jobs/
    extracted = base / rules["extracted_dir"]
    results = None
    if root.is_dir(extracted):
        trials, results = count_results(root, extracted)
        checks.append(_check("extracted_trace_jobs", "pass" if results else "fail",
                             f"{trials} trial dir(s), {results} with result.json", root.display(extracted)))
    else:
        checks.append(_check("extracted_trace_jobs", "absent", f"{rules['extracted_dir']}/ not extracted under the trace root"))
    # 4. trace_export_manifest.json: result_coverage vs the gate; result_count vs the extracted tree
    manifest_dirs = _find_dirs_with(root, base, export_name, rules["extracted_dir"])
    manifest = None
    if not manifest_dirs:
        checks.append(_check("export_manifest", "absent", f"no {export_name} under the trace root (export not staged with --stage-only)"))
    for d in manifest_dirs:
        doc = _json(root, d / export_name)
        rows, row_checks = staged_rows(root, d, rules)
        checks += row_checks
        mc = trace_manifest_check((root, d / export_name), True, rows=rows, results=results,
                                  rows_source="staged shards", results_source=f"extracted {rules['extracted_dir']}/")
        manifest = manifest or {"dir": d, "doc": doc, "check": mc}
        checks.append(_check("result_coverage", "pass" if mc["passed"] else "fail", mc["detail"], mc["path"]))
        rc = doc.get("result_count") if isinstance(doc, dict) else None
        if isinstance(rc, int) and not isinstance(rc, bool) and results is not None:
            same = rc == results
            checks.append(_check("result_count", "pass" if same else "fail",
                                 f"manifest result_count={rc}, extracted trace_jobs/ has {results} result.json"
                                 + ("" if same else ": the export was not built from this tree"), mc["path"]))
        wc = doc.get("row_count") if isinstance(doc, dict) else None
        if isinstance(wc, int) and not isinstance(wc, bool) and rows is not None:
            same = wc == rows
            checks.append(_check("row_count", "pass" if same else "fail",
                                 f"manifest row_count={wc}, the staged shards hold {rows} row(s)"
                                 + ("" if same else ": the manifest does not describe these shards"), mc["path"]))
    # 5. the staged shard set: deterministic names, contiguous, exactly the manifest's list
    if manifest is not None:
        checks += _shard_checks(root, manifest["dir"], manifest["doc"], rules)
    cov = next((c for c in checks if c["check"] == "result_coverage"), None)
    secrets = secret_scan(root, max_depth=SCAN_DEPTH)
    return {"root": str(base), "checks": checks,
            "result_coverage": manifest["check"]["result_coverage"] if manifest else None,
            "coverage_gate": threshold("trace_min_result_coverage_ratio"),
            "export_manifest": manifest["check"]["path"] if manifest else None,
            "secret_scan": secrets,
            "complete": all(c["status"] == "pass" for c in checks) and cov is not None and secrets["status"] == "clean"}


def _shards_on_disk(root: Root, d: Path, rules: dict) -> dict[str, Path]:
    on_disk = {}
    for sub in (d, d / "data"):
        for p in root.listdir(sub):
            if fnmatch.fnmatch(p.name, rules["shard_glob"]) and root.is_file(p):
                on_disk[p.name] = p
    return on_disk


def staged_rows(root: Root, d: Path, rules: dict) -> tuple[int | None, list[dict]]:
    """(rows of the staged shards beside the manifest, checks): None when no shard is staged or
    one cannot be read (that shard is a failed ``staged_rows`` check naming it and why)."""
    shards = _shards_on_disk(root, d, rules)
    if not shards:
        return None, []
    total, bad = 0, []
    for name in sorted(shards):
        n, why = row_count(root, shards[name])
        if n is None:
            bad.append(f"{root.rel(shards[name])}: {why}")
        else:
            total += n
    if bad:
        return None, [_check("staged_rows", "fail", "staged shard(s) cannot be read, so their rows are uncounted and "
                             "unscanned: " + "; ".join(bad[:5]), root.display(d))]
    return total, [_check("staged_rows", "pass", f"{len(shards)} staged shard(s) hold {total} row(s)", root.display(d))]


def _shard_checks(root: Root, d: Path, doc, rules: dict) -> list[dict]:
    pattern = re.compile(rules["shard_pattern"])
    on_disk = {name: root.rel(p) for name, p in _shards_on_disk(root, d, rules).items()}
    if not on_disk:
        return [_check("staged_shards", "absent", "no staged train-*.parquet beside the manifest: verify the remote shard list instead",
                       root.display(d))]
    out = []
    bad = sorted(n for n in on_disk if not pattern.match(n))
    idx = sorted(int(pattern.match(n)[1]) for n in on_disk if pattern.match(n))
    gaps = sorted(set(range(len(idx))) - set(idx))
    if bad or gaps or (idx and idx[-1] != len(idx) - 1):
        out.append(_check("shard_names", "fail", "shard names are not the deterministic train-00000.. sequence: "
                          + "; ".join(filter(None, [f"unexpected {', '.join(bad[:5])}" if bad else "",
                                                    f"missing index(es) {gaps[:5]}" if gaps else ""])), root.display(d)))
    else:
        out.append(_check("shard_names", "pass", f"{len(idx)} shard(s) train-00000..train-{len(idx) - 1:05d}", root.display(d)))
    listed = doc.get("shards") if isinstance(doc, dict) else None
    if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
        out.append(_check("stale_shards", "could not check", "the manifest lists no shards: stale shards from an earlier run cannot be ruled out",
                          root.display(d)))
    else:
        names = {Path(x).name for x in listed}
        stale = sorted(set(on_disk) - names)
        missing = sorted(names - set(on_disk))
        if stale or missing:
            out.append(_check("stale_shards", "fail", "; ".join(filter(None, [
                f"stale shard(s) not in the manifest (left from an earlier run): {', '.join(stale[:5])}" if stale else "",
                f"manifest shard(s) absent from the staged tree: {', '.join(missing[:5])}" if missing else ""])), root.display(d)))
        else:
            out.append(_check("stale_shards", "pass", f"staged shards equal the manifest's {len(names)} shard(s)", root.display(d)))
    return out


def monitor_mirror(bundle: Root | None, manifest: dict | None) -> dict | None:
    """The monitor's trace_jobs/ mirror in the bundle: always a sample or evidence-only, never the source of record."""
    if bundle is None or not bundle.is_dir(bundle.path / "trace_jobs"):
        return None
    d = bundle.path / "trace_jobs"
    trials, results = count_results(bundle, d)
    cap = int(threshold("monitor_mirror_cap_traces"))
    sel = _json(bundle, d / "sync_selection.json") if bundle.is_file(d / "sync_selection.json") else None
    limit = sel.get("trace_sync_limit") if isinstance(sel, dict) else None
    if limit is None and isinstance(manifest, dict):
        limit = manifest.get("trace_sync_limit")
    skipped = _json(bundle, d / "skipped_objects.json") if bundle.is_file(d / "skipped_objects.json") else None
    n_skipped = len(skipped) if isinstance(skipped, list) else 0
    parts = [f"{trials} trial dir(s), {results} result.json"]
    if isinstance(sel, dict) and isinstance(sel.get("selected_traces"), int):
        parts.append(f"{sel['selected_traces']} of {sel.get('available_traces', '?')} selected")
    if isinstance(limit, int) and not isinstance(limit, bool):
        parts.append(f"trace_sync_limit={limit}")
    if n_skipped:
        parts.append(f"{n_skipped} object(s) skipped by the size guard")
    full = limit == 0 and not n_skipped
    status = "full mirror (evidence only)" if full else "sample"
    why = ("a complete monitor mirror (--trace-sync-limit 0, nothing skipped) is still evidence, not the source of record"
           if full else f"the monitor mirrors only the newest {cap} traces fleet-wide"
           + (" and its size guard skipped objects" if n_skipped else "") + ": an evidence sample, not the source of record")
    return {"path": bundle.display(d), "status": status, "trials": trials, "results": results,
            "trace_sync_limit": limit, "objects_skipped": n_skipped, "cap": cap,
            "detail": "; ".join(parts) + f" — {why}"}
