"""Faults of the Kubernetes probe end as evidence problems inside --deadline, with the affected gate
ERROR and a next action that names the fix: an unreadable kubeconfig, a missing context, expired
credentials (401), throttling (429 with Retry-After), a failing API (5xx), a hung exec."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import scenarios
from fake_apiserver import Fault

pytestmark = pytest.mark.k8s
SLACK_S = 15  # interpreter start-up and the diagnosis


def run(tmp_path, kubeconfig, *extra, deadline="20s"):
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(os.path.join(d, "iris")))
    argv = [sys.executable, "-m", "rlhealth", "probe", "--backend", "iris", "--cluster", scenarios.CLUSTER,
            "--job", scenarios.JOB_ID, "--kubeconfig", str(kubeconfig), "--bundle-root", str(tmp_path / "b"),
            "--poll-interval", "0.3s", "--polls", "1", "--now", scenarios.NOW_ISO, "--format", "json",
            "--deadline", deadline, "--command-timeout", "3s", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL, cwd=tmp_path)
    took = time.monotonic() - t0
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), took


def all_text(report) -> str:
    return json.dumps(report["gates"]) + json.dumps(report["problems"])


def test_missing_kubeconfig_names_the_flag(tmp_path):
    code, report, took = run(tmp_path, tmp_path / "no-such-kubeconfig")
    assert (report["verdict"], code) == ("ERROR", 20) and took < 20 + SLACK_S
    assert report["gates"]["liveness"]["status"] == "ERROR"
    finding = report["gates"]["liveness"]["finding"]
    assert "probe 'kubeconfig' failed" in finding and "next action: pass --kubeconfig FILE" in finding, finding


def test_missing_kubeconfig_next_action_is_the_fix(tmp_path):
    code, report, took = run(tmp_path, tmp_path / "no-such-kubeconfig")
    assert "provide the launch configuration" not in report["next_action"].lower(), report["next_action"]
    assert "kubeconfig" in report["next_action"].lower(), report["next_action"]


def test_garbage_kubeconfig_names_the_flag(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("this: [is not a kubeconfig\n")
    code, report, _ = run(tmp_path, bad)
    assert report["verdict"] == "ERROR"
    assert "next action: pass --kubeconfig FILE" in report["gates"]["liveness"]["finding"]


def test_missing_context_names_the_flag(serve, tmp_path):
    server, kubeconfig = serve(scenarios.healthy())
    code, report, _ = run(tmp_path, kubeconfig, "--context", "no-such-context")
    assert report["verdict"] == "ERROR" and not server.requests
    assert f"next action: pass --context NAME with a context defined in {kubeconfig}" in report["gates"]["liveness"]["finding"]


def test_expired_credentials(serve, tmp_path):
    server, kubeconfig = serve(scenarios.healthy())
    kubeconfig.write_text(kubeconfig.read_text().replace(server.token, "expired-token"))
    code, report, took = run(tmp_path, kubeconfig)
    assert (report["verdict"], code) == ("ERROR", 20) and took < 20 + SLACK_S
    assert all(not r.authorized for r in server.requests)
    text = report["gates"]["liveness"]["finding"]
    assert "HTTP 401" in text and "log in to the cluster again" in text and str(kubeconfig) in text, text


def test_throttled_list_is_retried_after_retry_after(serve, run_probe, no_iris_cli):
    sc = scenarios.healthy()
    sc.incident.faults = [Fault("GET", r"/pods$", 429, times=1, retry_after="1")]
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "1")
    recs = [r for r in json.loads((cap / "capture.json").read_text())["probes"] if r["name"] == "pods:list-by-label"]
    assert len(recs) == 2 and recs[0]["error"].startswith("HTTP 429") and recs[1]["error"] is None
    lists = [r for r in server.requests if r.path.endswith("/pods")]
    assert len(lists) == 2
    assert (cap / "pods.json").is_file()


def test_throttled_beyond_the_deadline_ends_with_the_wait(serve, tmp_path):
    sc = scenarios.healthy()
    sc.incident.faults = [Fault("GET", r"/pods$", 429, retry_after="600")]
    server, kubeconfig = serve(sc)
    code, report, took = run(tmp_path, kubeconfig, deadline="10s")
    assert took < 10 + SLACK_S
    assert len([r for r in server.requests if r.path.endswith("/pods")]) == 1  # not hammered
    assert report["verdict"] == "ERROR" and report["gates"]["liveness"]["status"] == "ERROR"
    assert "Retry-After 600s" in all_text(report), all_text(report)


def test_failing_api_names_a_retry(serve, tmp_path):
    server, kubeconfig = serve(scenarios.pods_unlistable())
    code, report, took = run(tmp_path, kubeconfig)
    assert report["verdict"] == "ERROR" and took < 20 + SLACK_S
    assert "HTTP 500" in report["gates"]["liveness"]["finding"]
    assert "kept failing (HTTP 500)" in report["gates"]["liveness"]["finding"]


def test_hung_exec_names_the_pod(serve, tmp_path):
    sc = scenarios.healthy()
    hung = scenarios.pod_name(1, 1)
    sc.script.states[hung].hang.add("nvidia-smi-query")
    server, kubeconfig = serve(sc)
    code, report, took = run(tmp_path, kubeconfig, "--mode", "standard", deadline="30s")
    assert took < 30 + SLACK_S
    reasons = [p["reason"] for p in report["problems"] if "exec:nvidia-smi-query-gpu" in p["reason"]]
    assert reasons and f"next action: exec into pod {hung} did not finish within --command-timeout 3s" in reasons[0], reasons
