"""The read-only allow-list refuses every mutating or smuggled command (contract §6).
The end-to-end proof that a refused command never reaches a real sshd is in
tests/slurm/test_refusals.py."""
from __future__ import annotations

import pytest

from rlhealth.probes.allowlist import CommandRefused, check_command, load_allowlist
from rlhealth.probes.parse.nvidia_smi import QUERY_GPU_ARG

REFUSED = [
    ["scancel", "48211"],
    ["scancel", "--signal=KILL", "48211"],
    ["scontrol", "update", "JobId=48211", "TimeLimit=1"],
    ["scontrol", "requeue", "48211"],
    ["scontrol", "hold", "48211"],
    ["scontrol", "release", "48211"],
    ["scontrol", "show", "job", "48211", "update"],
    ["rm", "-rf", "/e/scratch/exp"],
    ["sbatch", "/tmp/x.sh"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "scancel", "48211"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "rm", "-rf", "/"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01"],            # wraps nothing
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "srun", "nvidia-smi", "-L"],
    # a bare word after the node must not become the program srun runs
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "scancel", "48211", "ps"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "scontrol", "requeue", "48211", "hostname"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01;rm", "nvidia-smi", "-L"],
    ["srun", "--jobid=48211", "--overlap", "-w"],
    ["tail", "-n", "5", "--", "/e/x.out;rm -rf /"],
    ["tail", "-n", "5", "--", "/e/x.out", "&&", "scancel", "1"],
    ["cat", "--", "/e/$(scancel 1)"],
    ["cat", "--", "/e/`id`"],
    ["sacct", "--name=grpo|scancel"],
    ["sacct", "--name=a\nscancel 1"],
    ["squeue", "--format=%i > /tmp/x"],
    ["ls", "-R", "/e/scratch"],
    ["ls", "--", "relative/path"],
    ["find", "/e/scratch", "-name", "*.out"],
    ["du", "-sh", "/e/scratch"],
    ["py-spy", "record", "--pid", "12"],
    ["nvidia-smi", "-r"],
    ["nvidia-smi", "--gpu-reset"],
    ["sh", "-c", "sacct"],
    ["bash", "-c", "squeue"],
    ["scontrol", "show", "job", "-o", "1", "\x00"],
    [],
]


@pytest.mark.parametrize("argv", REFUSED, ids=[" ".join(a)[:60] or "empty" for a in REFUSED])
def test_refused(argv):
    with pytest.raises(CommandRefused):
        check_command(argv)
    with pytest.raises(CommandRefused):
        load_allowlist().shell_line(argv)


ALLOWED = [
    ["scontrol", "show", "job", "-o", "48211"],
    ["sacct", "-X", "--parsable2", "--jobs=48211", "--format=JobID,JobName,State"],
    ["sacct", "-X", "--parsable2", "--user=alice", "--name=grpo-qwen3-8b", "--starttime=2026-03-01T00:00:00",
     "--format=JobID,State"],
    ["squeue", "-h", "-u", "alice", "--name=grpo-qwen3-8b", "--format=%i,%T,%j"],
    ["stat", "-c", "%s", "--", "/e/scratch/exp/logs/grpo_48211.out"],
    ["tail", "-c", "4194304", "--", "/e/scratch/exp/logs/grpo_48211.out"],
    ["ls", "-1", "--", "/e/scratch/exp/logs"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "nvidia-smi", QUERY_GPU_ARG,
     "--format=csv,noheader,nounits"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "ps", "-eo", "pid,ppid,etimes,args", "-ww"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "py-spy", "dump", "--pid", "4242"],
]


@pytest.mark.parametrize("argv", ALLOWED, ids=[" ".join(a)[:60] for a in ALLOWED])
def test_allowed_commands_of_the_slurm_probe(argv):
    assert check_command(argv) == argv
    assert load_allowlist().shell_line(argv).split(" ")[0] == argv[0]
