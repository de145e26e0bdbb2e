"""Pure parsers behind the Iris live probe's normalized files (captured text in, plain data out)."""
from __future__ import annotations

import hashlib
import json
from importlib import resources

import yaml

from rlhealth.probes.parse import kubernetes as k

JOB = "/alice/rl-run-2"
PG = "iris-pg-" + hashlib.sha256(JOB.encode()).hexdigest()[:16] + "-"


def pod(name, labels=None, phase="Running", **status):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"containers": [{"name": "task"}]},
            "status": {"phase": phase, **status}}


def test_job_identity():
    assert k.split_job_id(JOB) == ("alice", "rl-run-2")
    assert k.job_label_value(JOB) == "alice.rl-run-2"
    assert k.pod_group_prefix(JOB) == PG
    for bad in ("alice/rl", "/alice", "/alice/rl/x", "/../rl", ""):
        try:
            k.split_job_id(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_match_by_label_pod_group_and_name_but_never_another_jobs_labels():
    assert k.match_reason(pod("x", {"iris.job_id": "alice.rl-run-2"}), JOB) == "label"
    assert k.match_reason(pod("x", {"kueue.x-k8s.io/pod-group-name": PG + "3"}), JOB) == "pod-group"
    assert k.match_reason(pod("iris-alice-rl-run-2-0-ab12-0"), JOB) == "name"
    # a neighbour whose name contains our short name but whose label names another job
    assert k.match_reason(pod("iris-alice-rl-run-2b-0-ab12-0", {"iris.job_id": "alice.rl-run-2b"}), JOB) is None
    assert k.match_reason(pod("x", {"kueue.x-k8s.io/pod-group-name": PG + "x"}), JOB) is None
    long_job = "/alice/" + "a" * 70
    assert k.match_reason(pod("p", {"iris.job_id": ("alice." + "a" * 70)[:63]}), long_job) == "label"


def test_rank_and_generation_from_names():
    # single-node scheme; the job name ends in a digit and must not be read as the rank
    assert k.parse_pod_name("iris-alice-rl-run-2-3-9f8e7d-1", "rl-run-2") == \
        {"rank": 3, "generation": 1, "scheme": "single-node"}
    assert k.parse_pod_name("iris-alice-rl-run-2-5f3a9c-7", "rl-run-2") == \
        {"rank": 7, "generation": None, "scheme": "leafgroup"}
    assert k.parse_pod_name("weird", "rl-run-2")["rank"] is None


def test_pod_info_restart_oom_and_newest_generation():
    oom = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-08-01T14:24:00Z"}}
    items = [
        pod("iris-alice-rl-run-2-0-aa-0", {"kueue.x-k8s.io/pod-group-name": PG + "0"}, phase="Failed"),
        pod("iris-alice-rl-run-2-0-bb-1", {"kueue.x-k8s.io/pod-group-name": PG + "1"},
            containerStatuses=[{"name": "task", "restartCount": 1, "lastState": oom, "state": {"running": {}}}]),
        pod("iris-alice-rl-run-2-1-cc-1", {"kueue.x-k8s.io/pod-group-name": PG + "1"}),
        pod("iris-bob-other-0-dd-0", {"iris.job_id": "bob.other"}),
    ]
    pods = k.job_pods({"items": items}, JOB)
    assert [p.name for p in pods] == ["iris-alice-rl-run-2-0-aa-0", "iris-alice-rl-run-2-0-bb-1",
                                      "iris-alice-rl-run-2-1-cc-1"]
    newest = k.newest_generation(pods)
    assert [(p.rank, p.generation) for p in newest] == [(0, 1), (1, 1)]
    assert newest[0].restart_count == 1 and newest[0].last_terminated["reason"] == "OOMKilled"
    filtered = k.filter_pod_list({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
                                  "items": items}, JOB)
    assert filtered["kind"] == "PodList" and filtered["metadata"] == {"resourceVersion": "9"}
    assert len(filtered["items"]) == 3


def test_rank_from_iris_task_id_when_name_has_none():
    p = pod("pg-member-x", {"iris.job_id": "alice.rl-run-2"})
    p["spec"]["containers"][0]["env"] = [{"name": "IRIS_TASK_ID", "value": "/alice/rl-run-2/5:2"}]
    assert k.pod_info(p, JOB).rank == 5



def test_numbers_of_thousands_of_digits_in_a_pod_are_not_read():
    """int() refuses more than 4300 digits: such a rank, generation, restart count or GPU limit is unknown."""
    long = "9" * 5_000
    p = pod(f"pg-member-{long}", {"iris.job_id": "alice.rl-run-2", "kueue.x-k8s.io/pod-group-name": PG + long},
            containerStatuses=[{"name": "task", "restartCount": long, "state": {"running": {}}}])
    p["spec"]["containers"][0].update(env=[{"name": "IRIS_TASK_ID", "value": f"/alice/rl-run-2/{long}:2"}],
                                      resources={"limits": {"nvidia.com/gpu": long}})
    info = k.pod_info(p, JOB)
    assert (info.rank, info.generation, info.restart_count, info.gpus_requested) == (None, 0, 0, None)
    assert k.parse_pod_name(f"iris-alice-rl-run-2-{long}-9f8e7d-{long}", "rl-run-2")["rank"] is None


PS = """      1 /bin/bash /opt/iris/run_task.sh
   4001 ray::FSDPPolicyWorker.ppo_train
   4003 ray::AsyncVLLMInferenceEngine.generate
   4005 ray::skyrl_entrypoint
   4007 VLLM::EngineCore
   4009 /usr/bin/python3 /opt/iris/fd_monitor.py
"""
INVENTORY = """0, GPU-aaaa-0, NVIDIA H100 80GB HBM3
1, GPU-aaaa-1, NVIDIA H100 80GB HBM3
2, GPU-aaaa-2, NVIDIA H100 80GB HBM3
3, GPU-aaaa-3, NVIDIA H100 80GB HBM3
"""
APPS = """GPU-aaaa-0, 4001, ray::FSDPPolicyWorker.ppo_train, 61234 MiB
GPU-aaaa-1, 4003, ray::AsyncVLLMInferenceEngine.generate, 70371 MiB
GPU-aaaa-2, 4001, ray::FSDPPolicyWorker.ppo_train, 30000 MiB
GPU-aaaa-2, 4007, [Not Found], 30000 MiB
"""


def table():
    data = yaml.safe_load(resources.files("rlhealth.rules").joinpath("process_roles.yaml").read_text())
    return k.RoleTable.from_data(data)


def test_process_roles_from_the_packaged_table():
    rows = k.parse_ps(PS)
    assert rows[1] == {"pid": 4001, "args": "ray::FSDPPolicyWorker.ppo_train"}
    roles = k.process_roles(rows, table())
    assert roles == {4001: "policy", 4003: "inference", 4005: "driver", 4007: "inference"}
    t = table()
    assert t.role_of("ray::MegatronPolicyWorker.train") == "policy"
    assert t.role_of("ray::RayWorkerWrapper.execute_method") == "inference"
    assert t.role_of("python train.py") is None
    assert {"driver", "policy", "inference"} <= t.stack_roles


def test_gpu_roles_join_apps_with_ps():
    inv = k.parse_gpu_inventory(INVENTORY)
    assert inv[0] == {"gpu": 0, "uuid": "GPU-aaaa-0", "name": "NVIDIA H100 80GB HBM3", "line": 1}
    from rlhealth.probes.parse.nvidia_smi import parse_compute_apps
    roles = k.gpu_roles(inv, parse_compute_apps(APPS), k.parse_ps(PS), table())
    assert roles[0] == ("policy", ["4001 ray::FSDPPolicyWorker.ppo_train"])
    assert roles[1][0] == "inference"
    assert roles[2][0] == "unknown" and len(roles[2][1]) == 2  # colocated policy + engine: never guessed
    assert roles[3] == ("unknown", [])                          # no process


def test_gpu_names_with_commas_and_classes():
    assert k.parse_gpu_inventory("0, GPU-x, NVIDIA Foo, Bar\n")[0]["name"] == "NVIDIA Foo, Bar"
    assert k.gpu_class("NVIDIA H100 80GB HBM3") == "H100-80GB-SXM"
    assert k.gpu_class("NVIDIA H200") == "H200-141GB"
    assert k.gpu_class("NVIDIA GH200 480GB") == "GH200-96GB"
    assert k.gpu_class("NVIDIA GB200") == "GB200-186GB"


LS = """total 1040
drwxr-xr-x 4 root root    4096 2026-08-01 12:30:01.000000000 +0000 .
drwxr-xr-x 9 root root    4096 2026-08-01 12:30:00.000000000 +0000 ..
-rw-r--r-- 1 root root  123456 2026-08-01 14:29:58.123456789 +0000 raylet.out
-rw-r--r-- 1 root root       0 2026-08-01 12:30:02.000000000 +0000 worker-0a-01000000-77.err
lrwxrwxrwx 1 root root      20 2026-08-01 12:30:02.000000000 +0000 latest -> raylet.out
drwxr-xr-x 2 root root    4096 2026-08-01 12:30:01.000000000 +0000 events
"""


def test_ls_full_iso():
    rows = k.parse_ls_full_iso(LS)
    assert [(r["name"], r["type"], r["size"]) for r in rows] == [
        ("raylet.out", "file", 123456), ("worker-0a-01000000-77.err", "file", 0),
        ("latest", "link", 20), ("events", "dir", 4096)]
    assert rows[0]["mtime"].isoformat() == "2026-08-01T14:29:58+00:00"


def test_ls_full_iso_skips_garbled_dates():
    """A date ``datetime`` refuses (day 99, month 13, other scripts' digits) makes no row, as a line
    that does not match; the other rows stay."""
    garbled = LS.replace("2026-08-01 12:30:02.000000000 +0000 worker", "2026-08-99 12:30:02.000000000 +0000 worker")
    garbled = garbled.replace("2026-08-01 12:30:01.000000000 +0000 events", "2026-08-١٢ 12:30:01.000000000 +0000 events")
    garbled = garbled.replace("2026-08-01 12:30:02.000000000 +0000 latest", "2026-13-01 12:30:02.000000000 +0000 latest")
    assert [r["name"] for r in k.parse_ls_full_iso(garbled)] == ["raylet.out"]


def test_events_for_pods():
    ev = {"items": [{"involvedObject": {"name": "a"}, "reason": "BackOff"},
                    {"involvedObject": {"name": "b"}, "reason": "Started"}]}
    assert [e["reason"] for e in k.events_for(ev, ["a"])] == ["BackOff"]
    json.dumps(ev)
