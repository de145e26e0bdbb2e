"""The Iris probe reads the launch from the trainer pod (container args, the resolved config file
through a read-only exec), GPU health once per pod, and the flight-recorder dumps of a hang;
against the loopback API server with the real ``kubernetes`` client."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import scenarios
from scenarios import pod_name

from rlhealth.probes.capture import JobInfo

pytestmark = pytest.mark.k8s


def load(cap, rel):
    return json.loads((cap / rel).read_text())


def test_launch_health_and_flight_recorder_capture(serve, run_probe, no_iris_cli):
    sc = scenarios.launched_hang()
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "2")
    for r in server.requests:
        assert r.method == "GET"

    job = JobInfo.model_validate(load(cap, "job.json"))
    assert job.mode_hint == "standard"
    assert job.model and (job.model.name, job.model.active_params_b) == ("Qwen/Qwen3-8B", 8.0)
    assert job.model.source == "config/resolved_config.yaml: trainer.policy.model.path"
    assert job.max_retries == 2 and job.sources["max_retries"] == f"pods.json {pod_name(0)} container task"
    assert job.hardware and job.hardware.gpu == "H100-80GB-SXM"
    assert job.resolved_config == {"trainer": {"policy": {"model": {"path": "Qwen/Qwen3-8B"}}},
                                   "generator": {"num_inference_engines": 2, "enforce_eager": False}}
    assert job.launch_args[:4] == ["bash", "-c", "exec", "python"]
    assert (cap / "config" / "resolved_config.yaml").read_bytes() == scenarios.RESOLVED_CONFIG
    cfg_exec = [argv for pod, argv in sc.script.calls if argv[:1] == ["head"] and argv[-1].endswith(".yaml")]
    assert cfg_exec == [["head", "-c", "1048576", "--", "/app/run/resolved_config.yaml"]]

    health = load(cap, "gpu_health.json")
    by_host = {h["host"]: h for h in health["hosts"]}
    assert set(by_host) == {pod_name(0), pod_name(1)}
    bad = by_host[pod_name(1)]["gpus"][1]
    assert bad["ecc_volatile_uncorrectable"] == 3 and bad["remapped_rows_pending"] is True
    assert [x["xid"] for x in by_host[pod_name(1)]["xid"]] == [79]
    assert not by_host[pod_name(0)]["xid"]

    assert (cap / "flight_recorder" / "decision.txt").read_text().startswith("fetch: hang signature nccl_collective_timeout")
    summary = load(cap, "flight_recorder/summary.json")
    assert summary["stuck"] == [{"process_group": "0:default_pg", "collective": "nccl:all_reduce", "seq": 8,
                                 "ranks": [0, 1, 2]}]
    assert summary["behind"] == [{"process_group": "0:default_pg", "rank": 3, "last_enqueued_seq": 6,
                                  "group_highest_seq": 8}]
    assert summary["suspected"] == [3] and summary["groups"][0]["absent"] == [3]
    env = (cap / "raw" / "exec" / pod_name(0) / "nccl_env_4001.txt").read_text()
    assert env == "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/fr/nccl_trace_rank_\nTORCH_NCCL_TRACE_BUFFER_SIZE=20000\n"
    assert "wJalrXUtnFEMI" not in "".join(p.read_text(errors="replace") for p in cap.rglob("*") if p.is_file())


def test_healthy_job_fetches_no_flight_recorder(serve, run_probe, no_iris_cli):
    server, kubeconfig = serve(scenarios.healthy())
    cap = run_probe(kubeconfig, "--polls", "1")
    assert (cap / "flight_recorder" / "decision.txt").read_text().startswith("not fetched: no hang signature")
    assert not (cap / "flight_recorder" / "summary.json").exists()
    assert all(not g["ecc_volatile_uncorrectable"] for h in load(cap, "gpu_health.json")["hosts"] for g in h["gpus"])


def test_diagnosis_reads_mode_model_and_retry_budget_from_the_pod(serve, tmp_path, no_iris_cli):
    sc = scenarios.launched_hang()
    server, kubeconfig = serve(sc)
    argv = [str(Path(sys.executable).parent / "rlhealth"), "probe", "--backend", "iris", "--cluster", scenarios.CLUSTER,
            "--job", scenarios.JOB_ID, "--kubeconfig", str(kubeconfig), "--bundle-root", str(tmp_path / "b"),
            "--polls", "2", "--poll-interval", "0.3s", "--now", scenarios.NOW_ISO, "--format", "json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    report = json.loads(out.stdout)
    assert report["mode"] == "standard" and report["mode_source"] == "capture job.json mode_hint"
    assert report["verdict"] == "KILL" and out.returncode == 10
    assert report["restarts"]["max_retries"] == 2, report["restarts"]
    assert "dense_7_8b on H100-80GB-SXM" in json.dumps(report["gates"]["resources"]), report["gates"]["resources"]
