"""The watcher's own record of a sync (``manifest.json`` and the files it leaves next to the
artifacts), read exactly as ``scripts/iris/watch_coreweave_rl.py`` writes it.

- ``artifacts.errors``: one string per failed artifact, ``"<name>: <detail>"`` (``finelog: ...``,
  ``pod discovery: ...``, ``<pod> stdout: ...``, ``<pod> Ray/vLLM: ...``, ``trace sync: ...``; Jupiter
  ``Slurm logs: ...``, ``Ray logs: ...``, ``trace <trial>: ...``; an exception type when the whole
  sync of the job failed). ``rules/capture_probes.yaml`` ``artifacts`` names the gate each one
  leaves without evidence, and the fix.
- ``artifacts.finelog``: ``"N lines"`` (complete), ``"synced"`` (Jupiter, complete) or
  ``"current tail (N lines)"`` (a status-only sweep: the newest lines only).
- ``ray_vllm_logs/<pod>/ray-vllm-sync-error.txt``: the stderr of a failed Ray/vLLM log transfer.
- ``trace_jobs/skipped_objects.json``: ``[{"key", "size", "reason"}]`` with reason
  ``non_log_size_limit`` (a non-log object above ``max_non_log_bytes``) or ``missing_after_listing``
  (listed, gone before download).
- The launch material a bundle carries when its manifest has no entrypoint (Jupiter: ``""``): Slurm
  batch scripts and resolved configuration files under ``slurm_logs/`` or the bundle root.

Detail text is never quoted raw: an HTML error page (a proxy's body) is summarised as its status
code and title, credentials are redacted, whitespace is collapsed and the text is capped.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from rlhealth.facts import ProblemNote
from rlhealth.probes.capture import capture_probe_policy
from rlhealth.redact import redact

MAX_DETAIL_CHARS = 200
MAX_ERRORS = 20
MAX_SYNC_FILE_BYTES = 64 * 1024
MAX_LAUNCH_FILE_BYTES = 1024 * 1024
MAX_LAUNCH_FILES = 8
SYNC_ERROR_FILE = "ray-vllm-sync-error.txt"
LAUNCH_SCRIPT_SUFFIXES = (".sbatch", ".slurm", ".sh")
CONFIG_NAMES = ("resolved_config.yaml", "resolved_config.yml", "resolved_config.json", "launch_config.yaml",
                "launch_config.yml", "launch_config.json", "config.yaml")
_HTML = re.compile(r"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]|<title[\s>]", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_STATUS = re.compile(r"(?<!\d)([1-5]\d\d)(?!\d)")
_EXCEPTION_NAME = re.compile(r"^(?:[a-z_][\w]*\.)*[A-Z][A-Za-z0-9_]*$")  # "TimeoutExpired", "botocore.exceptions.ClientError"
_LONG_PATH = re.compile(r"(?<![\w.])/(?:[^\s/()]+/){3,}([^\s/()]+/[^\s/()]+)")
_FINELOG_TAIL = re.compile(r"^current tail \((?P<n>[\d,]+) lines?\)$")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def summarize_detail(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """A sync error's detail fit to quote: an HTML page becomes ``HTML error page (HTTP 502:
    "502 Bad Gateway")``, the text before and after it is kept, credentials are redacted."""
    text = str(text)
    m = _HTML.search(text)
    if m:
        before = _one_line(text[:m.start()])
        page = text[m.start():]
        title = _TITLE.search(page) or _H1.search(page)
        heading = _one_line(html.unescape(_TAG.sub(" ", title.group(1)))) if title else ""
        status = _STATUS.search(heading) or _STATUS.search(_one_line(html.unescape(_TAG.sub(" ", page)))[:400])
        parts = [f"HTTP {status.group(1)}"] if status else []
        if heading:
            parts.append(f'"{heading[:80]}"')
        summary = "HTML error page" + (f" ({': '.join(parts)})" if parts else " (no status or title)")
        text = f"{before} {summary}".strip() if before else summary
    return redact(_LONG_PATH.sub(r".../\1", _one_line(text)))[:limit]


def _classify(name: str, policy: dict) -> dict | None:
    for entry in policy["artifacts"]:
        pattern = entry.get("match") or ("^" + re.escape(str(entry.get("prefix", ""))))
        if re.search(pattern, name, re.IGNORECASE):
            return entry
    return None


def artifact_problems(manifest: dict) -> list[ProblemNote]:
    """``artifacts.errors`` and ``artifacts.finelog`` as evidence problems."""
    artifacts = manifest.get("artifacts") if isinstance(manifest.get("artifacts"), dict) else {}
    policy = capture_probe_policy()
    out: list[ProblemNote] = []
    errors = artifacts.get("errors")
    for error in (errors if isinstance(errors, list) else [])[:MAX_ERRORS]:
        if isinstance(error, dict):
            name = str(error.get("artifact") or error.get("name") or error.get("path") or "artifact")
            detail = str(error.get("error") or error.get("reason") or error.get("message") or json.dumps(error, sort_keys=True))
        else:
            name, sep, detail = str(error).partition(":")
            name, detail = (name.strip(), detail) if sep else ("artifact", str(error))
        rule = _classify(name, policy)
        if rule is None and _EXCEPTION_NAME.match(name):
            rule = policy.get("whole_sync") or None
            detail = f"{name}: {detail}"
        what = rule["what"] if rule else summarize_detail(name, 80)
        fix = f"; next action: {rule['fix']}" if rule and rule.get("fix") else ""
        # a pod or trial named in the entry ("<pod> stdout", "<pod> Ray/vLLM", "trace <trial>")
        named = rule and " " in name and name.lower() not in ("pod discovery", "trace sync", "slurm logs", "ray logs")
        where = f" ({summarize_detail(name, 80)})" if named else ""
        out.append(ProblemNote(source="manifest.json",
                               reason=f"the sync recorded an error for {what}{where}: {summarize_detail(detail)}{fix}",
                               gate=rule["gate"] if rule else "none", artifact=rule.get("artifact") if rule else None))
    started, completed = artifacts.get("trace_started"), artifacts.get("trace_completed")
    if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (started, completed)):
        # counts of the job's remote trial directories (completed = holding a result.json); null for
        # Jupiter and terminal jobs, so never read as 0
        out.append(ProblemNote(source="manifest.json", gate="none",
                               reason=(f"the watcher counted {started} remote trial dir(s) for this job, {completed} with a "
                                       f"result.json (trace_started / trace_completed); trace_jobs/ holds the synced "
                                       f"selection ({summarize_detail(str(artifacts.get('traces') or 'no status'), 120)}), "
                                       "so local trial counts are over that selection")))
    finelog = artifacts.get("finelog")
    m = _FINELOG_TAIL.match(finelog.strip()) if isinstance(finelog, str) else None
    if m:
        out.append(ProblemNote(source="manifest.json", gate="none",
                               reason=(f'finelog.log is the watcher\'s current tail ("{finelog.strip()}", a status-only sweep), '
                                       "not the complete log: the launch lines and earlier attempts may be outside it; "
                                       "next action: run scripts/iris/watch_coreweave_rl.py without --status-only for the complete finelog")))
    return out


def _read_capped(path: Path, cap: int) -> str | None:
    try:
        if not path.is_file() or path.is_symlink():
            return None
        with open(path, "rb") as handle:
            return handle.read(cap).decode("utf-8", "replace")
    except OSError:
        return None


def sync_file_problems(root: Path) -> list[ProblemNote]:
    """The files a failed sync leaves next to the artifacts: Ray/vLLM transfer errors and the trace
    objects the sync skipped."""
    out: list[ProblemNote] = []
    policy = capture_probe_policy()
    ray = _classify("Ray/vLLM", policy) or {"gate": "liveness", "what": "the Ray/vLLM logs"}
    ray_dir = root / "ray_vllm_logs"
    if ray_dir.is_dir() and not ray_dir.is_symlink():
        for path in sorted(ray_dir.glob(f"*/{SYNC_ERROR_FILE}"))[:MAX_ERRORS]:
            text = _read_capped(path, MAX_SYNC_FILE_BYTES)
            if text is None:
                continue
            rel = path.relative_to(root).as_posix()
            fix = f"; next action: {ray['fix']}" if ray.get("fix") else ""
            out.append(ProblemNote(source=rel, gate=ray["gate"], artifact=ray.get("artifact"),
                                   reason=(f"the Ray/vLLM log transfer of pod {path.parent.name} failed: "
                                           f"{summarize_detail(text) or 'no stderr captured'}{fix}")))
    skipped_path = root / "trace_jobs" / "skipped_objects.json"
    text = _read_capped(skipped_path, MAX_LAUNCH_FILE_BYTES)
    if text is not None:
        try:
            rows = json.loads(text)
        except ValueError as exc:
            out.append(ProblemNote(source="trace_jobs/skipped_objects.json", gate="none",
                                   reason=f"unreadable: {type(exc).__name__}"))
            rows = []
        rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        by_reason: dict[str, int] = {}
        for r in rows:
            by_reason[str(r.get("reason") or "unknown")] = by_reason.get(str(r.get("reason") or "unknown"), 0) + 1
        results = sorted(str(r.get("key")) for r in rows if str(r.get("key", "")).endswith("result.json"))
        if rows:
            counts = ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items()))
            out.append(ProblemNote(source="trace_jobs/skipped_objects.json", gate="none",
                                   reason=f"the trace sync skipped {len(rows)} object(s) ({counts}): those files are not in trace_jobs/"))
        if results:
            out.append(ProblemNote(source="trace_jobs/skipped_objects.json", gate="rollouts",
                                   reason=(f"the trace sync skipped {len(results)} trial result.json file(s) "
                                           f"(e.g. {summarize_detail(results[0], 120)}): those trials read as unfinished here; "
                                           "next action: re-run the watcher's trace sync with a larger --max-non-log-bytes")))
    return out


def launch_material(root: Path) -> list[tuple[str, str]]:
    """``(bundle-relative path, text)`` of the Slurm batch scripts and resolved configuration files
    the bundle carries (``slurm_logs/`` and the bundle root), newest name last; bounded."""
    found: list[Path] = []
    for base in (root, root / "slurm_logs"):
        if not base.is_dir() or base.is_symlink():
            continue
        for path in sorted(base.iterdir()):
            if path.name in CONFIG_NAMES or path.suffix in LAUNCH_SCRIPT_SUFFIXES:
                found.append(path)
    out = []
    for path in found[:MAX_LAUNCH_FILES]:
        text = _read_capped(path, MAX_LAUNCH_FILE_BYTES)
        if text is not None:
            out.append((path.relative_to(root).as_posix(), text))
    return out


def read_manifest(read, manifest: dict) -> None:
    """Everything above, onto the bundle read: problems, and the launch material for the mode. A
    pod's Ray/vLLM error in the manifest ("diagnostics saved to ...") is replaced by the transfer's
    own stderr when the bundle holds that file."""
    files = sync_file_problems(read.root)
    detailed = {p.source.split("/")[1] for p in files if p.source.endswith(SYNC_ERROR_FILE)}
    read.problems.extend(p for p in artifact_problems(manifest)
                         if not any(f"({pod} Ray/vLLM)" in p.reason for pod in detailed))
    read.problems.extend(files)
    read.launch_material = launch_material(read.root)
