"""A running leg with GPUs, through the real sshd and the real Slurm: several GPU polls per node
with roles, job.json from scontrol / the batch script / the resolved config, GPU health once per
node, and the flight-recorder dumps of a trainer wedged in an all_reduce. The node gets stand-in
``nvidia-smi`` and ``dmesg`` executables on its PATH (the real Slurm runs them through srun)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from rlhealth.probes import slurm as probe_slurm
from rlhealth.probes.allowlist import load_allowlist
from conftest import JOB_USER, cancel_jobs, wait_for, wait_state
from slurm_helpers import load, newest_capture, probe_args, probes_by_name, run_cli

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def gpu_node(start_sshd):
    """An sshd whose sessions (and so the srun steps they start) see the stand-ins first on PATH."""
    from slurm_jobs import DMESG_STANDIN, NVIDIA_SMI_STANDIN
    shared = Path(tempfile.mkdtemp(prefix="rlhealth-gpubin-"))
    shared.chmod(0o755)
    fakebin = shared / "bin"
    fakebin.mkdir(mode=0o755)
    for name, text in (("nvidia-smi", NVIDIA_SMI_STANDIN), ("dmesg", DMESG_STANDIN)):
        (fakebin / name).write_text(text)
        (fakebin / name).chmod(0o755)
    yield start_sshd(path_prefix=fakebin)
    shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture(scope="module")
def hung_leg(new_experiment):
    from slurm_jobs import HANG_TRAINER, RESOLVED_CONFIG, WORKER, gpu_leg_script
    exp = new_experiment("gpuhang")
    for name, text in (("worker.py", WORKER), ("hang_trainer.py", HANG_TRAINER), ("resolved_config.yaml", RESOLVED_CONFIG)):
        (exp.dir / name).write_text(text)
    (exp.dir / "fr").mkdir()
    shutil.chown(exp.dir / "fr", user=JOB_USER)
    job = exp.submit(exp.script("run.sh", gpu_leg_script(exp.dir)))
    try:
        wait_state(job, {"RUNNING"}, 60)
        wait_for(lambda: len(list((exp.dir / "fr").glob("nccl_trace_rank_*"))) == 3, 60, "the flight-recorder dumps")
        yield job, exp
    finally:
        cancel_jobs([job])


def test_running_leg_polls_roles_job_info_health_and_flight_recorder(gpu_node, hung_leg, tmp_path):
    job, exp = hung_leg
    before = gpu_node.session_starts()
    bundle = probe_slurm.capture(probe_args(gpu_node, job, tmp_path, polls=2, poll_interval="2s",
                                            experiment_dir=str(exp.dir)))
    cap = newest_capture(bundle)
    records = load(cap, "capture.json")["probes"]
    sent = [r for r in records if r.get("argv") and not (r.get("error") or "").startswith("refused")]
    for r in sent:
        load_allowlist().check(r["argv"])
    assert gpu_node.session_starts() - before == len(sent)
    recs = probes_by_name(cap)

    # two polls per node, spaced, every GPU with its role from its processes
    polls = [json.loads(line) for line in (cap / "gpu_polls.jsonl").read_text().splitlines()]
    assert len(polls) == 8 and {p["host"] for p in polls} == {"vm"}
    times = sorted({p["t"] for p in polls})
    assert len(times) == 2, times
    roles = {(p["gpu"], p["role"]) for p in polls}
    assert roles == {(0, "policy"), (1, "policy"), (2, "inference"), (3, "inference")}
    policy = [p for p in polls if p["role"] == "policy"]
    assert all(p["util_pct"] == 0 and p["mem_used_mib"] > 60000 for p in policy)
    assert all("ray::FSDPPolicyWorker.ppo_train" in p["processes"][0] for p in policy)

    # job.json: launch, model, GPU, nodes, retry budget, mode, each with its source
    info = load(cap, "job.json")
    assert info["mode_hint"] == "agentic"
    assert info["model"] == {"name": "Qwen/Qwen3-30B-A3B", "total_params_b": 30.0, "active_params_b": 3.0,
                             "source": "config/resolved_config.yaml: trainer.policy.model.path"}
    assert info["hardware"] == {"gpu": "H100-80GB-SXM", "gpus_per_node": 4, "nodes": 1}
    assert info["nodes"] == ["vm"] and info["max_retries"] == 1
    assert load(cap, "state.json")["max_retries"] == 1  # the launch's budget, not the count of chain legs
    assert info["resolved_config"]["generator"]["num_inference_engines"] == 1
    assert info["placement"]["policy_gpus"] == 2 and info["placement"]["n_concurrent_trials"] == 32
    assert "--max-retries" in info["launch_args"]
    assert info["sources"]["hardware.gpu"] == f"raw/nvidia-smi-inventory_vm_{job}.csv:1"
    assert info["sources"]["max_retries"] == f"slurm/batch_script_{job}.sh:4"
    assert recs[f"batch script {job}"]["argv"] == ["scontrol", "write", "batch_script", job, "-"]
    assert not list(exp.dir.glob("slurm-*.sh"))  # nothing written on the cluster side

    # GPU health, once per node: the measurement behind a hardware-fault finding
    health = load(cap, "gpu_health.json")
    (host,) = health["hosts"]
    gpu0 = host["gpus"][0]
    assert gpu0["ecc_volatile_uncorrectable"] == 2 and gpu0["remapped_rows_pending"] is True
    assert gpu0["evidence"]["remapped_rows_pending"][0]["text"].startswith("Pending")
    assert all(g["ecc_volatile_uncorrectable"] == 0 for g in host["gpus"][1:])
    assert [x["xid"] for x in host["xid"]] == [48]
    assert sum(1 for r in records if r["name"] == "gpu health vm") == 1

    # the flight recorder: the trainer's dump prefix from its environment (only those variables
    # kept), the dumps copied read-only, and which ranks wait in which collective
    assert recs["flight recorder"]["output"] == "flight_recorder/decision.txt"
    assert (cap / "flight_recorder" / "decision.txt").read_text().startswith("fetch: hang signature nccl_collective_timeout")
    env_files = list((cap / "raw").glob("nccl_env_vm_*.txt"))
    assert env_files and env_files[0].read_text() == f"TORCH_NCCL_DEBUG_INFO_TEMP_FILE={exp.dir}/fr/nccl_trace_rank_\n"
    summary = load(cap, "flight_recorder/summary.json")
    assert summary["prefix"] == f"{exp.dir}/fr/nccl_trace_rank_"
    assert summary["stuck"] == [{"process_group": "0:default_pg", "collective": "nccl:all_reduce", "seq": 11, "ranks": [0, 1]}]
    assert summary["behind"] == [{"process_group": "0:default_pg", "rank": 2, "last_enqueued_seq": 9, "group_highest_seq": 11}]
    assert summary["suspected"] == [2] and summary["groups"][0]["absent"] == [2]
    dumps = cap / "flight_recorder" / "dumps"      # one folder per node
    assert sorted(p.relative_to(dumps).as_posix() for p in dumps.rglob("nccl_trace_rank_*")) == [
        "vm/nccl_trace_rank_0", "vm/nccl_trace_rank_1", "vm/nccl_trace_rank_2"]
    assert (exp.dir / "fr" / "nccl_trace_rank_0").read_bytes() == (dumps / "vm" / "nccl_trace_rank_0").read_bytes()

    # everything normalized is derivable from the raw files again
    originals = {n: (cap / n).read_text() for n in ("gpu_polls.jsonl", "job.json", "gpu_health.json", "flight_recorder/summary.json")}
    for n in originals:
        (cap / n).unlink()
    probe_slurm.normalize_capture(cap)
    assert {n: (cap / n).read_text() for n in originals} == originals
    assert wait_state(job, {"RUNNING"}, 5) == "RUNNING"  # the probe changed nothing


def test_diagnosis_reports_mode_model_and_gpu_from_the_capture(gpu_node, hung_leg, tmp_path):
    job, exp = hung_leg
    code, report, err = run_cli(gpu_node, job, tmp_path, "--polls", "2", "--poll-interval", "1s",
                                "--experiment-dir", str(exp.dir))
    assert report.get("schema") == "rlhealth.report/v1", err[-2000:]
    assert report["mode"] == "agentic" and report["mode_source"] == "capture job.json mode_hint"
    text = json.dumps(report)
    assert "moe_30b_a3b on H100-80GB-SXM" in text, report["gates"]["resources"]
    assert report["gates"]["liveness"]["status"] == "FAIL"
    assert report["verdict"] == "KILL" and code == 10
    assert report["restarts"]["max_retries"] == 1
