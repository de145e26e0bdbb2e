"""Running the probe from the tests: in-process (``capture``) and through the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rlhealth.probes.options import ProbeOptions


def probe_args(sshd, job: str, bundle_root: Path, **over) -> ProbeOptions:
    flags = dict(backend="slurm", job=job, bundle_root=bundle_root, deadline="60s", command_timeout="20s",
                 cluster=None, host=sshd.alias, experiment_dir=None, ssh_config=sshd.ssh_config,
                 known_hosts=sshd.known_hosts, polls=1, poll_interval="1s")
    flags.update(over)
    return ProbeOptions.from_flags(**flags)


def newest_capture(bundle: Path) -> Path:
    captures = sorted((bundle / "rlhealth" / "captures").iterdir())
    assert captures, f"no capture under {bundle}"
    return captures[-1]


def load(capture: Path, name: str):
    return json.loads((capture / name).read_text())


def diagnosed_attempts(bundle: Path) -> list[dict]:
    """The attempts of the bundle's diagnosis (each with the first causal error the diagnosis
    judged from the leg's logs; the probe itself writes none)."""
    from datetime import datetime, timezone

    from rlhealth.diagnose import diagnose

    report = diagnose(bundle, now=datetime.now(timezone.utc))
    return [a.model_dump(mode="json") for a in report.restarts.attempts]


def probes_by_name(capture: Path) -> dict[str, dict]:
    return {p["name"]: p for p in load(capture, "capture.json")["probes"]}


def run_cli(sshd, job: str, bundle_root: Path, *extra: str, timeout: float = 180) -> tuple[int, dict, str]:
    """``rlhealth probe --backend slurm ... --format json`` as a subprocess -> (exit, report, stderr)."""
    # the installed console script, run outside the repository: from the repo root the source tree's
    # rlhealth/ (which has no probes/ subpackage) would shadow the installed package
    argv = [str(Path(sys.executable).parent / "rlhealth"), "probe", "--backend", "slurm", "--host", sshd.alias,
            "--job", job, "--bundle-root", str(bundle_root), "--ssh-config", str(sshd.ssh_config),
            "--known-hosts", str(sshd.known_hosts), "--format", "json", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=bundle_root)
    (Path(bundle_root) / "report.json").write_text(out.stdout)  # kept for inspecting failures
    (Path(bundle_root) / "stderr.txt").write_text(out.stderr)
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        report = {}
    return out.returncode, report, out.stderr
