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


def test_every_probe_appends_to_the_verdict_history(serve, tmp_path):
    """Two probes of one job: two dated lines in rlhealth/verdicts.jsonl, the flip visible in `history`."""
    from rlhealth.history import HISTORY_FILE

    _, first = probe_cli(serve, tmp_path, scenarios.healthy())
    _, second = probe_cli(serve, tmp_path, scenarios.deception())
    bundle = first["evidence_dir"]
    assert second["evidence_dir"] == bundle
    lines = [json.loads(x) for x in (tmp_path / bundle / HISTORY_FILE).read_text().splitlines()]
    assert [e["verdict"] for e in lines] == [first["verdict"], "KILL"]
    assert [(e["command"], e["t"]) for e in lines] == [("probe", scenarios.NOW_ISO)] * 2
    assert lines[0]["capture"] != lines[1]["capture"] and all(e["capture"] for e in lines)
    assert lines[1]["gates"]["liveness"] == "FAIL" and lines[1]["argv"][:3] == ["rlhealth", "probe", "--backend"]
    from rlhealth import __version__
    assert {e["rlhealth"] for e in lines} == {__version__}
    out = subprocess.run([sys.executable, "-m", "rlhealth", "history", str(tmp_path / bundle), "--format", "json"],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    entries = json.loads(out.stdout)["entries"]
    assert [e["flipped"] for e in entries] == [False, first["verdict"] != "KILL"]


def test_probe_writes_an_html_report(serve, tmp_path):
    server, kubeconfig = serve(scenarios.deception())
    out = tmp_path / "probe.html"
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(os.path.join(d, "iris")))
    proc = subprocess.run([sys.executable, "-m", "rlhealth", "probe", "--backend", "iris", "--cluster", scenarios.CLUSTER,
                           "--job", scenarios.JOB_ID, "--kubeconfig", str(kubeconfig), "--bundle-root", str(tmp_path / "b"),
                           "--poll-interval", "0.3s", "--now", scenarios.NOW_ISO, "--format", "html", "-o", str(out),
                           "--mode", "standard"], capture_output=True, text=True, env=env, timeout=300,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.returncode == 10 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    page = out.read_text()
    assert 'id="verdict"' in page and ">KILL<" in page and 'data-plot="gpus"' in page
    assert '<table id="history">' in page  # the probe's own history line is shown


def test_node_labels_reach_the_gpu_type_and_a_disagreement_is_measured(serve, tmp_path):
    """The nodes' GPU product label (read per node) is a GPU source of the diagnosis; here it names an
    H200 while nvidia-smi in the pods names an H100: measured as a disagreement, judged on the slower."""
    sc = scenarios.healthy()
    sc.incident.node_labels = {"nvidia.com/gpu.product": "NVIDIA-H200"}
    code, report = probe_cli(serve, tmp_path, sc)
    floor = [f["finding"] for f in report["gates"]["resources"]["findings"] if f["rule"] == "resources.throughput_ok"]
    assert len(floor) == 1 and "GPU sources disagree" in floor[0], report["gates"]["resources"]["findings"]
    assert "nodes.json:" in floor[0] and "names H200-141GB" in floor[0] and "names H100-80GB-SXM" in floor[0]
    assert "judged against the slowest, H100-80GB-SXM" in floor[0]
    assert report["verdict"] != "KILL" and code != 10


def test_a_forbidden_node_read_is_listed_not_judged(serve, tmp_path):
    """Reading nodes needs a cluster-scoped permission many users lack: the 403 is a listed problem,
    not an ERROR of any gate, and the GPU type still comes from nvidia-smi."""
    from fake_apiserver import Fault
    sc = scenarios.healthy()
    sc.incident.faults.append(Fault("GET", r"^/api/v1/nodes/", status=403))
    code, report = probe_cli(serve, tmp_path, sc)
    assert any("probe 'node:get' failed" in p["reason"] for p in report["problems"]), report["problems"]
    assert report["gates"]["resources"]["status"] == "PASS" and report["verdict"] != "KILL"
    floor = [f["finding"] for f in report["gates"]["resources"]["findings"] if f["rule"] == "resources.throughput_ok"]
    assert len(floor) == 1 and "on H100-80GB-SXM;" in floor[0] and "disagree" not in floor[0], floor
