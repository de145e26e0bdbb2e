"""Fixtures for the loopback Kubernetes API server tests (marker ``k8s``)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_apiserver import FakeApiServer  # noqa: E402
import scenarios  # noqa: E402


@pytest.fixture
def no_iris_cli(monkeypatch):
    """A PATH without any ``iris`` executable, so the probe derives the state from pods."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "iris").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(dirs))
    assert shutil.which("iris") is None


@pytest.fixture
def serve(tmp_path):
    """``serve(scenario) -> (server, kubeconfig)``; servers are stopped at teardown."""
    servers = []

    def _serve(scenario):
        server = FakeApiServer(scenario.incident, tmp_path / f"apiserver{len(servers)}").start()
        servers.append(server)
        return server, server.write_kubeconfig()

    yield _serve
    for s in servers:
        s.stop()


def probe_args(kubeconfig: Path, bundle_root: Path, *extra: str):
    """(parsed command line, the ProbeOptions the CLI builds from it)."""
    from rlhealth.cli import build_parser, probe_options
    argv = ["probe", "--backend", "iris", "--cluster", scenarios.CLUSTER, "--job", scenarios.JOB_ID,
            "--kubeconfig", str(kubeconfig), "--bundle-root", str(bundle_root),
            "--poll-interval", "0.3s", "--now", scenarios.NOW_ISO, "--format", "json", *extra]
    args = build_parser().parse_args(argv)
    return args, probe_options(args)


@pytest.fixture
def run_probe(tmp_path):
    """``run_probe(kubeconfig, *extra_cli_args) -> capture directory`` (in-process capture only)."""
    def _run(kubeconfig, *extra):
        from rlhealth.cli import parse_now
        from rlhealth.probes import kubernetes as kprobe
        args, options = probe_args(kubeconfig, tmp_path / "bundles", *extra)
        bundle = kprobe.capture(options, now=parse_now(args.now))
        assert bundle == tmp_path / "bundles" / "jobs" / scenarios.CLUSTER / scenarios.USER / scenarios.JOB
        caps = sorted((bundle / "rlhealth" / "captures").iterdir())
        assert len(caps) == 1, caps
        return caps[0]
    return _run
