"""The Slurm probe against a real single-node Slurm through a real sshd: what it captures."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from rlhealth.probes import slurm as probe_slurm
from rlhealth.probes.allowlist import load_allowlist
from slurm_helpers import diagnosed_attempts, load, newest_capture, probe_args, probes_by_name

pytestmark = pytest.mark.slurm
TRACEBACK_ERROR = "AttributeError: 'Qwen3MoeConfig' object has no attribute 'norm_topk_prob'"



@pytest.fixture(scope="module")
def sshd(start_sshd):
    """These captures assert that nvidia-smi and py-spy are absent on the node: the sessions' PATH
    leaves them out on a host that has them (every GPU host has nvidia-smi)."""
    return start_sshd(without=("nvidia-smi", "py-spy"))


def assert_every_command_allowed_and_recorded(cap, sshd_sessions_before, sshd):
    """Every argv in capture.json is on the allow-list, and sshd started exactly one session per
    command that was actually sent (refused ones never reached it)."""
    records = load(cap, "capture.json")["probes"]
    sent = 0
    for rec in records:
        if rec.get("argv") is None:
            continue
        load_allowlist().check(rec["argv"])  # raises if not allowed
        if not (rec.get("error") or "").startswith("refused"):
            sent += 1
    assert sshd.session_starts() - sshd_sessions_before == sent


def test_same_failure_chain_capture(sshd, scenarios, tmp_path):
    a, b, c, d = scenarios.same_failure
    before = sshd.session_starts()
    bundle = probe_slurm.capture(probe_args(sshd, c, tmp_path))
    assert bundle == tmp_path / "jobs" / "jsc-jupiter" / "slurm" / c
    cap = newest_capture(bundle)
    manifest = load(cap, "capture.json")
    assert manifest["backend"] == "slurm" and manifest["job_id"] == c and manifest["cluster"] == "jsc-jupiter"
    assert_every_command_allowed_and_recorded(cap, before, sshd)

    state = load(cap, "state.json")
    assert state["source"] == "slurm"
    assert state["state"] == "running"
    legs = [x["state"] for x in state["attempts"]]
    assert legs == ["failed", "failed", "running", "pending"], state
    assert [x["error"] for x in state["attempts"]] == [None] * 4     # raw evidence: no judgement in the capture
    assert [x["exit_code"] for x in state["attempts"][:2]] == [1, 1]
    assert state["attempts"][2]["finished_at"] is None
    diagnosed = diagnosed_attempts(bundle)                          # the diagnosis judges the legs' logs
    assert [TRACEBACK_ERROR in (x["first_error"] or "") for x in diagnosed] == [True, True, False, False], diagnosed
    assert state["failure_count"] == 2 and state["max_retries"] == 3

    # raw evidence: sacct of the chain, scontrol -o, squeue, bounded copies of each leg's logs
    chain = (cap / "slurm" / "sacct_chain.txt").read_text()
    assert chain.startswith("JobID|JobName|User|State|")
    for leg in (a, b, c):
        assert re.search(rf"^{leg}\|", chain, re.M)
        assert (cap / "slurm" / f"{leg}.out").is_file() and (cap / "slurm" / f"{leg}.err").is_file()
    assert TRACEBACK_ERROR in (cap / "slurm" / f"{a}.err").read_text()
    assert f"{d},PENDING," in (cap / "slurm" / "squeue_chain.txt").read_text()
    assert "Dependency=afterany:" in (cap / "slurm" / f"scontrol_{d}.txt").read_text()
    by_name = probes_by_name(cap)
    assert by_name[f"tail {scenarios.experiments['samefail'].dir}/logs/{scenarios.experiments['samefail'].name}_{a}.err"]["argv"][:3] == ["tail", "-c", str(probe_slurm.TAIL_BYTES)]
    # live evidence of the running leg: nvidia-smi and py-spy are absent here -> recorded, no crash
    nvsmi = by_name["gpu inventory vm"]
    assert nvsmi["argv"][:4] == ["srun", f"--jobid={c}", "--overlap", "-w"]
    assert nvsmi["error"] and "nvidia-smi" in nvsmi["error"]
    assert by_name["gpu poll vm"]["error"]
    assert not (cap / "gpu_polls.jsonl").exists()
    # the launch: the running leg's batch script, read to stdout (never a file on the cluster)
    assert by_name[f"batch script {c}"]["argv"] == ["scontrol", "write", "batch_script", c, "-"]
    assert "fake_trainer.py bringup" in (cap / "slurm" / f"batch_script_{c}.sh").read_text()
    job = load(cap, "job.json")
    assert job["nodes"] == ["vm"] and "fake_trainer.py" in " ".join(job["launch_args"])
    assert job["sources"]["launch_args"] == f"slurm/batch_script_{c}.sh"
    pyspy = [r for r in manifest["probes"] if r["name"].startswith("py-spy vm ")]
    assert pyspy and pyspy[0]["argv"][-4:-1] == ["py-spy", "dump", "--pid"] and pyspy[0]["error"]
    assert any(r["name"] == "py-spy vm" and "not installed" in r["error"] for r in manifest["probes"])
    ps_out = (cap / "raw" / f"ps_vm_{c}.txt").read_text()
    assert "fake_trainer.py bringup" in ps_out
    # the pid given to py-spy is the fake trainer of THIS leg, found under its slurmstepd
    pid = pyspy[0]["argv"][-1]
    assert re.search(rf"^\s*{pid}\s+\d+\s+\d+\s+python3 -u \S+/fake_trainer.py bringup", ps_out, re.M)


def test_timeout_leg_with_healthy_successor_is_not_a_burn(sshd, scenarios, tmp_path):
    from conftest import wait_state
    t1, t2 = scenarios.timeout_chain
    wait_state(t1, {"TIMEOUT"}, 150)
    wait_state(t2, {"RUNNING"}, 60)
    bundle = probe_slurm.capture(probe_args(sshd, t2, tmp_path))
    cap = newest_capture(bundle)
    state = load(cap, "state.json")
    assert state["state"] == "running"
    first, second = state["attempts"]
    assert first["state"] == "failed" and first["error"] is None
    assert second["state"] == "running" and second["error"] is None
    first, second = diagnosed_attempts(bundle)
    assert "DUE TO TIME LIMIT" in first["first_error"] and "chain restart" in first.get("interpretation", "")
    assert second["first_error"] is None
    assert state["failure_count"] == 0
    assert "TIMEOUT" in (cap / "slurm" / "sacct_chain.txt").read_text()


def test_running_leg(sshd, scenarios, tmp_path):
    cap = newest_capture(probe_slurm.capture(probe_args(sshd, scenarios.running, tmp_path)))
    state = load(cap, "state.json")
    assert state["state"] == "running" and state["failure_count"] == 0
    assert [x["state"] for x in state["attempts"]] == ["running"]
    out = (cap / "slurm" / f"{scenarios.running}.out").read_text()
    assert "'trainer/global_step': 1}" in out


def test_pending_leg(sshd, scenarios, tmp_path):
    cap = newest_capture(probe_slurm.capture(probe_args(sshd, scenarios.pending, tmp_path)))
    state = load(cap, "state.json")
    assert state["state"] == "pending"
    assert state["attempts"] == [{"attempt": 0, "state": "pending", "started_at": None, "finished_at": None,
                                  "exit_code": None, "error": None}]
    assert "Reason=BeginTime" in (cap / "slurm" / f"scontrol_{scenarios.pending}.txt").read_text()
    # nothing runs: no srun was attempted
    assert not [r for r in load(cap, "capture.json")["probes"] if (r.get("argv") or [""])[0] == "srun"]


def test_cancelled_leg(sshd, scenarios, tmp_path):
    bundle = probe_slurm.capture(probe_args(sshd, scenarios.cancelled, tmp_path))
    cap = newest_capture(bundle)
    state = load(cap, "state.json")
    assert state["state"] == "killed"
    (only,) = state["attempts"]
    assert only["state"] == "killed" and only["error"] is None
    (only,) = diagnosed_attempts(bundle)
    assert re.search(rf"\*\*\* JOB {scenarios.cancelled} ON \S+ CANCELLED AT", only["first_error"])
    assert state["failure_count"] == 1
    assert "CANCELLED by" in (cap / "slurm" / "sacct_job.txt").read_text()


def test_logs_found_through_experiment_dir_when_scontrol_has_no_paths(sshd, scenarios, tmp_path):
    """Legs purged from slurmctld have no StdOut in scontrol: the probe lists <exp>/logs (one
    non-recursive ls) and copies <jobname>_<id>.out/.err from there."""
    a = scenarios.same_failure[0]
    exp = scenarios.experiments["samefail"]
    cap_dir = tmp_path / "offline"
    # simulate purge by probing through a fake scontrol that knows nothing: use the normalizer on a
    # capture whose scontrol files are removed, after a real probe with --experiment-dir
    bundle = probe_slurm.capture(probe_args(sshd, a, tmp_path, experiment_dir=str(exp.dir)))
    cap = newest_capture(bundle)
    assert (cap / "slurm" / f"{a}.err").is_file()
    shutil.copytree(cap, cap_dir)
    for f in (cap_dir / "slurm").glob("scontrol_*.txt"):
        f.unlink()
    (cap_dir / "state.json").unlink()
    probe_slurm.normalize_capture(cap_dir)
    state = load(cap_dir, "state.json")
    assert state["attempts"][0]["exit_code"] == 1  # rebuilt from the raw files alone
    assert [x["state"] for x in state["attempts"]][:2] == ["failed", "failed"]


def test_normalize_is_reproducible(sshd, scenarios, tmp_path):
    """state.json is derivable from the raw files by the project's own parsers."""
    cap = newest_capture(probe_slurm.capture(probe_args(sshd, scenarios.same_failure[2], tmp_path)))
    original = (cap / "state.json").read_text()
    (cap / "state.json").unlink()
    probe_slurm.normalize_capture(cap)
    assert json.loads((cap / "state.json").read_text()) == json.loads(original)
