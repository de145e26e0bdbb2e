"""Read-only by construction (refusals happen before anything is sent), and kubectl against the
same loopback server as evidence that it speaks the real protocol."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import pytest

import scenarios
from scenarios import pod_name

pytestmark = pytest.mark.k8s


def _client(kubeconfig):
    from rlhealth.probes import kubernetes as kprobe
    return kprobe._make_client(str(kubeconfig), None, tempfile.mkdtemp())


def test_write_verbs_and_unlisted_commands_are_refused_before_sending(serve):
    from rlhealth.probes.allowlist import CommandRefused
    from rlhealth.probes.kubernetes import RefusedRequest
    server, kubeconfig = serve(scenarios.healthy())
    api, api_client, stream = _client(kubeconfig)
    target = pod_name(0, 1)
    with pytest.raises(RefusedRequest):
        api.delete_namespaced_pod(target, "iris", _request_timeout=5)
    with pytest.raises(RefusedRequest):
        api.create_namespaced_pod("iris", {"metadata": {"name": "x"}}, _request_timeout=5)
    with pytest.raises(RefusedRequest):
        api.patch_namespaced_pod(target, "iris", {"metadata": {"labels": {"a": "b"}}}, _request_timeout=5)
    with pytest.raises(RefusedRequest):  # a read endpoint outside the allowed set (secrets)
        api.read_namespaced_secret("iris-task-env", "iris", _request_timeout=5)
    with pytest.raises(RefusedRequest):  # no call without a timeout
        api.list_namespaced_pod("iris")
    with pytest.raises(RefusedRequest):  # one node by name is readable; listing every node is not
        api.list_node(_request_timeout=5)
    with pytest.raises(RefusedRequest):  # nor a node's status subresource, nor any write to a node
        api.read_node_status("gd92c01", _request_timeout=5)
    with pytest.raises(RefusedRequest):
        api.patch_node("gd92c01", {"spec": {"unschedulable": True}}, _request_timeout=5)
    with pytest.raises(RefusedRequest):
        api.delete_node("gd92c01", _request_timeout=5)
    for argv in (["kill", "-9", "1"], ["rm", "-rf", "/tmp/ray"], ["sh", "-c", "nvidia-smi"],
                 ["py-spy", "record", "--pid", "1"], ["nvidia-smi", "-r"],
                 # writes through exec: redirection, copies, tee, a cleared kernel log
                 ["sh", "-c", "echo x > /tmp/f"], ["tee", "/tmp/f"], ["cp", "--", "/tmp/nccl_trace_rank_0", "/tmp/x"],
                 ["head", "-c", "1", "--", "/tmp/a", ">", "/tmp/b"], ["dmesg", "-c"],
                 ["nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER", "-e", "0"]):
        with pytest.raises(CommandRefused):
            stream(api.connect_get_namespaced_pod_exec, target, "iris", command=argv, container="task",
                   stderr=True, stdin=False, stdout=True, tty=False, _request_timeout=5)
    with pytest.raises(RefusedRequest):  # stdin is never opened
        stream(api.connect_get_namespaced_pod_exec, target, "iris", command=["hostname"], container="task",
               stderr=True, stdin=True, stdout=True, tty=False, _request_timeout=5)
    assert server.requests == []  # nothing reached the server
    assert sc_calls_empty(server)
    # and an allowed call does go through the same client
    out = stream(api.connect_get_namespaced_pod_exec, target, "iris", command=["ps", "-eo", "pid,args"],
                 container="task", stderr=True, stdin=False, stdout=True, tty=False, _request_timeout=5)
    assert "ray::FSDPPolicyWorker" in out
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in server.requests] == [("GET", "exec")]


def sc_calls_empty(server) -> bool:
    return not getattr(server.incident.exec_handler, "calls", [])


# --------------------------------------------------------------------------- kubectl

def _kubectl():
    exe = shutil.which("kubectl")
    assert exe, "kubectl is not installed: run scripts/services/kubectl.sh (scripts/test does)"
    return exe


def _run_kubectl(kubeconfig, tmp_path, *args, timeout=60):
    env = dict(os.environ, HOME=str(tmp_path / "kubectl-home"), KUBECONFIG=str(kubeconfig))
    return subprocess.run([_kubectl(), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "kcache"),
                           "-n", "iris", *args], capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _kubectl_minor() -> int:
    out = subprocess.run([_kubectl(), "version", "--client", "-o", "json"], capture_output=True, text=True,
                         timeout=60).stdout
    m = re.search(r'"minor":\s*"(\d+)', out)
    assert m, out
    return int(m.group(1))


def test_kubectl_get_pods_and_logs(serve, tmp_path):
    server, kubeconfig = serve(scenarios.healthy())
    p = _run_kubectl(kubeconfig, tmp_path, "get", "pods")
    assert p.returncode == 0, p.stderr
    assert pod_name(0, 1) in p.stdout and "Running" in p.stdout and "NAME" in p.stdout
    p = _run_kubectl(kubeconfig, tmp_path, "get", "pods", "-l", "iris.job_id=alice.rl-qwen8b-tb", "-o", "json")
    assert p.returncode == 0, p.stderr
    assert "rl-qwen8b-tb2" not in p.stdout and pod_name(1, 1) in p.stdout
    p = _run_kubectl(kubeconfig, tmp_path, "logs", pod_name(0, 1), "-c", "task", "--tail=1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("(AsyncVLLMInferenceEngine pid=4003)") and p.stdout.count("\n") == 1
    p = _run_kubectl(kubeconfig, tmp_path, "logs", "iris-no-such-pod", "-c", "task")
    assert p.returncode != 0 and "(NotFound)" in p.stderr
    assert {r.method for r in server.requests} == {"GET"}
    assert all(r.authorized for r in server.requests)


def test_kubectl_exec_over_websocket(serve, tmp_path):
    minor = _kubectl_minor()
    if minor < 30:
        pytest.skip(f"kubectl 1.{minor} execs over SPDY only; the loopback server speaks the websocket "
                    "channel protocol (kubectl >= 1.30). get/logs are still tested with this kubectl.")
    sc = scenarios.healthy()
    server, kubeconfig = serve(sc)
    p = _run_kubectl(kubeconfig, tmp_path, "exec", pod_name(0, 1), "-c", "task", "--",
                     "nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw",
                     "--format=csv,noheader")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "0, 88 %, 61234 MiB, 81559 MiB, 612.30 W"
    p = _run_kubectl(kubeconfig, tmp_path, "exec", pod_name(0, 1), "-c", "task", "--", "no-such-tool")
    assert p.returncode != 0 and "executable file not found" in p.stderr
    execs = [r for r in server.requests if r.path.endswith("/exec")]
    assert execs and all(r.method == "GET" and r.upgrade.lower() == "websocket" for r in execs)
    assert {r.subprotocol for r in execs} <= {"v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"}
