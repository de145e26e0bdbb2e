"""Evidence both live probes (Slurm, Kubernetes) gather the same way, and its normalization.

- ``fault_fix(kind, **context)``: the fix that ends a probe fault (``rules/capture_probes.yaml``
  ``fixes``), appended to the failed record's error as ``next action: ...``.
- ``flight_recorder_reason``: whether a live attempt's flight-recorder dumps are fetched (a hang
  signature in its captured logs, or trainer progress older than the stall threshold), by
  ``rules/live_evidence.yaml``; the reason is recorded.
- ``nccl_env``: the flight-recorder variables of a trainer's ``/proc/<pid>/environ`` (only those
  are kept: the environment holds secrets) and the dump prefix they name.
- ``write_gpu_health`` / ``write_flight_recorder_summary``: ``gpu_health.json`` and
  ``flight_recorder/summary.json`` rebuilt from the raw files of a capture (pure over the files).
"""
from __future__ import annotations

import importlib.util
import json
import posixpath
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlhealth.packaged import packaged_yaml
from rlhealth.probes.capture import CaptureWriter, JobInfo, ModelInfo, PlacementInfo, ProbeRecord
from rlhealth.probes.parse import read_count
from rlhealth.probes.parse import flight_recorder as frp
from rlhealth.probes.parse import launch as lp
from rlhealth.probes.parse.nvidia_smi import parse_gpu_health, parse_xid_lines

FR_DIR = "flight_recorder"


@lru_cache(maxsize=1)
def policy() -> dict[str, Any]:
    return packaged_yaml("live_evidence.yaml")


@lru_cache(maxsize=1)
def _fixes() -> dict[str, str]:
    data = packaged_yaml("capture_probes.yaml")
    return dict(data.get("fixes") or {})


class _Blank(dict):
    def __missing__(self, key):
        return f"<{key}>"


def fault_fix(kind: str, **context: Any) -> str:
    """``next action: <fix>`` for a fault kind, with its placeholders filled from ``context``."""
    template = _fixes().get(kind)
    if template is None:
        raise KeyError(f"no fix for fault kind {kind!r} in rules/capture_probes.yaml")
    return "next action: " + template.format_map(_Blank({k: v for k, v in context.items() if v is not None}))


def with_fix(error: str, kind: str, **context: Any) -> str:
    return f"{error}; {fault_fix(kind, **context)}"


@lru_cache(maxsize=1)
def _stall_threshold_s() -> float | None:
    name = (policy().get("flight_recorder") or {}).get("when_progress_older_than")
    if not name:
        return None
    thresholds = packaged_yaml("thresholds.yaml")
    value = thresholds.get(name)
    return float(value) if isinstance(value, (int, float)) else None


def flight_recorder_reason(log_files: list[tuple[Path, str]], captured_at_epoch: float) -> tuple[str | None, str]:
    """(reason to fetch the dumps or None, what was measured) from the captured logs of a live attempt."""
    from rlhealth.catalog import load_catalog
    from rlhealth.probes.bundle import live_signals

    fr = policy().get("flight_recorder") or {}
    signals = live_signals(log_files, load_catalog())
    severities = set(fr.get("when_signature_severity") or [])
    if signals.hang is not None and "hang" in severities:
        return (f"hang signature {signals.hang_signature} at {signals.hang.source}:{signals.hang.line}",
                f"hang signature {signals.hang_signature}")
    threshold = _stall_threshold_s()
    if signals.newest_progress_ts is not None and threshold is not None:
        age = captured_at_epoch - signals.newest_progress_ts
        if age > threshold:
            return (f"newest trainer progress {signals.newest_progress_at} is {age:.0f}s old "
                    f"(> {fr.get('when_progress_older_than')} = {threshold:.0f}s)", f"progress age {age:.0f}s")
        return None, f"no hang signature; newest trainer progress {age:.0f}s old"
    return None, "no hang signature; no timestamped trainer progress line"


def nccl_env(environ: bytes) -> tuple[dict[str, str], str]:
    """(kept variables, dump prefix) from a NUL-separated ``/proc/<pid>/environ``."""
    fr = policy().get("flight_recorder") or {}
    keep = tuple(fr.get("env_keep_prefixes") or ())
    kept: dict[str, str] = {}
    for item in environ.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key.startswith(keep):
            kept[key] = value
    prefix = next((kept[n] for n in fr.get("env_names") or [] if kept.get(n)), fr.get("default_prefix"))
    return kept, prefix


def dump_files(ls_entries: list[dict], prefix: str) -> list[str]:
    """Paths of the dump files named by ``prefix`` in an ``ls -la --time-style=full-iso`` listing of its directory."""
    fr = policy().get("flight_recorder") or {}
    directory, base = posixpath.split(prefix)
    names = sorted(e["name"] for e in ls_entries if e["type"] == "file" and e["name"].startswith(base)
                   and frp.rank_of(e["name"], base) is not None)
    return [posixpath.join(directory, n) for n in names[: int(fr.get("max_files_per_node", 16))]]


def max_dump_bytes() -> int:
    return int((policy().get("flight_recorder") or {}).get("max_bytes_per_file", frp.MAX_DUMP_BYTES))


def record_decision(writer: CaptureWriter, started: str, fetch_reason: str | None, measured: str) -> None:
    """The flight-recorder decision as a record whose output (``flight_recorder/decision.txt``)
    says why the dumps were or were not fetched."""
    text = f"fetch: {fetch_reason}" if fetch_reason else f"not fetched: {measured}"
    rel = writer.write_bytes(f"{FR_DIR}/decision.txt", (text + "\n").encode())
    writer.record(ProbeRecord(name="flight recorder", started_at=started, finished_at=started, output=rel))


# ---- launch -------------------------------------------------------------------------------------

def launch_into(info: JobInfo, sources: dict[str, str], config: dict | None, config_rel: str | None,
                args: list[tuple[str, int | None, str]]) -> None:
    """Fill ``job.json`` fields read from the launch: the resolved configuration, the launch
    arguments, the mode (``rlhealth.mode``, the one run classifier), the model, the retry budget and
    the placement, each naming its source in ``sources``."""
    flat = lp.flatten(config) if config else {}
    if config is not None:
        info.resolved_config = config
        sources["resolved_config"] = config_rel
    if args:
        info.launch_args = [t for t, _, _ in args]
        sources["launch_args"] = ", ".join(sorted({src for _, _, src in args}))
    mode = lp.mode_from(config, config_rel, args)
    if mode:
        info.mode_hint, sources["mode_hint"] = mode
    model = lp.model_from(flat, config_rel, args)
    if model:
        info.model = ModelInfo(**model)
        sources["model"] = model["source"]
    retries = lp.max_retries_from(args)
    if retries:
        info.max_retries, sources["max_retries"] = retries
    place = lp.placement_from(flat)
    numbers = {field: read_count(value) for field, (value, _key) in place.items() if field != "colocate_all"}
    if ({"colocate_all", "num_inference_engines", "inference_tp", "policy_gpus_per_node"} <= set(place)
            and None not in numbers.values()):        # a number that is no count (inf, "abc", 5,000 digits): none
        info.placement = PlacementInfo(
            colocate_all=bool(place["colocate_all"][0]), num_inference_engines=numbers["num_inference_engines"],
            inference_tp=numbers["inference_tp"],
            policy_gpus=numbers["policy_gpus_per_node"] * numbers.get("policy_nodes", 1),
            n_concurrent_trials=numbers.get("n_concurrent_trials"), max_num_seqs=numbers.get("max_num_seqs"))
        sources["placement"] = f"{config_rel}: " + ", ".join(sorted(k for _, k in place.values()))


def read_config(capture_dir: Path) -> tuple[dict | None, str | None]:
    """The resolved configuration copied into ``config/`` (first of the known file names)."""
    for name in lp.CONFIG_FILES:
        path = Path(capture_dir) / "config" / name
        if path.is_file():
            config, _error = lp.parse_config(path.read_bytes().decode("utf-8", "replace"), name)
            return config, f"config/{name}"
    return None, None


# ---- normalization ------------------------------------------------------------------------------

def _lines(path: Path) -> list[str]:
    try:
        return path.read_bytes().decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def write_gpu_health(capture_dir: Path, sources: list[tuple[str, str | None, str | None]]) -> dict | None:
    """``gpu_health.json`` from ``[(host, health file, kernel-log file)]`` (capture-relative paths).

    Per host: ``{"host", "source", "gpus": [{"gpu", "bus_id", <measurements>, "evidence":
    {measurement: [{"source", "line", "text"}]}}], "xid_source", "xid": [{"source", "line", "pci",
    "xid", "text"}]}``; measurements are counts (int) or flags (bool), null when not reported."""
    capture_dir = Path(capture_dir)
    hosts = []
    for host, health_rel, kernel_rel in sorted(sources):
        entry: dict[str, Any] = {"host": host, "source": health_rel, "gpus": [], "xid_source": kernel_rel, "xid": []}
        if health_rel:
            lines = _lines(capture_dir / health_rel)
            for gpu in parse_gpu_health("\n".join(lines)):
                gpu["evidence"] = {k: [{"source": health_rel, "line": n, "text": lines[n - 1].strip()} for n in v]
                                   for k, v in sorted(gpu["evidence"].items())}
                entry["gpus"].append(gpu)
        if kernel_rel:
            for x in parse_xid_lines("\n".join(_lines(capture_dir / kernel_rel))):
                entry["xid"].append({"source": kernel_rel, **x})
        if entry["gpus"] or entry["xid"] or health_rel or kernel_rel:
            hosts.append(entry)
    if not hosts:
        return None
    doc = {"hosts": hosts}
    (capture_dir / "gpu_health.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return doc


def write_flight_recorder_summary(capture_dir: Path) -> dict | None:
    """``flight_recorder/summary.json`` from the dumps under ``flight_recorder/dumps/`` and the
    prefix recorded in ``flight_recorder/prefix.txt``; None when no dump was fetched."""
    capture_dir = Path(capture_dir)
    base = capture_dir / FR_DIR
    if not base.is_dir():
        return None
    prefix_lines = _lines(base / "prefix.txt")
    prefix = prefix_lines[0].strip() if prefix_lines else (policy().get("flight_recorder") or {}).get("default_prefix")
    name = posixpath.basename(prefix)
    summary = frp.summarize_dir(base / "dumps", capture_dir, name)
    if not summary["ranks"]:
        return None
    summary["prefix"] = prefix
    (base / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def run_fr_trace(capture_dir: Path) -> str | None:
    """PyTorch's own analysis (``python -m torch.distributed.flight_recorder.fr_trace``) over the
    fetched dumps when torch is installed locally; its output goes to ``flight_recorder/fr_trace.txt``.
    Returns why it did not run (None when it ran)."""
    base = Path(capture_dir) / FR_DIR
    try:
        spec = importlib.util.find_spec("torch.distributed.flight_recorder.fr_trace")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "torch (fr_trace) is not installed here; the bounded reader's summary.json stands alone"
    prefix_lines = _lines(base / "prefix.txt")
    name = posixpath.basename(prefix_lines[0].strip()) if prefix_lines else "nccl_trace_rank_"
    timeout = float((policy().get("flight_recorder") or {}).get("fr_trace_timeout_s", 60))
    try:
        out = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(base / "dumps"),
                              "-p", name], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except (subprocess.TimeoutExpired, OSError) as exc:
        return f"fr_trace failed: {type(exc).__name__}: {exc}"
    (base / "fr_trace.txt").write_bytes(out.stdout + (b"\n--- stderr ---\n" + out.stderr if out.stderr else b""))
    return None if out.returncode == 0 else f"fr_trace exited {out.returncode}"
