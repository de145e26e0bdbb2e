"""rlhealth's own live capture format (contract §2.2) and the one writer for it.

A live probe never diagnoses: it writes what it observed into
``<bundle>/rlhealth/captures/<UTC stamp>/`` and the diagnosis reads the bundle.
Every file is optional; the models below are the normalized shapes, and
``CaptureWriter`` is the only code that creates capture directories.
"""
from __future__ import annotations

import functools
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlhealth.packaged import packaged_yaml
from rlhealth.probes.backends import BACKEND_NAMES

CAPTURE_FORMAT = 1
CAPTURES_DIR = Path("rlhealth") / "captures"
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"

BackendName = Literal[BACKEND_NAMES]  # type: ignore[valid-type]   # the registry's names
ControllerStateName = Literal[
    "pending", "building", "running", "succeeded", "failed", "killed",
    "worker_failed", "unschedulable", "absent",
]
@functools.lru_cache(maxsize=1)
def terminal_states() -> frozenset[str]:
    """The one terminal-state set (rules/sets.yaml terminal_states), shared with the rule base
    (read on first use: a diagnosis that reads no controller state never parses the file)."""
    return frozenset(packaged_yaml("sets.yaml")["terminal_states"])


@functools.lru_cache(maxsize=1)
def _capture_probes_file() -> dict:
    return packaged_yaml("capture_probes.yaml") or {}


def capture_probe_policy() -> dict:
    """rules/capture_probes.yaml: which failed live probes and manifest artifact errors make which
    gate ERROR, and the fix to name for each fault. The file is parsed once per process; every
    call returns fresh containers (its entries are read-only)."""
    data = _capture_probes_file()
    return {"required": list(data.get("required") or []), "informational": set(data.get("informational") or []),
            "artifacts": list(data.get("artifacts") or []), "fixes": dict(data.get("fixes") or {}),
            "whole_sync": dict(data.get("whole_sync") or {})}


def utc_iso(t: datetime) -> str:
    """ISO-8601 UTC with a trailing Z and second precision (deterministic)."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ProbeRecord(BaseModel):
    """One command or API call exactly as made, with its outcome."""
    model_config = ConfigDict(extra="forbid")
    name: str
    argv: list[str] | None = None
    api: str | None = None
    started_at: str
    finished_at: str
    exit_code: int | None = None
    output: str | None = None
    error: str | None = None


class CaptureManifest(BaseModel):
    """``capture.json``."""
    model_config = ConfigDict(extra="forbid")
    format: Literal[1] = 1
    captured_at: str
    backend: BackendName
    cluster: str
    job_id: str
    probes: list[ProbeRecord] = Field(default_factory=list)


class Attempt(BaseModel):
    model_config = ConfigDict(extra="forbid")
    attempt: int
    state: str
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    error: str | None = None


class ControllerState(BaseModel):
    """``state.json``: controller state of the job."""
    model_config = ConfigDict(extra="forbid")
    source: BackendName
    state: ControllerStateName
    failure_count: int = 0
    preemption_count: int = 0
    max_retries: int | None = None
    attempts: list[Attempt] = Field(default_factory=list)


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    total_params_b: float
    active_params_b: float
    source: str


class HardwareInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpu: str
    gpus_per_node: int
    nodes: int


class PlacementInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    colocate_all: bool
    num_inference_engines: int
    inference_tp: int
    policy_gpus: int
    n_concurrent_trials: int | None = None
    max_num_seqs: int | None = None


class JobInfo(BaseModel):
    """``job.json``: what the probe learned about the launch (docs in README "Live probes").

    ``sources`` names where each value was read: keys are the field paths (``mode_hint``,
    ``resolved_config``, ``model``, ``hardware.gpu``, ``hardware.gpus_per_node``, ``nodes``,
    ``launch_args``, ``max_retries``, ``placement``), values ``"<capture-relative file>:<line>"`` or
    ``"<file>: <config key>"``."""
    model_config = ConfigDict(extra="forbid")
    mode_hint: Literal["agentic", "standard"] | None = None
    resolved_config: dict[str, Any] | None = None
    model: ModelInfo | None = None
    hardware: HardwareInfo | None = None
    placement: PlacementInfo | None = None
    max_retries: int | None = None          # the launch's gang retry budget (--max-retries K)
    launch_args: list[str] | None = None    # the launch command line as tokens (batch script / container)
    nodes: list[str] | None = None          # node (Slurm) or pod (Kubernetes) names of the running attempt
    sources: dict[str, str] = Field(default_factory=dict)


class GpuPoll(BaseModel):
    """One line of ``gpu_polls.jsonl``: one GPU at one poll."""
    model_config = ConfigDict(extra="forbid")
    t: str
    host: str
    gpu: int
    util_pct: float | None = None
    mem_used_mib: int | None = None
    mem_total_mib: int | None = None
    power_w: float | None = None
    dram_active: float | None = None
    role: Literal["policy", "inference", "unknown"] = "unknown"
    processes: list[str] = Field(default_factory=list)


class CaptureWriter:
    """Creates one capture directory and records every probe made into it.

    Writes only below ``<bundle>/rlhealth/captures/<stamp>/``; paths that would
    escape it are refused.
    """

    def __init__(self, bundle_dir: Path, *, backend: str, cluster: str, job_id: str,
                 now: datetime | None = None):
        self.captured_at = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        stamp = self.captured_at.strftime(STAMP_FORMAT)
        self.dir = Path(bundle_dir) / CAPTURES_DIR / stamp
        suffix = 1
        while self.dir.exists():
            self.dir = Path(bundle_dir) / CAPTURES_DIR / f"{stamp}-{suffix}"
            suffix += 1
        self.dir.mkdir(parents=True)
        self.manifest = CaptureManifest(captured_at=utc_iso(self.captured_at), backend=backend,
                                        cluster=cluster, job_id=job_id)

    def path(self, relative: str) -> Path:
        target = (self.dir / relative).resolve()
        if not str(target).startswith(str(self.dir.resolve()) + os.sep):
            raise ValueError(f"capture path escapes the capture directory: {relative}")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_bytes(self, relative: str, data: bytes) -> str:
        self.path(relative).write_bytes(data)
        return relative

    def write_json(self, relative: str, obj: Any) -> str:
        if isinstance(obj, BaseModel):
            obj = obj.model_dump(mode="json")
        self.path(relative).write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
        return relative

    def write_jsonl(self, relative: str, rows: list[Any]) -> str:
        lines = []
        for row in rows:
            if isinstance(row, BaseModel):
                row = row.model_dump(mode="json")
            lines.append(json.dumps(row, sort_keys=True))
        self.path(relative).write_text("".join(line + "\n" for line in lines))
        return relative

    def record(self, record: ProbeRecord) -> None:
        self.manifest.probes.append(record)
        self.flush()
        from rlhealth.progress import current
        progress = current()
        if progress is not None:  # the live probe's steps on a terminal
            progress.step(f"{len(self.manifest.probes)} probe steps; last: {record.name}" + (" (failed)" if record.error else ""))

    def flush(self) -> None:
        """Write ``capture.json`` (called after every record so a crash keeps what was done)."""
        self.write_json("capture.json", self.manifest)
