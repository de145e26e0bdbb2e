"""Pure Slurm parsers on text captured from the real Slurm 22.05 of scripts/services/slurm.sh
and the forms documented in log-formats §6 / marin-artifacts §4.4."""
from __future__ import annotations

from rlhealth.probes.parse import slurm as ps

# captured: sacct -X --parsable2 --format=JobID,JobName,User,State,Submit,Start,End,ExitCode,Elapsed,Timelimit,NodeList,WorkDir,Reason
SACCT = """JobID|JobName|User|State|Submit|Start|End|ExitCode|Elapsed|Timelimit|NodeList|WorkDir|Reason
1|try-chain|rlhtest|FAILED|2026-11-29T07:24:09|2026-11-29T07:24:10|2026-11-29T07:24:10|1:0|00:00:00|UNLIMITED|vm|/tmp/try|None
2|try-chain|rlhtest|TIMEOUT|2026-11-29T07:24:09|2026-11-29T07:24:13|2026-11-29T07:25:29|0:0|00:01:16|00:01:00|vm|/tmp/try|Dependency
3|try-chain|rlhtest|CANCELLED by 0|2026-11-29T07:24:09|2026-11-29T07:25:29|2026-11-29T07:26:13|0:0|00:00:44|UNLIMITED|vm|/tmp/try|None
4|try-chain|rlhtest|RUNNING|2026-11-29T07:24:09|2026-11-29T07:26:14|Unknown|0:0|00:00:06|00:01:00|vm|/tmp/try|None
"""
# captured: scontrol show job -o 2 (pending on its afterany predecessor)
SCONTROL = ("JobId=2 JobName=try-chain UserId=rlhtest(1001) GroupId=rlhtest(1001) MCS_label=N/A Priority=4294901758 "
            "Nice=0 Account=(null) QOS=normal JobState=PENDING Reason=Dependency Dependency=afterany:1(unfulfilled) "
            "Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:01:00 TimeMin=N/A "
            "SubmitTime=2026-11-29T07:24:09 EligibleTime=Unknown AccrueTime=Unknown StartTime=Unknown EndTime=Unknown "
            "Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T07:24:09 Scheduler=Main "
            "Partition=debug AllocNode:Sid=localhost:2529 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1 "
            "NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=4000M,node=1,billing=1 "
            "Command=/tmp/try/b.sh WorkDir=/tmp/try StdErr=/tmp/try/try-chain_2.out StdIn=/dev/null "
            "StdOut=/tmp/try/try-chain_2.out Power= \n")


def test_sacct_parsable2():
    rows = ps.parse_sacct_parsable2(SACCT)
    assert [r["JobID"] for r in rows] == ["1", "2", "3", "4"]
    assert rows[2]["State"] == "CANCELLED by 0" and rows[3]["End"] == "Unknown"
    assert ps.parse_sacct_parsable2("JobID|JobName|State\n") == []
    # a '|' inside the last column stays in it; with -n the caller names the columns
    assert ps.parse_sacct_parsable2("7|a|b|c\n", fields=["JobID", "State", "Name"])[0]["Name"] == "b|c"


def test_state_mapping():
    assert [ps.map_state(s) for s in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "COMPLETED",
                                      "CANCELLED by 0", "CANCELLED+", "FAILED", "TIMEOUT", "OUT_OF_MEMORY",
                                      "OUT_OF_ME+", "NODE_FAIL", "PREEMPTED", "WEIRD_STATE")] == [
        "pending", "building", "running", "running", "succeeded", "killed", "killed", "failed", "failed",
        "failed", "failed", "failed", "failed", "weird_state"]


def test_scontrol_oneliner_values_with_spaces():
    (job,) = ps.parse_scontrol_oneliner(SCONTROL)
    assert job["JobId"] == "2" and job["JobState"] == "PENDING" and job["Dependency"] == "afterany:1(unfulfilled)"
    assert job["StdOut"] == "/tmp/try/try-chain_2.out" and job["NodeList"] == "" and job["CPUs/Task"] == "1"
    assert job["AllocNode:Sid"] == "localhost:2529" and job["TRES"] == "cpu=1,mem=4000M,node=1,billing=1"
    assert ps.scontrol_user(job["UserId"]) == "rlhtest"
    spaced = "JobId=9 JobName=grpo run 2 UserId=a(1) JobState=RUNNING Command=/x/run.sh --lr 1e-6 WorkDir=/shared/my exp StdOut=/shared/my exp/o.out"
    (j,) = ps.parse_scontrol_oneliner(spaced)
    assert j["JobName"] == "grpo run 2" and j["Command"] == "/x/run.sh --lr 1e-6"
    assert j["WorkDir"] == "/shared/my exp" and j["StdOut"] == "/shared/my exp/o.out"
    assert ps.parse_scontrol_oneliner("slurm_load_jobs error: Invalid job id specified\n") == []


def test_squeue():
    assert ps.parse_squeue("16,PENDING,rlh-x\n15,RUNNING,name,with,commas\nslurm_load_jobs error: x\n") == [
        {"JobID": "16", "State": "PENDING", "JobName": "rlh-x"},
        {"JobID": "15", "State": "RUNNING", "JobName": "name,with,commas"}]


def test_hostlist_times_exit_codes():
    assert ps.expand_hostlist("gpu[001-003,007],login1") == ["gpu001", "gpu002", "gpu003", "gpu007", "login1"]
    assert ps.expand_hostlist("vm") == ["vm"] and ps.expand_hostlist("(null)") == [] and ps.expand_hostlist("") == []
    assert ps.parse_time("2026-11-29T07:24:09") == "2026-11-29T07:24:09Z"
    assert ps.parse_time("Unknown") is None and ps.parse_time("None") is None
    assert ps.parse_exit_code("0:125") == (0, 125) and ps.parse_exit_code("x") == (None, None)


def test_stepd_lines_real_and_documented():
    text = ("hi\n"
            "slurmstepd-vm: error: *** JOB 2 ON vm CANCELLED AT 2026-11-29T07:25:29 DUE TO TIME LIMIT ***\n"
            "slurmstepd: error: *** STEP 557341.0 ON c4-n12 CANCELLED AT 2025-03-11T13:26:25 DUE TO PREEMPTION ***\n"
            "slurmstepd-vm: error: *** JOB 3 ON vm CANCELLED AT 2026-11-29T07:26:13 ***\n"
            "slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2025-06-01T00:00:00 DUE to SIGNAL Terminated ***\n"
            "slurmstepd: error: Detected 1 oom_kill event in StepId=3801897.batch. Some of the step tasks have been OOM Killed.\n"
            "slurmstepd: error: *** JOB 1 ON n1 FAILED (non-zero exit code or other failure mode) ***\n")
    ev = ps.parse_stepd_lines(text)
    assert [(e.kind, e.job, e.reason) for e in ev] == [
        ("cancelled", "2", "TIME LIMIT"), ("cancelled", "557341.0", "PREEMPTION"), ("cancelled", "3", None),
        ("cancelled", "9", "SIGNAL Terminated"), ("oom", None, None),
        ("failed", "1", "non-zero exit code or other failure mode")]
    assert ev[0].line_no == 2 and ev[0].node == "vm"


def test_leg_first_causal_error_uses_the_signature_catalog(tmp_path):
    """state.json attempt errors come from the same signature catalog the diagnosis uses."""
    from rlhealth.catalog import load_catalog
    from rlhealth.first_error import first_causal_error

    def first(*texts):
        files = []
        for i, text in enumerate(texts):
            p = tmp_path / f"f{len(list(tmp_path.iterdir()))}_{i}.out"
            p.write_text(text)
            files.append((p, p.name))
        occ = first_causal_error(files, load_catalog())
        return None if occ is None else occ.text

    traceback = ("Traceback (most recent call last):\n"
                 '  File "/opt/skyrl/skyrl/train/model_wrapper.py", line 88, in load_model\n'
                 "    experts = config.norm_topk_prob\n"
                 "AttributeError: 'Qwen3MoeConfig' object has no attribute 'norm_topk_prob'\n"
                 "[rank1]:[W1229 22:06:38.480071392 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=67): Broken pipe\n")
    assert first(traceback) == "AttributeError: 'Qwen3MoeConfig' object has no attribute 'norm_topk_prob'"
    # a crash before the wall-clock limit is the cause; the limit alone is the leg's error
    timeout = "step 1\nslurmstepd-vm: error: *** JOB 2 ON vm CANCELLED AT 2026-11-29T07:25:29 DUE TO TIME LIMIT ***\n"
    assert "DUE TO TIME LIMIT" in first(timeout)
    assert first(traceback + timeout).startswith("AttributeError")
    # a survivor in .err does not beat the primary crash in .out
    survivors = ("(skyrl_entrypoint pid=812) Traceback (most recent call last):\n"
                 '(skyrl_entrypoint pid=812)   File "x.py", line 1, in <module>\n'
                 "(skyrl_entrypoint pid=812) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert first("[W] [c10d] sendBytes failed on SocketImpl(fd=3): Broken pipe\n", survivors).endswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert first("2026-05-03 11:20:41.118 | INFO     | x:y:1 - Step 12: \n{'a': '1'}\n") is None
    assert first("") is None


def test_chain_state():
    legs = [ps.Leg("1", raw_state="FAILED"), ps.Leg("2", raw_state="RUNNING"), ps.Leg("3", raw_state="PENDING")]
    assert ps.chain_state(legs) == "running"
    assert ps.chain_state([ps.Leg("1", raw_state="TIMEOUT"), ps.Leg("2", raw_state="PENDING")]) == "pending"
    assert ps.chain_state([ps.Leg("1", raw_state="FAILED"), ps.Leg("2", raw_state="CANCELLED by 0")]) == "killed"
    assert ps.chain_state([]) == "absent"


def test_capture_counts_of_thousands_of_digits_are_not_read(tmp_path):
    """int() refuses more than 4300 digits: a requeue count, node count or job id of 5,000 digits
    in the raw capture is unknown (a leg sorted first), never an exception."""
    from rlhealth.probes import slurm as slurm_probe

    long = "9" * 5_000
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "scontrol_7.txt").write_text(
        f"JobId=7 JobName=rl UserId=u(1) JobState=RUNNING Restarts={long} NumNodes={long} AllocTRES=gres/gpu:h100={long}\n")
    (tmp_path / "slurm" / "squeue_chain.txt").write_text(f"7,RUNNING,rl\n{long},PENDING,rl\n")
    legs = slurm_probe.legs_from_capture(tmp_path, "7")
    assert [leg.job_id for leg in legs] == [long, "7"] and legs[1].restarts is None
    (tmp_path / "slurm" / "batch_script_7.sh").write_text("#!/bin/bash\nexec python -m train --max-retries=3\n")
    info = slurm_probe.build_job_info(tmp_path, {"job_id": "7"})
    assert info.max_retries == 3 and info.hardware is None


def test_numbers_of_thousands_of_digits_are_not_read():
    long = "9" * 5_000
    assert ps.parse_exit_code(f"{long}:0") == (None, None)
    assert ps.parse_ps_tree(f"{long} 1 5 python a\n7 1 {long} python b\n") == {7: (1, 0, "python b")}
    assert ps.expand_hostlist(f"gpu[1-{long}]") == [f"gpu1-{long}"]
    assert ps.job_id_key(f"{long}_1") == (0, 1)
