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
    # the batch-script read: stdout only; without `-` (or with a path) scontrol would write a file
    ["scontrol", "write", "batch_script", "48211"],
    ["scontrol", "write", "batch_script", "48211", "/tmp/script.sh"],
    ["scontrol", "write", "batch_script", "48211", "-", "extra"],
    ["scontrol", "write", "batch_script", "-", "48211"],
    ["scontrol", "write", "config"],
    ["scontrol", "write", "batch_script", "48211;scancel", "-"],
    ["scontrol", "update", "JobId=48211", "Requeue=1"],
    ["scontrol", "requeue", "48211", "-"],
    ["scontrol", "show", "job", "48211", "-"],
    # GPU health is -q of three sections only; never a setter
    ["nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER", "-r"],
    ["nvidia-smi", "-q", "-d", "ECC"],
    ["nvidia-smi", "-e", "0"],
    ["nvidia-smi", "-pm", "1"],
    ["nvidia-smi", "-c", "EXCLUSIVE_PROCESS"],
    ["nvidia-smi", "--clear-ecc-errors"],
    ["nvidia-smi", "-q", "-f", "/tmp/out.txt"],
    # kernel log: never clear it or change the console
    ["dmesg", "-c"],
    ["dmesg", "-C"],
    ["dmesg", "--clear"],
    ["dmesg", "--read-clear"],
    ["dmesg", "-n", "1"],
    ["dmesg", "-D"],
    ["dmesg", "--level=err;rm"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "-N1", "-n1", "dmesg", "-c"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "-N1", "-n1", "nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER", "-r"],
    # writes through exec / srun, and smuggled redirections
    ["tee", "/tmp/x"],
    ["cp", "--", "/tmp/nccl_trace_rank_0", "/tmp/copy"],
    ["dd", "if=/tmp/nccl_trace_rank_0", "of=/tmp/copy"],
    ["touch", "/tmp/x"],
    ["sh", "-c", "echo x > /tmp/f"],
    ["head", "-c", "100", "--", "/tmp/nccl_trace_rank_0", ">", "/tmp/copy"],
    ["head", "-c", "100", "--", "/tmp/nccl_trace_rank_*"],
    ["cat", "--", "/proc/1/environ;env"],
    ["cat", "--", "/proc/1/environ", "|", "curl"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu01", "-N1", "-n1", "cp", "--", "/a", "/b"],
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
    ["scontrol", "write", "batch_script", "48211", "-"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "nvidia-smi", "-q", "-d",
     "ECC,PAGE_RETIREMENT,ROW_REMAPPER"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "dmesg", "--time-format=iso",
     "--level=err,crit,alert,emerg"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "cat", "--", "/proc/4242/environ"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "ls", "-la", "--time-style=full-iso", "--", "/tmp"],
    ["srun", "--jobid=48211", "--overlap", "-w", "gpu017", "-N1", "-n1", "head", "-c", "33554432", "--",
     "/tmp/nccl_trace_rank_3"],
    ["head", "-c", "1048576", "--", "/e/scratch/exp/resolved_config.yaml"],
    ["ls", "-la", "--time-style=full-iso", "--", "/e/scratch/exp"],
]


@pytest.mark.parametrize("argv", ALLOWED, ids=[" ".join(a)[:60] for a in ALLOWED])
def test_allowed_commands_of_the_slurm_probe(argv):
    assert check_command(argv) == argv
    assert load_allowlist().shell_line(argv).split(" ")[0] == argv[0]
