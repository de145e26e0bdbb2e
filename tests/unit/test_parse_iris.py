"""The Iris controller state: ``iris job summary`` text, and the derivation from pods/manifest."""
from __future__ import annotations

import hashlib

from rlhealth.probes.capture import ControllerState
from rlhealth.probes.parse import iris
from rlhealth.probes.parse import kubernetes as k

JOB = "/alice/rl-x"
PG = "iris-pg-" + hashlib.sha256(JOB.encode()).hexdigest()[:16] + "-"

SUMMARY = """Job: /alice/rl-x
State: running  exit=-  failures=1  preemptions=2
Tasks: 0/16 completed  running=15 pending=1
"""


def test_parse_job_summary():
    s = iris.parse_job_summary(SUMMARY)
    assert s["state"] == "running" and s["exit_code"] is None
    assert (s["failure_count"], s["preemption_count"]) == (1, 2)
    assert (s["tasks_completed"], s["tasks_total"], s["task_states"]) == (0, 16, {"running": 15, "pending": 1})
    done = iris.parse_job_summary("State: failed  exit=1  failures=2  preemptions=0\n")
    assert (done["state"], done["exit_code"]) == ("failed", 1)
    assert iris.parse_job_summary("Error: job not found\n") is None
    assert iris.parse_job_summary("State: state-12  exit=-\n")["state"] is None
    assert iris.normalize_state("JOB_STATE_WORKER_FAILED") == "worker_failed"
    assert iris.normalize_state("unspecified") == "pending"


def _pod(rank, gen, phase, terminated=None):
    st = {"phase": phase, "startTime": f"2026-08-01T1{gen}:00:00Z",
          "containerStatuses": [{"name": "task", "restartCount": 0,
                                 "state": {"terminated": terminated} if terminated else {"running": {}}}]}
    return {"metadata": {"name": f"iris-alice-rl-x-{rank}-ab{rank}-{gen}",
                         "labels": {"kueue.x-k8s.io/pod-group-name": PG + str(gen)}},
            "spec": {"containers": [{"name": "task"}]}, "status": st}


def test_state_from_summary_keeps_pod_attempts():
    pods = k.job_pods({"items": [_pod(0, 0, "Failed", {"exitCode": 137, "reason": "OOMKilled",
                                                       "finishedAt": "2026-08-01T10:40:00Z"}),
                                 _pod(0, 1, "Running")]}, JOB)
    st = iris.state_from_summary(iris.parse_job_summary(SUMMARY), pods)
    ControllerState.model_validate(st.model_dump())
    assert (st.source, st.state, st.failure_count, st.preemption_count) == ("iris", "running", 1, 2)
    assert [(a.attempt, a.state, a.exit_code) for a in st.attempts] == [(0, "failed", 137), (1, "running", None)]
    assert st.attempts[0].error.startswith("OOMKilled (exit 137)")
    assert st.attempts[0].finished_at == "2026-08-01T10:40:00Z"


def test_derive_state_from_pods():
    pods = k.job_pods({"items": [_pod(0, 0, "Failed", {"exitCode": 1, "reason": "Error"}),
                                 _pod(0, 1, "Pending"), _pod(1, 1, "Pending")]}, JOB)
    st, note = iris.derive_state(pods, None)
    assert (st.state, st.failure_count) == ("pending", 1) and "derived from 3 pod(s)" in note
    pods = k.job_pods({"items": [_pod(0, 0, "Succeeded", {"exitCode": 0, "reason": "Completed"})]}, JOB)
    assert iris.derive_state(pods, None)[0].state == "succeeded"
    pods = k.job_pods({"items": [_pod(0, 0, "Unknown")]}, JOB)
    assert iris.derive_state(pods, None)[0] is None


def test_derive_state_without_pods():
    st, note = iris.derive_state([], None)
    assert st.state == "absent" and "no pods and no controller record" in note
    st, note = iris.derive_state([], {"job": {"state": "failed"}, "synced_at": "2026-08-01T10:00:00+00:00"})
    assert st.state == "failed" and "manifest.json" in note
    st, note = iris.derive_state([], {"job": {"state": "running"}, "synced_at": "2026-08-01T10:00:00+00:00"})
    assert st.state == "absent" and "manifest.json said job.state='running'" in note
