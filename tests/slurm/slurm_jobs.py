"""Job scripts for the Slurm integration tests: a fake SkyRL trainer (python3, so the probe finds a
python process under the job's slurmstepd) printing realistic bring-up and step lines
(marin-artifacts §5.4, log-formats §8.1), then sleeping or crashing with a traceback."""
from __future__ import annotations

FAKE_TRAINER = r'''
import sys, time
mode = sys.argv[1]
def log(level, where, msg):
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')}.000 | {level:<8} | {where} - {msg}", flush=True)
print("[rl-slurm] MarinSkyRL now at 3f2a9c1", flush=True)
print("Ray nodes alive: 1/1", flush=True)
log("INFO", "skyrl.train.trainer:train:210", "InferenceEngineClient initialized with 1 engines")
log("INFO", "skyrl.train.trainer:train:244", "Resumed training from global_step 0")
if mode == "bringup":
    # a leg that is still loading (no training step yet); it would crash like its predecessors
    log("INFO", "skyrl.train.trainer:train:230", "Loading policy weights (FSDP) 5%")
    time.sleep(600)
    mode = "crash"
if mode == "crash":
    # the deterministic bring-up failure of marin-artifacts §5.4 rung 4
    print("Traceback (most recent call last):", file=sys.stderr, flush=True)
    print('  File "/opt/skyrl/skyrl/train/model_wrapper.py", line 88, in load_model', file=sys.stderr)
    print("    experts = config.norm_topk_prob", file=sys.stderr)
    print("AttributeError: 'Qwen3MoeConfig' object has no attribute 'norm_topk_prob'", file=sys.stderr, flush=True)
    sys.exit(1)
for step in range(1, 100000):
    # the console logger's pprint'ed record (log-formats §8.1): quoted floats, sorted keys
    log("INFO", "skyrl.train.utils.tracking:log:189", f"Step {step}: ")
    print("{'generate/avg_num_tokens': '1843.2500',")
    print(" 'policy/grad_norm': '0.4100',")
    print(" 'policy/policy_entropy': '0.6512',")
    print(" 'policy/policy_loss': '-0.0121',")
    print(f" 'reward/avg_pass_at_8': '{0.30 + step * 0.001:.4f}',")
    print(f" 'reward/avg_raw_reward': '{0.10 + step * 0.001:.4f}',")
    print(f" 'trainer/global_step': {step}}}", flush=True)
    time.sleep(5)
'''


def trainer_script(mode: str, exp_dir) -> str:
    """Batch script body: run the fake trainer in ``mode`` (``crash``, ``bringup`` or ``healthy``). sbatch copies
    the script into the spool, so the trainer is addressed by the experiment directory."""
    return ("set -u\n"
            "echo \"job $SLURM_JOB_ID on $(hostname) leg start\"\n"
            f"python3 -u {exp_dir}/fake_trainer.py {mode}\n")


# ---- a running leg with GPUs: stand-in nvidia-smi / dmesg, Ray-titled workers, a hang ----------

# The policy worker and the engine are python processes whose title is a Ray actor's
# (``exec -a``), as `ps` shows them on a real node; the stand-in nvidia-smi finds them in /proc
# and reports them as the compute processes of GPUs 0-1 (policy) and 2-3 (engine).
WORKER = r'''
import time
while True:
    time.sleep(5)
'''

HANG_TRAINER = r'''
import os, pickle, sys, time
def log(level, where, msg):
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')}.000 | {level:<8} | {where} - {msg}", flush=True)
print("[rl-slurm] MarinSkyRL now at 3f2a9c1", flush=True)
for _ in range(3):  # the engine keeps generating (vLLM V1 stats line, log-formats §4)
    print(f"(AsyncVLLMInferenceEngine pid=4003) INFO {time.strftime('%m-%d %H:%M:%S')} [loggers.py:259] Engine 000: "
          "Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 2345.6 tokens/s, Running: 48 reqs, "
          "Waiting: 0 reqs, GPU KV cache usage: 41.2%, Prefix cache hit rate: 12.0%", flush=True)
for step in (1, 2):
    log("INFO", "skyrl.train.utils.tracking:log:189", f"Step {step}: ")
    print("{'policy/grad_norm': '0.4100',")
    print(f" 'trainer/global_step': {step}}}", flush=True)
# the watchdog times out in an all_reduce (log-formats §2.2) and the flight recorder dumps (§2.4)
print(f"[rank0]:[E1130 13:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
      f"timeout: WorkNCCL(SeqNum=11, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=1800000) ran for "
      f"1800083 milliseconds before timing out.", file=sys.stderr, flush=True)
prefix = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
def entry(seq, state, name="nccl:all_reduce"):
    return {"record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": name, "time_created_ns": seq * 1000,
            "input_sizes": [[1024]], "output_sizes": [[1024]], "state": state, "is_p2p": False, "retired": False,
            "timeout_ms": 1800000, "frames": []}
for rank, done in ((0, 10), (1, 10), (2, 9)):
    entries = [entry(s, "completed") for s in range(1, done + 1)]
    if done == 10:
        entries.append(entry(11, "started"))
    with open(f"{prefix}{rank}", "wb") as f:
        pickle.dump({"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
                     "entries": entries}, f, protocol=2)
print("[rank0]:[E1130 13:00:01.000000000 ProcessGroupNCCL.cpp:1670] Flight Recorder trace successfully dumped.",
      file=sys.stderr, flush=True)
time.sleep(3600)
'''

NVIDIA_SMI_STANDIN = r'''#!/usr/bin/env python3
"""Stand-in nvidia-smi for the Slurm tests: 4 GPUs; GPUs 0-1 run the policy worker (idle, weights
resident), GPUs 2-3 the engine (busy); GPU 0 has an uncorrectable ECC error and a pending row remap."""
import os, sys
args = sys.argv[1:]
def pids(title):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[0].decode(errors="replace").startswith(title):
                        out.append(int(d))
            except OSError:
                pass
    return sorted(out)
uuid = lambda i: f"GPU-{i:08d}-aaaa-bbbb-cccc-000000000000"
if "--query-gpu=index,uuid,name" in args:
    for i in range(4):
        print(f"{i}, {uuid(i)}, NVIDIA H100 80GB HBM3")
elif any(a.startswith("--query-gpu=") for a in args):
    for i, util, mem, power in ((0, 0, 61234, 95.1), (1, 0, 61190, 94.5), (2, 91, 70371, 587.4), (3, 88, 70102, 571.0)):
        print(f"{i}, {util}, {mem}, 81559, {power:.2f}")
elif any(a.startswith("--query-compute-apps=") for a in args):
    policy, engine = pids("ray::FSDPPolicyWorker"), pids("ray::AsyncVLLMInferenceEngine")
    for i, found in ((0, policy), (1, policy), (2, engine), (3, engine)):
        if found:
            print(f"{uuid(i)}, {found[0]}, python3, 60000")
elif "-q" in args:
    print("==============NVSMI LOG==============\n")
    print("Attached GPUs                             : 4")
    for i in range(4):
        bad = i == 0
        print(f"GPU 00000000:{0x18 + i:02X}:00.0")
        print("    ECC Errors\n        Volatile")
        print("            SRAM Correctable              : 0\n            SRAM Uncorrectable            : 0")
        print(f"            DRAM Correctable              : 0\n            DRAM Uncorrectable            : {2 if bad else 0}")
        print("        Aggregate")
        print("            SRAM Correctable              : 0\n            SRAM Uncorrectable            : 0")
        print(f"            DRAM Correctable              : 0\n            DRAM Uncorrectable            : {2 if bad else 0}")
        print("    Retired Pages\n        Single Bit ECC                    : N/A\n        Double Bit ECC                    : N/A")
        print("        Pending Page Blacklist            : N/A")
        print("    Remapped Rows")
        print(f"        Correctable Error                 : 0\n        Uncorrectable Error               : {1 if bad else 0}")
        print(f"        Pending                           : {'Yes' if bad else 'No'}")
        print("        Remapping Failure Occurred        : No\n")
else:
    sys.exit(f"stand-in nvidia-smi: unsupported arguments {args}")
'''

DMESG_STANDIN = r'''#!/bin/sh
echo "2026-11-30T12:59:00,000000+00:00 NVRM: Xid (PCI:0000:18:00): 48, pid=4242, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
'''


def gpu_leg_script(exp_dir, *, model: str = "Qwen/Qwen3-30B-A3B") -> str:
    """Batch script of a running leg with Ray-titled GPU workers and a trainer wedged in a collective."""
    return ("set -u\n"
            f"export TORCH_NCCL_DEBUG_INFO_TEMP_FILE={exp_dir}/fr/nccl_trace_rank_\n"
            "export MAX_RETRIES=1\n"
            f"bash -c 'exec -a ray::FSDPPolicyWorker.ppo_train python3 {exp_dir}/worker.py' &\n"
            f"bash -c 'exec -a ray::AsyncVLLMInferenceEngine.generate python3 {exp_dir}/worker.py' &\n"
            f"python3 -u {exp_dir}/hang_trainer.py --max-retries 1 trainer.policy.model.path={model}\n")


RESOLVED_CONFIG = """\
trainer:
  policy:
    model:
      path: Qwen/Qwen3-30B-A3B
  placement:
    colocate_all: false
    policy_num_gpus_per_node: 2
    policy_num_nodes: 1
generator:
  num_inference_engines: 1
  inference_engine_tensor_parallel_size: 2
  max_num_seqs: 64
terminal_bench_config:
  trials_dir: s3://bucket/trials
  n_concurrent_trials: 32
"""
