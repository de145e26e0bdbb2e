"""Faults: wrong or unknown host key, unknown job id, a command hanging past its timeout, sshd
going away mid-probe. Each is recorded in capture.json (missing evidence, never a crash), no
state.json is invented, and the probe returns within its deadline."""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from rlhealth.probes import slurm as probe_slurm
from conftest import JOB_USER, _keygen
from slurm_helpers import load, newest_capture, probe_args, probes_by_name

pytestmark = pytest.mark.slurm
SLACK_S = 10  # process start, connection teardown


def timed_capture(args):
    t0 = time.monotonic()
    bundle = probe_slurm.capture(args)
    return bundle, time.monotonic() - t0


def test_wrong_host_key_is_refused_before_any_command(sshd, scenarios, tmp_path):
    other = _keygen(tmp_path / "impostor")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {' '.join(other.split()[:2])}\n")
    before = sshd.session_starts()
    bundle = probe_slurm.capture(probe_args(sshd, scenarios.running, tmp_path, known_hosts=known))
    cap = newest_capture(bundle)
    (rec,) = load(cap, "capture.json")["probes"]
    assert rec["name"] == "ssh connect" and "does not match known_hosts" in rec["error"]
    assert (f"next action: the host key of [127.0.0.1]:{sshd.port} changed: verify the new key out of band, "
            f"then replace its line in {known}") in rec["error"]
    assert not (cap / "state.json").exists()
    assert sshd.session_starts() == before


def test_unknown_host_key_is_not_accepted(sshd, scenarios, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    bundle = probe_slurm.capture(probe_args(sshd, scenarios.running, tmp_path, known_hosts=empty))
    (rec,) = load(newest_capture(bundle), "capture.json")["probes"]
    assert "not found in known_hosts" in rec["error"] and "refused" in rec["error"]
    assert f"next action: add the verified host key of [127.0.0.1]:{sshd.port} to {empty}" in rec["error"]
    assert empty.read_text() == ""  # nothing was added


def test_connection_refused_is_recorded(sshd, tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text(sshd.ssh_config.read_text().replace(f"Port {sshd.port}", "Port 1"))
    bundle = probe_slurm.capture(probe_args(sshd, "123", tmp_path, ssh_config=config))
    (rec,) = load(newest_capture(bundle), "capture.json")["probes"]
    assert rec["name"] == "ssh connect" and rec["error"]


def test_unknown_job_id(sshd, tmp_path):
    cap = newest_capture(probe_slurm.capture(probe_args(sshd, "987654", tmp_path)))
    recs = probes_by_name(cap)
    assert "Invalid job id" in recs["scontrol show job 987654"]["error"]
    assert "unknown to scontrol and sacct" in recs["slurm job lookup"]["error"]
    assert "not found" in recs["normalize"]["error"]
    assert not (cap / "state.json").exists()


@pytest.fixture
def slow_sacct(start_sshd, tmp_path):
    """A second sshd whose sessions see a fake ``sacct`` first on PATH (sshd ``SetEnv PATH=``):
    it touches a marker, then sleeps far past any command timeout."""
    shared = Path(tempfile.mkdtemp(prefix="rlhealth-fakebin-"))  # reachable by the job user
    shared.chmod(0o777)
    fakebin = shared / "bin"
    fakebin.mkdir(mode=0o755)
    marker = shared / "sacct-started"
    (fakebin / "sacct").write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 40\n")
    (fakebin / "sacct").chmod(0o755)
    yield start_sshd(path_prefix=fakebin), marker
    shutil.rmtree(shared, ignore_errors=True)


def test_command_hanging_past_its_timeout(slow_sacct, scenarios, tmp_path):
    server, marker = slow_sacct
    args = probe_args(server, scenarios.running, tmp_path, command_timeout="3s", deadline="40s")
    bundle, took = timed_capture(args)
    assert took < 40 + SLACK_S
    cap = newest_capture(bundle)
    recs = probes_by_name(cap)
    assert marker.exists()  # the fake sacct really ran on the server side
    assert recs["sacct job"]["error"].startswith("timed out after 3.0s")
    assert "next action: 'sacct job' did not answer within --command-timeout 3s" in recs["sacct job"]["error"]
    assert recs["sacct job"]["exit_code"] is None
    assert recs[f"scontrol show job {scenarios.running}"]["exit_code"] == 0  # other evidence still taken
    assert not (cap / "state.json").exists()
    assert "'sacct job' failed: timed out" in recs["normalize"]["error"]


def test_overall_deadline_bounds_the_probe(slow_sacct, scenarios, tmp_path):
    server, _ = slow_sacct
    args = probe_args(server, scenarios.running, tmp_path, command_timeout="60s", deadline="6s")
    bundle, took = timed_capture(args)
    assert took < 6 + SLACK_S
    recs = load(newest_capture(bundle), "capture.json")["probes"]
    assert any("timed out" in (r["error"] or "") or "deadline" in (r["error"] or "") for r in recs)


def test_sshd_stopped_mid_probe(slow_sacct, scenarios, tmp_path):
    server, marker = slow_sacct

    def kill_when_sacct_runs():
        end = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < end:
            time.sleep(0.1)
        server.kill_all()

    killer = threading.Thread(target=kill_when_sacct_runs)
    killer.start()
    args = probe_args(server, scenarios.running, tmp_path, command_timeout="30s", deadline="60s")
    bundle, took = timed_capture(args)
    killer.join()
    assert took < 30 + SLACK_S
    cap = newest_capture(bundle)
    recs = probes_by_name(cap)
    assert "SSH connection lost" in recs["sacct job"]["error"]
    assert "SSH connection lost" in recs["probe aborted"]["error"]
    assert "next action: the SSH connection to slurm-test dropped mid-probe" in recs["probe aborted"]["error"]
    assert not (cap / "state.json").exists()


@pytest.fixture
def hung_node(start_sshd):
    """An sshd whose srun steps find an ``nvidia-smi`` that never answers (a node whose GPU
    driver hangs): the probe gives up on the node after one timeout."""
    shared = Path(tempfile.mkdtemp(prefix="rlhealth-hungbin-"))
    shared.chmod(0o755)
    fakebin = shared / "bin"
    fakebin.mkdir(mode=0o755)
    (fakebin / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 60\n")
    (fakebin / "nvidia-smi").chmod(0o755)
    yield start_sshd(path_prefix=fakebin)
    shutil.rmtree(shared, ignore_errors=True)


def test_node_that_does_not_answer_is_skipped_within_the_deadline(hung_node, scenarios, tmp_path):
    args = probe_args(hung_node, scenarios.running, tmp_path, command_timeout="4s", deadline="60s", polls=3,
                      poll_interval="1s")
    bundle, took = timed_capture(args)
    assert took < 30  # one timeout on the node, not one per command
    cap = newest_capture(bundle)
    recs = load(cap, "capture.json")["probes"]
    inventory = [r for r in recs if r["name"] == "gpu inventory vm"]
    assert len(inventory) == 1 and inventory[0]["error"].startswith("timed out")
    node = next(r for r in recs if r["name"] == "node vm")
    assert "next action: node vm did not answer within --command-timeout 4s and was skipped: check its state (sinfo -n vm)" in node["error"]
    assert not [r for r in recs if r["name"] in ("gpu poll vm", "ps vm") or r["name"].startswith("py-spy vm")]
    assert load(cap, "state.json")["state"] == "running"  # the rest of the evidence is kept


def test_proxyjump_through_a_second_sshd(sshd, start_sshd, scenarios, tmp_path):
    """The login node is reached only through a jump host (a second real sshd), as ProxyJump in the
    ssh config says; both host keys are verified against known_hosts."""
    jump = start_sshd()
    config = tmp_path / "ssh_config"
    target = sshd.ssh_config.read_text()
    jump_block = jump.ssh_config.read_text().replace("Host slurm-test", "Host jumphost")
    config.write_text(target.replace("    IdentitiesOnly yes\n", "    IdentitiesOnly yes\n    ProxyJump jumphost\n") + jump_block)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts.read_text() + jump.known_hosts.read_text())
    jump_before = jump.log.read_text(errors="replace").count("Accepted publickey")
    bundle = probe_slurm.capture(probe_args(sshd, scenarios.running, tmp_path, ssh_config=config, known_hosts=known))
    cap = newest_capture(bundle)
    connect = probes_by_name(cap)["ssh connect"]
    assert connect["error"] is None and connect["api"].endswith(" via jumphost")
    assert jump.log.read_text(errors="replace").count("Accepted publickey") == jump_before + 1
    assert load(cap, "state.json")["state"] == "running"


def test_proxyjump_host_with_changed_key_is_refused(sshd, start_sshd, scenarios, tmp_path):
    jump = start_sshd()
    config = tmp_path / "ssh_config"
    config.write_text(sshd.ssh_config.read_text().replace("    IdentitiesOnly yes\n", "    IdentitiesOnly yes\n    ProxyJump jumphost\n")
                      + jump.ssh_config.read_text().replace("Host slurm-test", "Host jumphost"))
    other = _keygen(tmp_path / "impostor")
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts.read_text() + f"[127.0.0.1]:{jump.port} {' '.join(other.split()[:2])}\n")
    bundle = probe_slurm.capture(probe_args(sshd, scenarios.running, tmp_path, ssh_config=config, known_hosts=known))
    (rec,) = load(newest_capture(bundle), "capture.json")["probes"]
    assert "does not match known_hosts" in rec["error"] and "next action:" in rec["error"]


def test_key_the_server_does_not_accept_names_the_identity_file(sshd, scenarios, tmp_path):
    _keygen(tmp_path / "stranger")
    config = tmp_path / "ssh_config"
    text = sshd.ssh_config.read_text()
    config.write_text("\n".join(f"    IdentityFile {tmp_path}/stranger" if line.strip().startswith("IdentityFile") else line
                                for line in text.splitlines()) + "\n")
    bundle, took = timed_capture(probe_args(sshd, scenarios.running, tmp_path, ssh_config=config))
    assert took < 20
    (rec,) = load(newest_capture(bundle), "capture.json")["probes"]
    assert rec["name"] == "ssh connect" and "authentication failed" in rec["error"]
    assert f"next action: make a key the login node accepts available (IdentityFile for the host in {config}" in rec["error"]
