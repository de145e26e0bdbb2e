"""The Iris live probe against a loopback Kubernetes API server (real TLS, real kubeconfig,
real ``kubernetes`` client, exec over the websocket channel protocol)."""
from __future__ import annotations

import json
import re
import time

import pytest

import scenarios
from scenarios import JOB_ID, pod_name

from rlhealth.probes.allowlist import check_command
from rlhealth.probes.capture import CaptureManifest, ControllerState, GpuPoll, JobInfo
from rlhealth.probes.parse import kubernetes as kparse

pytestmark = pytest.mark.k8s

READ_ONLY_PATH = re.compile(
    r"^/api/v1/namespaces/iris/(pods|events)$|^/api/v1/namespaces/iris/pods/[a-z0-9.-]+(/log|/exec)?$"
    r"|^/api/v1/nodes/[a-z0-9.-]+$")


def load(cap, rel):
    return json.loads((cap / rel).read_text())


def polls(cap) -> list[GpuPoll]:
    return [GpuPoll.model_validate_json(line) for line in (cap / "gpu_polls.jsonl").read_text().splitlines()]


def records(cap):
    return CaptureManifest.model_validate(load(cap, "capture.json")).probes


def assert_read_only(server):
    """Only GET was ever sent, only to read endpoints, and every exec was a websocket upgrade of an
    allow-listed command."""
    assert server.requests, "the server saw no request"
    for r in server.requests:
        assert r.method == "GET", (r.method, r.path)
        assert READ_ONLY_PATH.match(r.path), r.path
        if r.path.endswith("/exec"):
            assert (r.upgrade or "").lower() == "websocket"
            check_command(r.query["command"])


def assert_records_match_server(cap, server):
    """capture.json records every API call exactly as the server received it."""
    recorded = [r.api.split("?")[0].split(" ", 1)[1] for r in records(cap) if r.api and not (r.error or "").startswith(("refused", "not sent"))]
    received = [r.path for r in server.requests]
    assert sorted(recorded) == sorted(received)


def test_healthy_capture(serve, run_probe, no_iris_cli):
    sc = scenarios.healthy()
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "3")
    assert_read_only(server)
    assert_records_match_server(cap, server)
    manifest = CaptureManifest.model_validate(load(cap, "capture.json"))
    assert (manifest.backend, manifest.cluster, manifest.job_id) == ("iris", scenarios.CLUSTER, JOB_ID)
    assert manifest.captured_at == "2026-08-01T14:30:00Z"
    assert all(r.error is None for r in manifest.probes if r.name != "state"), \
        [(r.name, r.error) for r in manifest.probes if r.error]

    # pods.json: the label-selected PodList byte for byte; neighbours excluded, both generations kept
    assert (cap / "pods.json").read_bytes() == (cap / "raw/pods.by-label.json").read_bytes()
    names = sorted(p["metadata"]["name"] for p in load(cap, "pods.json")["items"])
    assert names == sorted([pod_name(0, 1), pod_name(1, 1), pod_name(0, 0).replace("-7f9c2d0-0", "-3e1a9b0-0")])
    first = next(r for r in manifest.probes if r.name == "pods:list-by-label")
    assert first.api == "GET /api/v1/namespaces/iris/pods?labelSelector=iris.job_id%3Dalice.rl-qwen8b-tb"

    # exec only into the newest generation's running pods, never the old attempt or neighbours
    exec_pods = {pod for pod, _ in sc.script.calls}
    assert exec_pods == {pod_name(0, 1), pod_name(1, 1)}

    # GPU polls: 3 polls x 2 pods x 4 GPUs, roles from the Ray actor names, spaced by the interval
    rows = polls(cap)
    assert len(rows) == 24
    by_key = {(r.host, r.gpu): [] for r in rows}
    for r in rows:
        by_key[(r.host, r.gpu)].append(r)
    for (host, gpu), series in by_key.items():
        assert [r.role for r in series] == (["policy"] * 3 if gpu < 2 else ["inference"] * 3)
        assert [r.util_pct for r in series] == ([88, 93, 97] if gpu < 2 else [61, 74, 55])
        assert series[0].mem_total_mib == 81559 and series[0].mem_used_mib > 60000
        assert len(series[0].processes) == 1
    assert "ray::FSDPPolicyWorker" in by_key[(pod_name(0, 1), 0)][0].processes[0]
    assert "ray::AsyncVLLMInferenceEngine" in by_key[(pod_name(0, 1), 2)][0].processes[0]
    # normalized polls are re-derivable from raw/
    assert (cap / f"raw/exec/{pod_name(0, 1)}/query-gpu.poll2.csv").read_text().startswith("0, 97 %")

    # stacks of trainer (driver), policy workers and engines
    stacks = sorted(p.name for p in (cap / "stacks").iterdir())
    assert stacks == sorted([f"{pod_name(0, 1)}__{pid}.txt" for pid in (4001, 4002, 4003, 4004, 4005)]
                            + [f"{pod_name(1, 1)}__{pid}.txt" for pid in (4101, 4102, 4103, 4104)])
    assert "training_step" in (cap / "stacks" / f"{pod_name(0, 1)}__4001.txt").read_text()

    # logs of every pod of the job (bounded), no previous log without a restart
    for name in names:
        assert (cap / "pod_logs" / f"{name}.log").exists()
    assert not list((cap / "pod_logs").glob("*.previous.log"))
    assert "trainer/global_step': 20}" in (cap / "pod_logs" / f"{pod_name(0, 1)}.log").read_text()
    log_rec = next(r for r in manifest.probes if r.name == "pod:log")
    assert "tailLines=20000" in log_rec.api and "container=task" in log_rec.api

    # Ray log listing and tails
    assert (cap / "ray_vllm_logs" / pod_name(0, 1) / "raylet.out").read_text().startswith("[2026-08-01 14:29:50")
    assert not (cap / "ray_vllm_logs" / pod_name(0, 1) / "worker-0a1b2c0-01000000-4001.err").exists()  # empty

    # events of the job's pods
    events = load(cap, "events.json")["items"]
    assert [e["reason"] for e in events] == ["Started"]

    # controller state derived from pods (no iris CLI), marked as such
    state = ControllerState.model_validate(load(cap, "state.json"))
    assert (state.source, state.state, state.failure_count) == ("iris", "running", 1)
    assert [(a.attempt, a.state) for a in state.attempts] == [(0, "failed"), (1, "running")]
    note = next(r for r in manifest.probes if r.name == "state")
    assert note.output == "state.json" and "derived from 3 pod(s)" in note.error and "iris CLI not installed" in note.error

    job = JobInfo.model_validate(load(cap, "job.json"))
    assert job.hardware and (job.hardware.gpu, job.hardware.gpus_per_node, job.hardware.nodes) == ("H100-80GB-SXM", 4, 2)

    # the nodes of the newest generation's pods, one GET each; nodes.json keeps names and labels,
    # derivable from raw/nodes/
    node_names = sorted(p["spec"]["nodeName"] for p in load(cap, "pods.json")["items"] if p["metadata"]["name"].endswith("-1"))
    assert [r.api for r in manifest.probes if r.name == "node:get"] == [f"GET /api/v1/nodes/{n}" for n in node_names]
    nodes = load(cap, "nodes.json")
    assert nodes == kparse.node_list((cap / "raw" / "nodes" / f"{n}.json").read_bytes() for n in node_names)
    assert [n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in nodes["items"]] == ["NVIDIA-H100-80GB-HBM3"] * 2


def test_poll_spacing_follows_poll_interval(serve, run_probe, no_iris_cli):
    """Polls of one pod arrive at the server at least --poll-interval apart (a lower bound only)."""
    sc = scenarios.healthy()
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "3", "--poll-interval", "1.5s")
    arrivals = [t for (pod, argv), t in zip(sc.script.calls, sc.script.call_times)
                if pod == pod_name(0, 1) and argv[1].startswith("--query-gpu=index,utilization")]
    assert len(arrivals) == 3
    # rounds start on a 1.5 s grid; arrival adds a TLS connect whose duration varies a little
    assert arrivals[1] - arrivals[0] >= 1.25 and arrivals[2] - arrivals[1] >= 1.25
    assert arrivals[2] - arrivals[0] >= 2.75
    stamps = sorted({r.t for r in polls(cap)})
    assert len(stamps) >= 3  # each poll carries its own time


def test_colocated_engine_deception_capture(serve, run_probe, no_iris_cli):
    sc = scenarios.deception()
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "3")
    assert_read_only(server)
    rows = polls(cap)
    policy = [r for r in rows if r.role == "policy"]
    engine = [r for r in rows if r.role == "inference"]
    assert len(policy) == len(engine) == 12
    assert all(r.util_pct == 0 and r.mem_used_mib > 60000 for r in policy)  # idle with weights resident
    assert all(r.util_pct >= 28 for r in engine)
    assert len({r.t for r in rows}) >= 2
    for pid in (4001, 4002):
        assert "all_reduce" in (cap / "stacks" / f"{pod_name(0)}__{pid}.txt").read_text()
    assert ControllerState.model_validate(load(cap, "state.json")).state == "running"


def test_oom_restart_fetches_previous_log(serve, run_probe, no_iris_cli):
    sc = scenarios.oom_restart()
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "1")
    assert_read_only(server)
    restarted = pod_name(1)
    assert sorted(p.name for p in (cap / "pod_logs").glob("*.previous.log")) == [f"{restarted}.previous.log"]
    assert "cgroup=1899.8/1900.0 GiB" in (cap / "pod_logs" / f"{restarted}.previous.log").read_text()
    prev = [r for r in records(cap) if r.name == "pod:log-previous"]
    assert len(prev) == 1 and "previous=true" in prev[0].api and prev[0].error is None
    pod = next(p for p in load(cap, "pods.json")["items"] if p["metadata"]["name"] == restarted)
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "OOMKilled"
    events = load(cap, "events.json")["items"]
    assert {e["involvedObject"]["name"] for e in events} == {restarted}
    assert "BackOff" in {e["reason"] for e in events}


def test_pod_deleted_between_list_and_exec(serve, run_probe, no_iris_cli):
    sc = scenarios.deleted_between_list_and_exec()
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "2")
    assert_read_only(server)
    gone = pod_name(1, 1)
    recs = [r for r in records(cap) if r.name.startswith("exec:") and f"/pods/{gone}/" in r.api]
    assert recs and "NotFound" in recs[0].error
    assert all(r.error for r in recs)
    assert all(r.error.startswith("not sent: pod is gone") for r in recs[1:])
    # exactly one exec was sent to the vanished pod; the other pod was polled fully
    assert sum(1 for r in server.requests if r.path == f"/api/v1/namespaces/iris/pods/{gone}/exec") == 1
    rows = polls(cap)
    assert {r.host for r in rows} == {pod_name(0, 1)} and len(rows) == 8
    assert (cap / "pod_logs" / f"{gone}.log").exists()  # read before it vanished


def test_api_500s_and_hung_exec_are_recorded_within_deadline(serve, run_probe, no_iris_cli):
    sc = scenarios.api_faults()
    server, kubeconfig = serve(sc)
    t0 = time.monotonic()
    cap = run_probe(kubeconfig, "--polls", "3", "--command-timeout", "2s", "--deadline", "40s")
    assert time.monotonic() - t0 < 40
    assert_read_only(server)
    recs = records(cap)
    lists = [r for r in recs if r.name == "pods:list-by-label"]
    assert len(lists) == 2 and lists[0].error.startswith("HTTP 500") and lists[1].error is None
    ev = [r for r in recs if r.name == "events:list-namespace"]     # one list for the namespace
    assert len(ev) == 1 and ev[0].error.startswith("HTTP 500")
    assert not (cap / "events.json").exists()  # no events could be read: no file, not an empty list
    bad_log = next(r for r in recs if r.name == "pod:log" and pod_name(1, 1) in r.api)
    assert bad_log.error.startswith("HTTP 500") and not (cap / "pod_logs" / f"{pod_name(1, 1)}.log").exists()
    hung = [r for r in recs if r.name == "exec:nvidia-smi-query-gpu" and pod_name(1, 1) in r.api]
    assert "timed out" in hung[0].error and "timed out" in hung[1].error
    assert hung[2].error.startswith("not sent: 2 exec timeouts")
    rows = polls(cap)
    assert {r.host for r in rows} == {pod_name(0, 1)} and len(rows) == 12
    assert ControllerState.model_validate(load(cap, "state.json")).state == "running"


def test_overall_deadline_stops_the_probe(serve, run_probe, no_iris_cli):
    sc = scenarios.healthy()
    for st in sc.script.states.values():
        st.hang.add("ps")
        st.hang.add("nvidia-smi-query")
    server, kubeconfig = serve(sc)
    t0 = time.monotonic()
    cap = run_probe(kubeconfig, "--polls", "3", "--command-timeout", "4s", "--deadline", "7s")
    assert time.monotonic() - t0 < 7 + 2  # the deadline, plus teardown slack
    recs = records(cap)
    assert any(r.name == "deadline" and "deadline 7s" in r.error for r in recs)
    assert any("timed out" in (r.error or "") for r in recs)
    CaptureManifest.model_validate(load(cap, "capture.json"))


def test_pod_list_failing_leaves_state_unknown(serve, run_probe, no_iris_cli):
    server, kubeconfig = serve(scenarios.pods_unlistable())
    cap = run_probe(kubeconfig)
    assert_read_only(server)
    recs = records(cap)
    assert [r.name for r in recs if r.name.startswith("pods:")] == ["pods:list-by-label"] * 3
    assert all(r.error.startswith("HTTP 500") for r in recs if r.name.startswith("pods:"))
    # the job must not be reported absent just because the API failed
    assert not (cap / "state.json").exists() and not (cap / "pods.json").exists()
    assert "could not be read" in next(r for r in recs if r.name == "state").error
    assert not any(r.path.endswith("/exec") for r in server.requests)


def test_no_pods_is_absent(serve, run_probe, no_iris_cli):
    server, kubeconfig = serve(scenarios.absent())
    cap = run_probe(kubeconfig)
    assert_read_only(server)
    names = [r.name for r in records(cap)]
    assert names[:3] == ["pods:list-by-label", "pods:list-namespace", "pods:select-job-pods"]
    pods = load(cap, "pods.json")
    assert pods["kind"] == "PodList" and pods["items"] == []
    assert len(load(cap, "raw/pods.namespace.json")["items"]) == 2  # neighbours, not the job's
    state = ControllerState.model_validate(load(cap, "state.json"))
    assert state.state == "absent" and state.attempts == []
    assert "no pods and no controller record" in next(r for r in records(cap) if r.name == "state").error
    assert not (cap / "gpu_polls.jsonl").exists()


def test_unlabelled_pods_found_by_name(serve, run_probe, no_iris_cli):
    sc = scenarios.healthy()
    for p in sc.incident.pods:
        if "iris.job_id" in p["metadata"]["labels"] and "rl-qwen8b-tb2" not in p["metadata"]["name"]:
            del p["metadata"]["labels"]["iris.job_id"]
            del p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig, "--polls", "1")
    items = load(cap, "pods.json")["items"]
    names = sorted(p["metadata"]["name"] for p in items)
    assert len(names) == 3 and not any("rl-qwen8b-tb2" in n or "sft-llama" in n for n in names)
    assert {r.host for r in polls(cap)} == {pod_name(0, 1), pod_name(1, 1)}


def test_iris_cli_summary_is_the_state_source(serve, run_probe, tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    argfile = tmp_path / "iris-args"
    (bindir / "iris").write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {argfile}\n'
        "printf 'Job: /alice/rl-qwen8b-tb\\nState: running  exit=-  failures=1  preemptions=2\\n"
        "Tasks: 0/2 completed  running=2\\n'\n")
    (bindir / "iris").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    server, kubeconfig = serve(scenarios.healthy())
    cap = run_probe(kubeconfig, "--polls", "1")
    assert argfile.read_text().split() == ["--cluster=cw-us-east-02a", "job", "summary", JOB_ID]
    rec = next(r for r in records(cap) if r.name == "iris:job-summary")
    assert rec.argv == ["iris", "--cluster=cw-us-east-02a", "job", "summary", JOB_ID] and rec.exit_code == 0
    assert rec.output == "raw/iris_job_summary.txt"
    state = ControllerState.model_validate(load(cap, "state.json"))
    assert (state.state, state.failure_count, state.preemption_count) == ("running", 1, 2)
    assert [a.attempt for a in state.attempts] == [0, 1]
    assert next(r for r in records(cap) if r.name == "state").error is None


def test_tls_is_verified(serve, run_probe, tmp_path, no_iris_cli):
    """A kubeconfig trusting another CA must fail the TLS handshake: the probe records it."""
    from fake_apiserver import make_certs
    server, kubeconfig = serve(scenarios.healthy())
    other_ca, _, _ = make_certs(tmp_path / "other-pki")
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(kubeconfig.read_text().replace(str(server.ca_path), str(other_ca)))
    cap = run_probe(bad, "--polls", "1", "--command-timeout", "3s")
    recs = records(cap)
    assert all(r.error for r in recs), recs
    assert "SSL" in recs[0].error or "certificate" in recs[0].error.lower()
    assert not (cap / "state.json").exists()
    assert not [r for r in server.requests if r.authorized]  # nothing got through the handshake
