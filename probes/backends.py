"""The live-probe backends: the one interface a backend implements and the one registry of them.

A backend captures one job's live evidence read-only into the bundle layout (contract §2.2):
``capture(options, now=...) -> bundle directory``, writing one capture directory through
``probes.capture.CaptureWriter`` and raising ``rlhealth.usage.UsageError`` only for bad options.
It captures raw evidence only; every judgement (the first causal error of an attempt, a verdict)
is made by the diagnosis from what was captured.

Each backend also names the bundle layout its jobs are synced into, and what tells that layout
apart (the directory under ``jobs/<cluster>/``, the manifest's cluster or job id), so the bundle
reader, the observers and the next action ask the registry instead of spelling backend names.

The command line (``rlhealth probe --backend``), the MCP ``probe`` tool and the capture files
(``capture.json`` ``backend``, ``state.json`` ``source``) take their names from ``BACKENDS``.
A backend's module is imported only when it captures (the Slurm probe needs paramiko).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

if TYPE_CHECKING:
    from rlhealth.probes.options import ProbeOptions


class CaptureFunction(Protocol):
    def __call__(self, options: "ProbeOptions", now: datetime | None = None) -> Path: ...


class JobFlags(Protocol):
    def __call__(self, job_id: str, cluster: str, synced_job: Mapping[str, Any],
                 last_host: Callable[[], str | None]) -> list[str]: ...


def _iris_job_flags(job_id: str, cluster: str, synced_job: Mapping[str, Any],
                    last_host: Callable[[], str | None]) -> list[str]:
    return ["--cluster", cluster, "--job", job_id]


def _slurm_job_flags(job_id: str, cluster: str, synced_job: Mapping[str, Any],
                     last_host: Callable[[], str | None]) -> list[str]:
    host = last_host() or synced_job.get("login_host") or cluster
    flags = ["--host", str(host), "--cluster", cluster, "--job", job_id.rsplit("/", 1)[-1]]
    experiment_dir = synced_job.get("experiment_dir")
    if isinstance(experiment_dir, str) and experiment_dir.startswith("/"):
        flags += ["--experiment-dir", experiment_dir]
    return flags


@dataclass(frozen=True)
class Backend:
    """One live-probe backend and the bundle layout it captures into."""
    name: str
    """``--backend`` value, ``capture.json`` ``backend``, ``state.json`` ``source``."""
    module: str
    """The module whose ``capture(options, now=...)`` probes the job (imported on first use)."""
    summary: str
    """One line for help texts: what the backend talks to."""
    layout: str
    """The bundle layout its jobs are synced into (``BundleRead.layout``)."""
    owner_dir: str | None = None
    """The directory under ``jobs/<cluster>/`` that marks the layout (None: a user name)."""
    clusters: tuple[str, ...] = ()
    """Manifest ``cluster`` values that mark the layout."""
    job_id_prefix: str | None = None
    """A manifest ``job_id`` prefix that marks the layout."""
    bundle_log_is_current_leg: bool = False
    """The bundle's own top-level log (``finelog.log``) is the newest leg of a job chain."""
    job_flags: JobFlags = _iris_job_flags
    """The ``rlhealth probe`` flags that name a job again: (job id, cluster, the bundle manifest's
    ``job`` object, a function giving the ``--host`` of the newest recorded probe) -> flags."""

    @property
    def capture(self) -> CaptureFunction:
        """The backend's ``capture(options, now=None) -> bundle directory``."""
        return importlib.import_module(self.module).capture

    def marks_manifest(self, manifest: Mapping[str, Any]) -> bool:
        """Whether a bundle manifest names a job of this backend's layout."""
        return (str(manifest.get("cluster")) in self.clusters
                or (self.job_id_prefix is not None and str(manifest.get("job_id", "")).startswith(self.job_id_prefix)))


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend(name="iris", module="rlhealth.probes.kubernetes", layout="iris",
            summary="Kubernetes API of an Iris cluster"),
    Backend(name="slurm", module="rlhealth.probes.slurm", layout="jupiter", owner_dir="slurm",
            clusters=("jsc-jupiter",), job_id_prefix="/slurm/", bundle_log_is_current_leg=True,
            job_flags=_slurm_job_flags,
            summary="SSH to a Slurm login node"),
)}
"""Every backend, by name (the order of help texts)."""

BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
DEFAULT_BACKEND = BACKEND_NAMES[0]
"""The backend of a bundle whose layout names none (no capture, no telling path or manifest)."""
UNKNOWN_LAYOUT = "unknown"


def get_backend(name: str) -> Backend:
    """The backend called ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(BACKEND_NAMES)}") from None


def backend_for_layout(layout: str) -> Backend:
    """The backend that captures into ``layout`` (the default backend for an unknown layout)."""
    return next((b for b in BACKENDS.values() if b.layout == layout), BACKENDS[DEFAULT_BACKEND])


def layout_of_path(tail: tuple[str, ...]) -> str:
    """The layout of a bundle at ``jobs/<tail...>`` (``<cluster>/<owner>/<job>``), from its path."""
    if len(tail) != 3:
        return UNKNOWN_LAYOUT
    marked = next((b for b in BACKENDS.values() if b.owner_dir is not None and b.owner_dir == tail[1]), None)
    return (marked or next(b for b in BACKENDS.values() if b.owner_dir is None)).layout


def layout_of_manifest(manifest: Mapping[str, Any], current: str) -> str:
    """The layout a bundle manifest names, else ``current`` (a manifest naming a cluster makes an
    unknown layout the one of user-named job directories)."""
    marked = next((b for b in BACKENDS.values() if b.marks_manifest(manifest)), None)
    if marked is not None:
        return marked.layout
    if current == UNKNOWN_LAYOUT and manifest.get("cluster"):
        return next(b for b in BACKENDS.values() if b.owner_dir is None).layout
    return current


def bundle_log_is_current_leg(layout: str) -> bool:
    """Whether the bundle's own top-level log is the newest leg of a job chain in ``layout``."""
    return any(b.bundle_log_is_current_leg for b in BACKENDS.values() if b.layout == layout)
