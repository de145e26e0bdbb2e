"""End to end: ``rlhealth probe --backend slurm ... --format json`` through real SSH against the real
Slurm, diagnosed by the same path as an offline bundle (contract §5)."""
from __future__ import annotations

import pytest

from conftest import wait_state
from slurm_helpers import run_cli

pytestmark = pytest.mark.slurm
EXIT = {"NO-KILL": 0, "KILL": 10, "ERROR": 20}


def check_report(code, report, stderr, job):
    assert report.get("schema") == "rlhealth.report/v1", f"exit {code}; stderr: {stderr[-2000:]}"
    assert report["job"]["id"] == job
    assert code == EXIT[report["verdict"]], stderr[-2000:]


@pytest.mark.parametrize("mode", [None, "standard"])
def test_same_failure_on_every_restart_is_kill(sshd, scenarios, tmp_path, mode):
    job = scenarios.same_failure[2]
    code, report, err = run_cli(sshd, job, tmp_path, *(["--mode", mode] if mode else []))
    check_report(code, report, err, job)
    assert report["restarts"]["same_failure"] is True, report["restarts"]
    assert report["restarts"]["burned"] == 2
    assert report["verdict"] == "KILL", (report["reasoning"], report["gates"])


def test_timeout_with_healthy_successor_is_not_a_burn(sshd, scenarios, tmp_path):
    t1, t2 = scenarios.timeout_chain
    wait_state(t1, {"TIMEOUT"}, 150)
    code, report, err = run_cli(sshd, t2, tmp_path)
    check_report(code, report, err, t2)
    assert report["restarts"]["burned"] == 0, report["restarts"]
    assert report["verdict"] != "KILL", (report["reasoning"], report["gates"])


def test_cancelled_leg_is_terminal(sshd, scenarios, tmp_path):
    code, report, err = run_cli(sshd, scenarios.cancelled, tmp_path)
    check_report(code, report, err, scenarios.cancelled)
    assert report["terminal"] is True and report["verdict"] == "NO-KILL"


def test_unknown_job_is_error(sshd, tmp_path):
    code, report, err = run_cli(sshd, "987654", tmp_path)
    check_report(code, report, err, "987654")
    assert report["verdict"] == "ERROR"


def test_wrong_host_key_is_error(sshd, scenarios, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK1sCk3hw3x3rqW7HkLk2ZC6d+6m4wq9R1f8n0HnKJ2f\n")
    code, report, err = run_cli(sshd, scenarios.running, tmp_path, "--known-hosts", str(known))
    check_report(code, report, err, scenarios.running)
    assert report["verdict"] == "ERROR"


def test_error_report_names_the_ssh_failure(sshd, scenarios, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK1sCk3hw3x3rqW7HkLk2ZC6d+6m4wq9R1f8n0HnKJ2f\n")
    code, report, err = run_cli(sshd, scenarios.running, tmp_path, "--known-hosts", str(known))
    assert "host key" in report["reasoning"] or "host key" in str(report["gates"])
    assert report["gates"]["liveness"]["status"] == "ERROR"
    assert f"next action: the host key of [127.0.0.1]:{sshd.port} changed" in report["gates"]["liveness"]["finding"]
    assert "--known-hosts FILE" in report["gates"]["liveness"]["finding"]
