"""A probe's cost grows gently with the job: against 64 pods whose identity may not exec, events are
listed once for the namespace, the refused exec is sent once and reported once, every node is read
once, and the whole probe stays within a few requests per pod."""
from __future__ import annotations

import json
from collections import Counter

import pytest

import scenarios

from rlhealth.probes.capture import CaptureManifest

pytestmark = pytest.mark.k8s
PODS = 64
MAX_REQUESTS_PER_POD = 4


def test_a_wide_job_that_forbids_exec_costs_few_requests_per_pod(serve, run_probe, no_iris_cli):
    sc = scenarios.wide_exec_forbidden(PODS)
    server, kubeconfig = serve(sc)
    cap = run_probe(kubeconfig)           # default --polls 3: polls are exec and must not be waited for
    kinds = Counter()
    for r in server.requests:
        kind = r.path.rsplit("/", 1)[-1] if r.path.endswith(("/exec", "/log", "/events")) else \
            ("node" if r.path.startswith("/api/v1/nodes/") else r.path)
        kinds[kind] += 1
    assert kinds["exec"] == 1, kinds                     # refused once, never sent again
    assert kinds["events"] == 1, kinds                   # one namespace list, not one per pod
    assert kinds["log"] == PODS and kinds["node"] == PODS, kinds
    assert len(server.requests) <= MAX_REQUESTS_PER_POD * PODS, kinds

    manifest = CaptureManifest.model_validate_json((cap / "capture.json").read_text())
    refused = [r for r in manifest.probes if r.name.startswith("exec:") and r.error]
    assert len(refused) == 1, [(r.name, r.error) for r in refused]
    assert "403" in refused[0].error and "no further exec is sent" in refused[0].error
    assert "next action: the identity of context" in refused[0].error
    # every pod's log and node were read and recorded in request order
    logs = [r.api.split("?")[0] for r in manifest.probes if r.name == "pod:log"]
    assert logs == [f"GET /api/v1/namespaces/iris/pods/{scenarios.pod_name(rank)}/log" for rank in range(PODS)]
    assert all(r.error is None for r in manifest.probes if r.name in ("pod:log", "node:get"))
    assert len(json.loads((cap / "nodes.json").read_text())["items"]) == PODS
    # the job's events only, pod by pod; the neighbours' are in the raw namespace list alone
    events = json.loads((cap / "events.json").read_text())["items"]
    assert [e["involvedObject"]["name"] for e in events] == [scenarios.pod_name(rank) for rank in range(PODS)]
    assert len(json.loads((cap / "raw" / "events.namespace.json").read_text())["items"]) == PODS + 2


def test_a_refused_exec_is_one_problem_in_the_diagnosis(serve, tmp_path, no_iris_cli):
    """The diagnosis lists the refused exec once (not once per pod and command)."""
    from rlhealth.cli import main
    from rlhealth.commands import run_captured

    sc = scenarios.wide_exec_forbidden(4)
    server, kubeconfig = serve(sc)
    argv = ["probe", "--backend", "iris", "--cluster", scenarios.CLUSTER, "--job", scenarios.JOB_ID,
            "--kubeconfig", str(kubeconfig), "--bundle-root", str(tmp_path / "b"), "--poll-interval", "0.3s",
            "--now", scenarios.NOW_ISO, "--format", "json"]
    text, _code = run_captured(main, argv)
    report = json.loads(text)
    exec_problems = [p for p in report["problems"] if "exec:" in p["reason"]]
    assert len(exec_problems) == 1 and "403" in exec_problems[0]["reason"], report["problems"]
