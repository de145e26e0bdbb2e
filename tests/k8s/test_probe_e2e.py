"""`rlhealth probe --backend iris` end to end: the real CLI in a subprocess, the loopback API server,
the capture, then the same diagnosis as `rlhealth diagnose` (JSON report, contract §4.2)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import jsonschema
import pytest

import scenarios

pytestmark = pytest.mark.k8s


def probe_cli(serve, tmp_path, scenario, *extra, path_env=None):
    server, kubeconfig = serve(scenario)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(os.path.join(d, "iris")))
    argv = [sys.executable, "-m", "rlhealth", "probe", "--backend", "iris", "--cluster", scenarios.CLUSTER,
            "--job", scenarios.JOB_ID, "--kubeconfig", str(kubeconfig), "--bundle-root", str(tmp_path / "b"),
            "--poll-interval", "0.3s", "--now", scenarios.NOW_ISO, "--format", "json", "--mode", "standard", *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL,
                          cwd=tmp_path)  # not the repo root: `-m` would shadow the installed package
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    from rlhealth.report import load_schema
    jsonschema.validate(report, load_schema())
    assert {r.method for r in server.requests} == {"GET"}
    return proc.returncode, report


def test_healthy_is_not_kill(serve, tmp_path):
    code, report = probe_cli(serve, tmp_path, scenarios.healthy())
    assert report["verdict"] != "KILL" and code != 10
    assert report["gates"]["liveness"]["status"] == "PASS"
    assert report["job"]["id"] == scenarios.JOB_ID and report["job"]["backend"] == "iris"
    assert report["captured_at"].startswith("2026-08-01T14:30")


def test_colocated_engine_deception_is_kill(serve, tmp_path):
    code, report = probe_cli(serve, tmp_path, scenarios.deception())
    assert (report["verdict"], code) == ("KILL", 10)
    live = report["gates"]["liveness"]
    assert live["status"] == "FAIL"
    assert "policy GPUs idle" in live["finding"], live["finding"]  # idle with weights resident
    assert any("gpu_polls.jsonl" in e["source"] for e in live["evidence"])
    assert not report["terminal"]


def test_no_pods_is_terminal(serve, tmp_path):
    code, report = probe_cli(serve, tmp_path, scenarios.absent())
    assert report["terminal"] is True and report["verdict"] == "NO-KILL" and code == 0
    assert report["gates"]["liveness"]["status"] == "FAIL" and "TERMINAL" in report["gates"]["liveness"]["finding"]


def test_unreadable_pod_list_is_error_with_reason(serve, tmp_path):
    code, report = probe_cli(serve, tmp_path, scenarios.pods_unlistable())
    assert (report["verdict"], code) == ("ERROR", 20)
    assert report["gates"]["liveness"]["status"] == "ERROR"


def test_unreachable_api_is_error_within_deadline(tmp_path):
    """Nothing listens on the API address: every call fails fast, the verdict is ERROR."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n"
        f"    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: false\n"
        "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: gone\n    user: u\n"
        "current-context: c\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rlhealth", "probe", "--backend", "iris", "--cluster", scenarios.CLUSTER,
                           "--job", scenarios.JOB_ID, "--kubeconfig", str(kubeconfig), "--bundle-root", str(tmp_path / "b"),
                           "--deadline", "20s", "--command-timeout", "3s", "--now", scenarios.NOW_ISO,
                           "--format", "json", "--mode", "standard"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert time.monotonic() - t0 < 20 + 15  # deadline plus interpreter start-up and diagnosis
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert (report["verdict"], proc.returncode) == ("ERROR", 20)


def test_api_faults_surface_as_error(serve, tmp_path):
    """A pod log the API refused (HTTP 500) is evidence that should exist: ERROR naming the failed probe."""
    code, report = probe_cli(serve, tmp_path, scenarios.api_faults(), "--command-timeout", "2s")
    assert (report["verdict"], code) == ("ERROR", 20)
    assert report["gates"]["liveness"]["status"] == "ERROR"
    assert "probe 'pod:log' failed" in report["gates"]["liveness"]["finding"]
    assert "HTTP 500" in report["gates"]["liveness"]["finding"]
    assert any("exec:nvidia-smi-query-gpu" in p["reason"] for p in report["problems"])
