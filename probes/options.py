"""The typed options of one live probe (``rlhealth probe``), built by the command line.

Probes take a ``ProbeOptions`` and never see the argparse namespace; durations are already
seconds. ``deadline_text`` keeps the operator's spelling for messages ("--deadline 5m").
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from rlhealth.probes.backends import BACKEND_NAMES
from rlhealth.usage import UsageError, parse_duration

DEFAULT_DEADLINE = "5m"
DEFAULT_COMMAND_TIMEOUT = "60s"
DEFAULT_POLLS = 3
DEFAULT_POLL_INTERVAL = "10s"


@dataclass(frozen=True)
class ProbeOptions:
    backend: str                                     # a name in probes.backends.BACKENDS
    job: str
    bundle_root: Path
    deadline_s: float = parse_duration(DEFAULT_DEADLINE)
    command_timeout_s: float = parse_duration(DEFAULT_COMMAND_TIMEOUT)
    polls: int = DEFAULT_POLLS                       # GPU polls per node (slurm) / pod (iris), at least 1
    poll_interval_s: float = parse_duration(DEFAULT_POLL_INTERVAL)
    cluster: str | None = None
    deadline_text: str = DEFAULT_DEADLINE
    # slurm
    host: str | None = None
    experiment_dir: str | None = None
    ssh_config: Path | None = None
    known_hosts: Path | None = None
    # iris
    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str = "iris"

    def __post_init__(self):
        if self.backend not in BACKEND_NAMES:
            raise UsageError(f"--backend: unknown backend {self.backend!r}; known: {', '.join(BACKEND_NAMES)}")

    @classmethod
    def from_flags(cls, *, backend: str, job: str, bundle_root: Path, deadline: str | None = None,
                   command_timeout: str | None = None, poll_interval: str | None = None,
                   polls: int | None = None, **rest) -> "ProbeOptions":
        """Options from flag spellings (durations as text, ``UsageError`` when one is bad)."""
        deadline = str(deadline or DEFAULT_DEADLINE)
        return cls(backend=backend, job=str(job), bundle_root=Path(bundle_root).expanduser(),
                   deadline_s=parse_duration(deadline), deadline_text=deadline,
                   command_timeout_s=parse_duration(str(command_timeout or DEFAULT_COMMAND_TIMEOUT)),
                   poll_interval_s=parse_duration(str(poll_interval or DEFAULT_POLL_INTERVAL)),
                   polls=max(1, int(polls if polls is not None else DEFAULT_POLLS)), **rest)
