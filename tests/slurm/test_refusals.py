"""Refused commands never reach the server: proven against the real sshd (its session log) and the
real Slurm (the job keeps running), including a job whose name smuggles shell metacharacters."""
from __future__ import annotations

import pytest

from rlhealth.probes import slurm as probe_slurm
from rlhealth.probes.allowlist import CommandRefused
from conftest import job_state
from slurm_helpers import load, newest_capture, probe_args, probes_by_name

pytestmark = pytest.mark.slurm


def mutating(job: str) -> list[list[str]]:
    return [
        ["scancel", job],
        ["scontrol", "update", f"JobId={job}", "TimeLimit=1"],
        ["scontrol", "requeue", job],
        ["scontrol", "hold", job],
        ["srun", f"--jobid={job}", "--overlap", "-w", "vm", "scancel", job, "ps"],
        ["rm", "-rf", "/tmp"],
        ["tail", "-n", "1", "--", f"/tmp/x;scancel {job}"],
        ["sacct", f"--name=x$(scancel {job})"],
        ["scontrol", "write", "batch_script", job],                    # would write slurm-<id>.sh
        ["scontrol", "write", "batch_script", job, "/tmp/pwned.sh"],
        ["scontrol", "update", f"JobId={job}", "Requeue=1"],
        ["srun", f"--jobid={job}", "--overlap", "-w", "vm", "-N1", "-n1", "dmesg", "-C"],
        ["srun", f"--jobid={job}", "--overlap", "-w", "vm", "-N1", "-n1", "nvidia-smi", "-r"],
        ["srun", f"--jobid={job}", "--overlap", "-w", "vm", "-N1", "-n1", "head", "-c", "1", "--", "/etc/passwd", ">", "/tmp/x"],
        ["srun", f"--jobid={job}", "--overlap", "-w", "vm", "-N1", "-n1", "cp", "--", "/etc/passwd", "/tmp/x"],
    ]


def test_refused_commands_are_not_sent(sshd, scenarios):
    job = scenarios.running
    target = probe_slurm.resolve_target(sshd.alias, sshd.ssh_config, sshd.known_hosts)
    session = probe_slurm.SshSession(target, ssh_config=sshd.ssh_config, connect_timeout=10)
    session.connect()
    try:
        before = sshd.session_starts()
        for argv in mutating(job):
            with pytest.raises(CommandRefused):
                session.run(argv, timeout=10)
        assert sshd.session_starts() == before, "a refused command reached sshd"
        ok = session.run(["squeue", "-h", f"--jobs={job}", "--format=%i,%T,%j"], timeout=20)
        assert ok.exit_code == 0 and f"{job},RUNNING," in ok.text
        assert sshd.session_starts() == before + 1  # the session log counts what was really sent
    finally:
        session.close()
    assert job_state(job) == "RUNNING"


def test_probe_records_refusal_of_a_smuggled_job_name(sshd, new_experiment, tmp_path):
    """A real job named with shell metacharacters: the chain query built from the name is refused
    and recorded, nothing is executed, the rest of the evidence is still taken."""
    from conftest import cancel_jobs, wait_state, as_job_user
    exp = new_experiment("evil")
    script = exp.script("run.sh", "sleep 120\n")
    marker = exp.dir / "pwned"
    evil = f"x;touch {marker}"
    out = as_job_user(["sbatch", "--parsable", "-J", evil, "-D", str(exp.dir), "-o", f"{exp.dir}/logs/evil_%j.out",
                       str(script)])
    job = out.stdout.strip()
    try:
        wait_state(job, {"RUNNING"}, 60)
        cap = newest_capture(probe_slurm.capture(probe_args(sshd, job, tmp_path)))
        recs = probes_by_name(cap)
        assert recs["sacct chain"]["error"].startswith("refused by the read-only allow-list, not sent")
        assert f"--name={evil}" in recs["sacct chain"]["argv"]
        assert recs[f"scontrol show job {job}"]["exit_code"] == 0
        assert not marker.exists()
        assert not (cap / "state.json").exists()  # chain unknown: no controller state is invented
        assert "'sacct chain' failed: refused" in recs["normalize"]["error"]
        assert job_state(job) == "RUNNING"
    finally:
        cancel_jobs([job])
