"""Regenerates the incident corpus: `python tests/incidents/build.py` (deterministic).

Each incident is a captured-style evidence bundle under tests/incidents/<id>/bundle/ (Iris
`jobs/<cluster>/<user>/<job>/` or Jupiter `jobs/jsc-jupiter/slurm/<id>/` shape, with the
watcher's manifest.json and, for live incidents, rlhealth's own capture directory) and an
expected.yaml written by hand here: verdict, every gate status, mode, terminal, restarts,
signatures that must be detected, rules that must fire, and quoted evidence substrings.
Golden Markdown reports are (re)written by `scripts/test --update-golden` after review.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
import _fr  # noqa: E402
from _lines import (COHERENT, T0, at, dict_block, glog, healthy_metrics, iso, loguru, phase, result_json, salad,  # noqa: E402
                    step_progress, trajectory, vllm_stats, wandb)

HERE = Path(__file__).parent
INCIDENTS: dict[str, callable] = {}


def incident(fn):
    INCIDENTS[fn.__name__] = fn
    return fn


class Bundle:
    def __init__(self, root: Path, *, cluster="cw-us-east-02a", job_id="/alice/rl-qwen8b-tb", state="running",
                 synced=None, entrypoint=None, jupiter=False, manifest=True, extra_manifest=None):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        if manifest:
            job = {"cluster": {"name": cluster}, "job_id": job_id, "state": state, "submitted_at_ms": int(T0.timestamp() * 1000),
                   "entrypoint": entrypoint if entrypoint is not None else "", "dataset": "—", "finished_at_ms": None,
                   "task_state": state}
            m = {"bundle_format": 1, "cluster": cluster, "job_id": job_id, "kind": "rl", "job": job,
                 "synced_at": (synced or at(150)).isoformat(), "max_non_log_bytes": 104857600,
                 "trace_sync_limit": 20 if jupiter else 500,
                 "artifacts": {"finelog": "synced" if jupiter else "12,345 lines", "errors": []}}
            m.update(extra_manifest or {})
            self.write("manifest.json", json.dumps(m, indent=2, sort_keys=True))

    def write(self, rel: str, text: str | bytes) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    def lines(self, rel: str, lines: list[str]) -> None:
        self.write(rel, "\n".join(lines) + "\n")

    def trial(self, name: str, reward, start, exception=None, turns=7, agent=None, exception_txt=None, message=""):
        self.write(f"trace_jobs/{name}/config.json", json.dumps({"trial_name": name}))
        if reward is not None or exception is not None:
            self.write(f"trace_jobs/{name}/result.json",
                       json.dumps(result_json(name, reward, start, exception, turns, message), indent=2))
        if agent is not None:
            self.write(f"trace_jobs/{name}/agent/trajectory.json", json.dumps(trajectory(agent)))
        if exception_txt is not None:
            self.write(f"trace_jobs/{name}/exception.txt", exception_txt)

    def capture(self, stamp_time, *, backend="iris", state=None, job=None, polls=None, pods=None, stacks=None,
                files=None, job_id=None, cluster=None):
        stamp = stamp_time.strftime("%Y%m%dT%H%M%SZ")
        base = f"rlhealth/captures/{stamp}"
        self.write(f"{base}/capture.json", json.dumps({"format": 1, "captured_at": iso(stamp_time), "backend": backend,
                                                        "cluster": cluster or "cw-us-east-02a",
                                                        "job_id": job_id or "/alice/rl-qwen8b-tb", "probes": []},
                                                       indent=2, sort_keys=True))
        if state is not None:
            self.write(f"{base}/state.json", json.dumps(state, indent=2, sort_keys=True))
        if job is not None:
            self.write(f"{base}/job.json", json.dumps(job, indent=2, sort_keys=True))
        if polls is not None:
            self.write(f"{base}/gpu_polls.jsonl", "".join(json.dumps(p, sort_keys=True) + "\n" for p in polls))
        if pods is not None:
            self.write(f"{base}/pods.json", json.dumps(pods, indent=2, sort_keys=True))
        for name, text in (stacks or {}).items():
            self.write(f"{base}/stacks/{name}", text)
        for rel, text in (files or {}).items():
            self.write(f"{base}/{rel}", text)


AGENTIC_EP = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-8B",
                                  "terminal_bench_config.trials_dir=s3://marin-us-east-02a/tmp/ttl=14d/rl-qwen8b-tb/trace_jobs",
                                  "generator.enforce_eager=false", "generator.num_inference_engines=2",
                                  "generator.max_num_seqs=128", "terminal_bench_config.n_concurrent_trials=256", "--gpu", "H100",
                                  "--max-retries", "1"]})
STANDARD_EP = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-8B",
                                   "--train_data", "['gsm8k']", "generator.enforce_eager=false", "--gpu", "H100"]})


def training_log(n_steps: int, start_min: float = 0, step_min: float = 10, fmt: str = "wandb", reward=None,
                 metrics_fn=None, stats_era: str = "v1", engines: int = 2, gen=2310.7, running=48, waiting=0,
                 stats_every: int = 1) -> list[str]:
    """A trainer stream: per step Started/Finished phase timers, vLLM stats, a metrics record."""
    lines = [loguru(at(start_min), "[rl-iris] MarinSkyRL now at 2bb70a88c1", where="cloud.iris.training_driver:main:88"),
             loguru(at(start_min), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120")]
    for s in range(1, n_steps + 1):
        t = start_min + (s - 1) * step_min
        lines.append(phase(at(t), "Started", "step"))
        lines.append(phase(at(t + 0.1), "Started", "generate"))
        if s % stats_every == 0:
            for e in range(engines):
                lines.append(vllm_stats(at(t + 3), stats_era, gen, running, waiting, engine=e, pid=2871 + e))
        lines.append(phase(at(t + 7), "Finished", "generate", 412.3))
        lines.append(phase(at(t + 7.1), "Started", "policy_train"))
        lines.append(phase(at(t + 9), "Finished", "policy_train", 110.2))
        lines.append(phase(at(t + 9.9), "Finished", "step", 594.0))
        metrics = metrics_fn(s) if metrics_fn else healthy_metrics(s, reward)
        if fmt == "wandb":
            lines.append(wandb(at(t + 9.95), s, metrics))
        else:
            lines.extend(dict_block(at(t + 9.95), s, metrics))
        lines.append(step_progress(at(t + 9.96), s, 200))
    return lines


def healthy_trials(b: Bundle, n: int = 24, start_min: float = 5, reward_every: int = 3, agent=True):
    for i in range(n):
        name = f"task-{i:03d}__A{i:06d}"
        reward = 1.0 if i % reward_every == 0 else 0.0
        exc = "AgentTimeoutError" if i % 11 == 5 else None
        b.trial(name, reward, at(start_min + i * 4), exception=exc,
                agent=[COHERENT, "The test expects an empty list for blank input; I'll update parse() and rerun."] if agent and i % 2 == 0 else None)


# ----------------------------------------------------------------------------------------------- baselines
@incident
def baseline_healthy_agentic(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125))
    lines = training_log(12, fmt="wandb", stats_era="v1")
    lines.insert(3, loguru(at(0.5), "TerminalBenchGenerator initialized with 2 engines. Concurrent trials: 256. Retry config: max_retries=2, backoff=2-30s.",
                           where="terminal_bench.terminal_bench_generator:__init__:77", actor="TerminalBenchGenerator pid=48213, ip=10.0.5.12"))
    b.lines("finelog.log", lines)
    b.lines("pod_logs/iris-alice-rl-qwen8b-tb-0-1a2b3c-0.log", [vllm_stats(at(118), "v1", 2450.0, 52, 0, engine=e, pid=2871 + e) for e in range(2)])
    healthy_trials(b)
    return dict(now=iso(at(135)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                fired=["liveness.progressing", "resources.engines_generating", "resources.throughput_ok", "rollouts.learning",
                       "dynamics.healthy", "restarts.none", "verdict.no_kill"],
                evidence=[dict(gate="liveness", contains="Training Step Progress: 12 / 200")],
                description="Healthy agentic Iris run: 12 steps (WANDB_MIRROR), V1 stats, 24 trials with rewards.")


@incident
def baseline_healthy_standard(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(155))
    b.lines("finelog.log", training_log(15, fmt="python-dict", stats_era="v0", engines=1, gen=1532.9))
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                fired=["rollouts.std_ok", "dynamics.healthy", "liveness.progressing"],
                evidence=[dict(gate="dynamics", contains="step 15:")],
                description="Healthy standard run with the legacy python-dict console serialization and V0 stats lines.")


JUPITER_ROOT = "jobs/jsc-jupiter/slurm"


@incident
def baseline_healthy_jupiter(b_root):
    b = Bundle(b_root, cluster="jsc-jupiter", job_id="/slurm/48212", jupiter=True, synced=at(240),
               entrypoint="", extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "48212", "state": "running",
                                                      "entrypoint": "", "experiment_dir": "/e/scratch/rl/exp7",
                                                      "launcher_job_name": "grpo-qwen3-8b", "submitted_at_ms": 0}})
    leg1 = training_log(6, fmt="wandb", stats_era="v1-early", engines=1)
    leg1.append("slurmstepd: error: *** JOB 48211 ON jpbo-012-01 CANCELLED AT 2026-08-01T13:00:21 DUE TO TIME LIMIT ***")
    b.lines("slurm_logs/grpo-qwen3-8b_48211.out", leg1)
    leg2 = [loguru(at(125), "Resumed training from global_step 6")] + training_log(10, start_min=130, fmt="wandb",
                                                                                  stats_era="v1-early", engines=1)[2:]
    b.lines("finelog.log", leg2)
    return dict(now=iso(at(245)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                signatures=["slurm_time_limit"],
                evidence=[dict(gate="liveness", contains="Training Step Progress: 10 / 200")],
                description="Jupiter chain: leg 48211 hit its wall-clock limit (DUE TO TIME LIMIT), leg 48212 resumed and is healthy: not a burn.")


JUPITER_JOB = {"cluster": {"name": "jsc-jupiter", "kubeconfig": ".", "context": None}, "job_id": "48213",
               "state": "running", "submitted_at_ms": 1785600000000, "entrypoint": "", "dataset": "\u2014",
               "finished_at_ms": None, "task_state": None, "experiment_dir": "/e/scratch/rl/exp8",
               "launcher_job_name": "grpo-qwen3-8b-gsm8k"}
JUPITER_ARTIFACTS = {"finelog": "current tail (62 lines)", "pod_logs": "not applicable (Jupiter)", "ray_logs": "not requested",
                     "traces": "not requested", "trace_started": None, "trace_completed": None, "errors": [],
                     "slurm_logs": "not requested", "trace_selected": 0}
JUPITER_SBATCH = """#!/bin/bash
#SBATCH --job-name=grpo-qwen3-8b-gsm8k
#SBATCH --nodes=2
#SBATCH --gres=gpu:4
#SBATCH --time=06:00:00
source /e/project/rl/envs/skyrl/bin/activate
export RAY_DEDUP_LOGS=0
srun --overlap python -m skyrl_train.entrypoints.main_base \\
  trainer.policy.model.path=Qwen/Qwen3-8B \\
  data.train_data="['/e/data1/gsm8k/train.parquet']" \\
  generator.num_inference_engines=4 generator.enforce_eager=false \\
  trainer.epochs=1 trainer.eval_interval=20
"""


def jupiter_tail_bundle(b_root):
    b = Bundle(b_root, cluster="jsc-jupiter", job_id="/slurm/48213", jupiter=True, synced=at(240), entrypoint="",
               extra_manifest={"job": JUPITER_JOB, "artifacts": JUPITER_ARTIFACTS, "trials_uri": None})
    b.lines("finelog.log", training_log(6, start_min=180, fmt="wandb", stats_era="v1-early", engines=1)[2:])
    return b


@incident
def jupiter_mode_from_launch_script(b_root):
    b = jupiter_tail_bundle(b_root)
    b.write("slurm_logs/grpo-qwen3-8b-gsm8k.sbatch", JUPITER_SBATCH)
    return dict(now=iso(at(245)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                mode_source_contains="no agent-harness or sandbox section in the Slurm launch script slurm_logs/grpo-qwen3-8b-gsm8k.sbatch",
                evidence=[],
                description="A healthy standard Jupiter run exactly as the watcher's status sweep writes it (empty "
                            "entrypoint, finelog = current tail without the launch lines): mode comes from the Slurm "
                            "launch script the bundle carries, not ERROR 'mode undetermined'.")


@incident
def jupiter_mode_undetermined_without_launch(b_root):
    jupiter_tail_bundle(b_root)
    return dict(now=iso(at(245)), verdict="ERROR", mode="unknown", terminal=False,
                gates=dict(liveness="PASS", rollouts="ERROR"),
                restarts=dict(burned=0, same_failure=False),
                finding_contains=dict(rollouts="mode undetermined"),
                evidence=[],
                description="The counterpart: the same tail with no launch script or resolved configuration in the bundle: "
                            "the mode stays undetermined (ERROR with the fix), never guessed.")


@incident
def baseline_benign_noise(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125))
    lines = training_log(12, fmt="wandb", stats_era="v1-2026")
    noise = [
        "(EngineCore_DP0 pid=336) INFO 08-01 12:00:50 [shm_broadcast.py:542] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
        "WARNING 08-01 12:00:12 shm_broadcast.py:386] No available block found in 60 second. ",
        "(APIServer pid=962) WARNING 08-01 12:00:05 [envs.py:1100] Unknown vLLM environment variable detected: VLLM_ALLOW_ROUTED_EXPERTS_DCP",
        "NCCL INFO comm 0x5583 rank 3 nranks 8 cudaDev 3 busId 1b000 - opCount dead",
        "NCCL INFO NET/Plugin: Could not find libnccl-net.so, using internal implementation",
        loguru(at(30), "Trial task-17__Ab3dE9f failed with ContextLengthExceededError: 32769 input tokens > 32768 max", level="WARNING",
               where="terminal_bench.terminal_bench_generator:run_trial:311"),
        loguru(at(31), "Traceback (most recent call last): handled AgentTimeoutError in trial task-18__Qq1", level="WARNING",
               where="terminal_bench.terminal_bench_generator:run_trial:315"),
        loguru(at(1), "OSError: Qwen/Qwen3-8B does not appear to have a file named model.safetensors; load_pretrained_with_retry attempt 1/4 retrying in 2s",
               level="WARNING", where="skyrl_train.model_wrapper:load_pretrained_with_retry:52"),
        "Error response from daemon: Get https://ghcr.io/v2/marin/rl/blobs/sha256:ab12: unexpected EOF",
    ]
    b.lines("finelog.log", noise[:5] + lines + noise[5:])
    b.lines("pod_logs/iris-alice-rl-qwen8b-tb-0-1a2b3c-0.log",
            ["(EngineCore_DP0 pid=413) INFO 08-01 14:04:00 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."]
            + [vllm_stats(at(119), "v1-2026", 2450.0, 52, 0, engine=e, pid=2871 + e) for e in range(2)])
    healthy_trials(b)
    return dict(now=iso(at(135)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                signatures=["benign_shm_broadcast_wait", "benign_vllm_unknown_env", "benign_opcount_dead",
                            "benign_nccl_net_plugin_missing", "benign_harbor_passthrough", "benign_hf_retry",
                            "benign_image_pull_eof", "benign_engine_core_exit", "hf_weights_missing"],
                evidence=[dict(gate="liveness", contains="Training Step Progress: 12 / 200")],
                description="Healthy run full of benign noise (shm_broadcast waits, whitelist notes, opCount dead, passthroughs, "
                            "a WARNING-tagged traceback, a caught HF weight flake): none of it is death.")


# ----------------------------------------------------------------------------------------------- liveness
def frozen_training(n_steps=8, engines_after=True, stats_era="v1", until_min=200, engines=2, fmt="wandb"):
    """Steps 1..n, then the trainer goes quiet while (optionally) engines keep generating until until_min."""
    lines = training_log(n_steps, fmt=fmt, stats_era=stats_era, engines=engines)
    last = (n_steps - 1) * 10 + 10
    lines.append(phase(at(last), "Started", "step"))
    lines.append(phase(at(last + 0.1), "Started", "fwd_logprobs_values_reward"))
    if engines_after:
        t = last + 1
        while t < until_min:
            for e in range(engines):
                lines.append(vllm_stats(at(t), stats_era, 1980.0, 40, 0, engine=e, pid=2871 + e))
            t += 5
    return lines


@incident
def colocated_wedge_nccl_watchdog(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(200))
    lines = frozen_training(8)
    lines.insert(-20, "(FSDPPolicyWorker pid=5120, ip=10.0.5.13) [PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for 1800 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. workMetaList_.size() = 103")
    b.lines("finelog.log", lines)
    healthy_trials(b)
    return dict(now=iso(at(205)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), signatures=["nccl_watchdog_stuck"],
                fired=["liveness.hang_signature", "liveness.colocated_deception", "verdict.kill_hard_failure"],
                evidence=[dict(gate="liveness", contains="watchdog got stuck for 1800 seconds")],
                description="MoE-EP8-style colocated wedge: policy mesh hung in a NCCL collective (torch ~2.3 watchdog-stuck line) "
                            "while the engines keep generating; cheap liveness signals lie.")


@incident
def nccl_collective_timeout_abort(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(190))
    lines = frozen_training(8, engines_after=False, fmt="python-dict", stats_era="v0", engines=1)
    t = at(96)
    lines += [glog(t, "E", 2, "ProcessGroupNCCL.cpp:632", "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4411, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600021 milliseconds before timing out."),
              glog(t, "E", 2, "ProcessGroupNCCL.cpp:1785", "[PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1, only active collectives: 0"),
              glog(at(97), "F", 2, "ProcessGroupNCCL.cpp:1920", "[PG ID 0 PG GUID 0(default_pg) Rank 2] Terminating the process after attempting to dump debug info, due to collective timeout or exception."),
              "(WorkerDict pid=4410, ip=10.0.0.7) Fatal Python error: Aborted",
              glog(at(97.5), "W", 1, "TCPStore.cpp:106", "[c10d] sendBytes failed on SocketImpl(fd=67, addr=[bogon]:36214, remote=[bogon]:43145): Broken pipe")]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(195)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                signatures=["nccl_collective_timeout", "nccl_dump_debug_info", "nccl_terminating_after_dump", "fatal_python_abort",
                            "tcpstore_broken_pipe"],
                fired=["liveness.hang_signature", "liveness.fatal_signature", "liveness.trainer_frozen"],
                evidence=[dict(gate="liveness", contains="Watchdog caught collective operation timeout")],
                description="torch >=2.4 collective timeout (WorkNCCL with Numel fields), flight-recorder dump, abort and the TCPStore cascade.")


@incident
def watchdog_stuck_ray_worker_died(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(200))
    b.lines("finelog.log", frozen_training(8, engines_after=True, stats_era="v1-2026"))
    b.lines("ray_vllm_logs/iris-alice-rl-qwen8b-tb-0-1a2b3c-0/worker-8445aa-01000000-3490362.err", [
        "[PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=103",
        "[2026-08-01 13:32:01,113 E 3490362 3490400] logging.cc:496: *** SIGABRT received at time=1785591121 on cpu 92 ***",
        "Fatal Python error: Aborted"])
    b.lines("ray_vllm_logs/iris-alice-rl-qwen8b-tb-0-1a2b3c-0/raylet.out", [
        "[2026-08-01 13:32:05,001 E 395 395] (raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. Lease ID: 0100ab Worker ID: 8445aa Node ID: 0e99 Worker IP address: 10.0.5.13 Worker port: 34533 Worker PID: 3490362 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. Some common causes include: (1) the process was killed by the OOM killer due to high memory usage."])
    b.lines("ray_vllm_logs/iris-alice-rl-qwen8b-tb-0-1a2b3c-0/python-core-driver-01000000_4120.log", [
        "[2026-08-01 13:32:06,500 E 4120 4180] core_worker.cc:900: ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."])
    healthy_trials(b)
    return dict(now=iso(at(205)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                signatures=["nccl_heartbeat_monitor_timeout", "worker_rank_signal", "fatal_python_abort", "ray_worker_died", "ray_actor_died"],
                evidence=[dict(gate="liveness", contains="Heartbeat monitor timed out")],
                description="Ray logs are authoritative for actor death: heartbeat monitor abort, SIGABRT, raylet SYSTEM_ERROR death, ActorDiedError.")


# ----------------------------------------------------------------------------- failures by their shape
# A healthy agentic run plus one more log excerpt: the benign shapes (a telemetry thread's exception,
# an undated hang line in an extra file, ActorDiedError inside a longer word) never KILL; an exception
# class no signature names, raised in a policy worker's main thread, does.
POLICY_ACTOR = "(FSDPPolicyWorker pid=5120, ip=10.0.5.13) "
HEALTHY_SHAPE = dict(verdict="NO-KILL", mode="agentic", terminal=False,
                     gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                     restarts=dict(burned=0, same_failure=False))


def healthy_agentic_plus(b_root, finelog_tail=(), extra=None):
    expected = baseline_healthy_agentic(b_root)
    if finelog_tail:
        with open(b_root / "finelog.log", "a") as f:
            f.write("\n".join(finelog_tail) + "\n")
    for rel, lines in (extra or {}).items():
        Bundle(b_root, manifest=False).lines(rel, lines)
    return expected["now"]


@incident
def background_telemetry_exception(b_root):
    now = healthy_agentic_plus(b_root, [
        "Exception in thread Thread-7 (_thread_body):",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner',
        "    self.run()",
        '  File "/opt/venv/lib/python3.11/site-packages/wandb/sdk/internal/internal_util.py", line 49, in run',
        "    self._run()",
        '  File "/opt/venv/lib/python3.11/site-packages/wandb/sdk/internal/file_stream.py", line 321, in _thread_body',
        "    raise e",
        "wandb.errors.CommError: Network error (ConnectionError), entering retry loop."])
    return dict(now=now, **HEALTHY_SHAPE,
                fired=["liveness.progressing", "liveness.background_exception"],
                not_fired=["liveness.fatal_signature", "liveness.fatal_first_error", "liveness.unhandled_unnamed_error"],
                any_finding_contains=dict(liveness="background-thread exception of a telemetry library (wandb.errors.CommError"),
                description="Healthy agentic run whose last log lines are a wandb uploader thread exception (Exception in thread, "
                            "wandb.errors.CommError) after the newest step: a telemetry thread; training goes on. A finding, never a KILL.")


@incident
def unnamed_exception_policy_rank(b_root):
    now = healthy_agentic_plus(b_root, [POLICY_ACTOR + loguru(at(120.1), "training step failed", level="ERROR",
                                                              where="skyrl_train.workers.worker:run:88")] + [POLICY_ACTOR + line for line in (
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/skyrl_train/workers/fsdp/fsdp_worker.py", line 412, in forward_backward',
        "    out = self.model(**batch)",
        '  File "/opt/venv/lib/python3.11/site-packages/flashinfer/jit/core.py", line 204, in build_and_load',
        "    raise JITCompilationFailed(msg)",
        "flashinfer.jit.core.JITCompilationFailed: ninja build of kernel batch_prefill_sm90 failed with status 1")])
    return dict(now=now, verdict="KILL", mode="agentic", terminal=False, gates=dict(liveness="FAIL"), confidence="medium",
                restarts=dict(burned=0, same_failure=False), fired=["liveness.unhandled_unnamed_error", "confidence.kill_unnamed"],
                not_fired=["confidence.kill_corroborated"],
                evidence=[dict(gate="liveness", contains="flashinfer.jit.core.JITCompilationFailed: ninja build of kernel batch_prefill_sm90 failed")],
                first_error_contains="JITCompilationFailed",
                finding_contains=dict(liveness="unhandled flashinfer.jit.core.JITCompilationFailed in a policy process"),
                description="A policy worker dies on an exception class no signature names (flashinfer JITCompilationFailed) after the "
                            "newest step: the main-thread traceback, by its shape, is the hard failure.")


@incident
def severity_records_healthy(b_root):
    t = at(120.1)
    now = healthy_agentic_plus(b_root, [
        POLICY_ACTOR + "[rank0]:[W801 " + t.strftime("%H:%M:%S") + ".000000456 TCPStore.cpp:125] [c10d] recvValue failed on "
        "SocketImpl(fd=76, addr=[localhost]:60902, remote=[localhost]:29500): Connection reset by peer, retrying",
        "(raylet) [" + t.strftime("%Y-%m-%d %H:%M:%S") + ",500 E 395 395] (raylet) runtime_env_agent_client.cc:320: The "
        "runtime env agent returned an error for a deleted environment: not found.",
        loguru(t, "reward server returned 503, retrying in 5s", level="ERROR", where="skyrl_train.rewards:score:77")])
    return dict(now=now, **HEALTHY_SHAPE,
                fired=["liveness.progressing"],
                not_fired=["liveness.unhandled_unnamed_error", "liveness.fatal_first_error", "liveness.fatal_signature",
                           "verdict.kill_hard_failure"],
                description="A job whose logs end, after its newest step, in records that state an error severity and "
                            "that no signature names (a c10d store-client warning, a raylet error, an ERROR log line): they "
                            "compete for the first causal error but are no crash, so no KILL by shape alone.")


@incident
def ray_metrics_exporter_unreachable(b_root):
    t = at(120.1)
    now = healthy_agentic_plus(b_root, [
        "(raylet) [" + t.strftime("%Y-%m-%d %H:%M:%S") + ",113 E 522139 522139] (raylet) main.cc:1032: Failed to establish "
        "connection to the metrics exporter agent. Metrics will not be exported. Exporter agent status: RpcError: Running "
        "out of retries to initialize the metrics agent. rpc_code: 14",
        '(RegistryActor pid=1683939) {"asctime":"' + t.strftime("%Y-%m-%d %H:%M:%S") + ',310","levelname":"E","message":'
        '"Failed to establish connection to the metrics exporter agent. Metrics will not be exported. Exporter agent '
        'status: RpcError: Running out of retries to initialize the metrics agent. rpc_code: 14","filename":'
        '"core_worker_process.cc","lineno":825}'])
    return dict(now=now, **HEALTHY_SHAPE, fired=["liveness.progressing"],
                not_fired=["liveness.hang_signature", "liveness.fatal_signature", "liveness.unhandled_unnamed_error",
                           "verdict.kill_hard_failure"],
                signatures=["benign_ray_metrics_exporter"],
                description="Healthy agentic run whose raylet and a core worker log, right after the newest step, that the "
                            "metrics exporter agent is unreachable (Ray 2.5x, at error severity): metrics are not exported, "
                            "the job runs on; the generic raylet-connection hang wording inside it is suppressed (its "
                            "failing twin: misc-fatal-signatures, a raylet that cannot reach the raylet).")


@incident
def undated_watchdog_extra_log(b_root):
    now = healthy_agentic_plus(b_root, extra={"pod_logs/iris-alice-rl-qwen8b-tb-0-1a2b3c-0-nccl-debug.log": [
        "[PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives."]})
    return dict(now=now, **HEALTHY_SHAPE, fired=["liveness.progressing"],
                not_fired=["liveness.hang_signature", "liveness.hang_signature_unplaced"], signatures=["nccl_watchdog_stuck"],
                description="Healthy agentic run with one undated NCCL watchdog line in an extra pod log: it cannot be placed before or "
                            "after the trainer's progress and the trainer advances; never a KILL (the twin with a frozen trainer: "
                            "watchdog-stuck-ray-worker-died).")


@incident
def actor_died_error_context_info(b_root):
    now = healthy_agentic_plus(b_root, [
        "2026-08-01 14:00:30,123\tINFO worker.py:2480 -- Actor exited on purpose: ActorDiedErrorContext(actor_id=ab12cd, "
        "class_name=RolloutCollector, reason=INTENDED_USER_EXIT, error_message=\"exit_actor() called\")"])
    return dict(now=now, **HEALTHY_SHAPE, fired=["liveness.progressing"],
                not_fired=["liveness.fatal_signature", "liveness.fatal_first_error"],
                description="Healthy agentic run whose newest line is Ray reporting an actor that exited on purpose (ActorDiedErrorContext, "
                            "INTENDED_USER_EXIT): ActorDiedError inside a longer word is no actor death; never a KILL.")


# ----------------------------------------------------------------------------------------------- resources
@incident
def engine_dead(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(200))
    lines = frozen_training(8, engines_after=False, stats_era="v1")
    lines += ["(EngineCore_DP0 pid=413) ERROR 08-01 13:25:57 [core.py:710] EngineCore encountered a fatal error.",
              "(EngineCore_DP0 pid=413) ERROR 08-01 13:25:57 [core.py:711] TimeoutError: RPC call to sample_tokens timed out.",
              "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3) ERROR 08-01 13:25:58 [async_llm.py:420] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."]
    b.lines("finelog.log", lines)
    healthy_trials(b)
    return dict(now=iso(at(205)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="FAIL", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), signatures=["vllm_engine_dead", "vllm_rpc_timeout"],
                fired=["resources.engine_dead"],
                evidence=[dict(gate="resources", contains="EngineCore encountered a fatal error")],
                description="vLLM EngineCore died (sample_tokens RPC timeout -> EngineDeadError); no engine generates, the trainer waits forever.")


def starvation_ep(n_trials=512, seqs=64, engines=2, eager="false", model="Qwen/Qwen3-8B"):
    return json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", f"trainer.policy.model.path={model}",
                                "terminal_bench_config.trials_dir=s3://b/trace_jobs", f"generator.enforce_eager={eager}",
                                f"generator.num_inference_engines={engines}", f"generator.max_num_seqs={seqs}",
                                f"terminal_bench_config.n_concurrent_trials={n_trials}", "--gpu", "H100"]})


@incident
def throughput_starvation(b_root):
    b = Bundle(b_root, entrypoint=starvation_ep(), synced=at(125))
    lines = training_log(12, stats_era="v1", engines=2, gen=310.0, running=64, waiting=448)
    b.lines("finelog.log", lines)
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.queue_starvation", "resources.throughput_floor"],
                evidence=[dict(gate="resources", contains="Waiting: 448 reqs")],
                description="rl-131k-cpdcp2r3-style starvation: Waiting >> Running with floored throughput; demand 512 trials vs 64 seqs x 2 engines.")


@incident
def enforce_eager_floor(b_root):
    ep = starvation_ep(n_trials=64, seqs=128, engines=2, eager="true", model="Qwen/Qwen3-30B-A3B")
    b = Bundle(b_root, entrypoint=ep, synced=at(125))
    lines = ["(EngineCore_DP0 pid=2211) INFO 08-01 12:00:42 [vllm.py:500] Cudagraph is disabled under eager mode"]
    lines += training_log(12, stats_era="v1", engines=2, gen=62.0, running=48, waiting=0)
    b.lines("finelog.log", lines)
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_floor_eager"],
                evidence=[dict(gate="resources", contains="Avg generation throughput: 62.0 tokens/s")],
                finding_contains=dict(resources="enforce_eager=true"),
                description="CoreWeave MoE arms at 15-75 tok/s: enforce_eager=true (CUDA graphs off) named first at the floor.")


@incident
def throughput_floor_eager_unknown(b_root):
    ep = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-32B",
                              "--train_data", "['math']", "--gpu", "H200"]})
    b = Bundle(b_root, entrypoint=ep, synced=at(125))
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=2, gen=90.0, running=64, waiting=0))
    return dict(now=iso(at(130)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_floor_eager_unknown"],
                finding_contains=dict(resources="check it first"),
                evidence=[dict(gate="resources", contains="Avg generation throughput: 90.0 tokens/s")],
                description="Dense 32B on H200 decoding at 90 tok/s per engine with 64 running (floor ~286): enforce_eager unknown, named first.")


@incident
def cuda_oom_training(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    lines = training_log(5, fmt="wandb", stats_era="v1", engines=1)
    lines += [phase(at(50), "Started", "step"), phase(at(55), "Started", "policy_train"),
              "(FSDPPolicyWorker pid=5120, ip=10.0.5.13) Traceback (most recent call last):",
              '(FSDPPolicyWorker pid=5120, ip=10.0.5.13)   File "/app/skyrl_train/workers/fsdp/fsdp_worker.py", line 412, in training_step',
              "(FSDPPolicyWorker pid=5120, ip=10.0.5.13) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.71 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.15 GiB memory in use. Of the allocated memory 71.88 GiB is allocated by PyTorch, and 4.93 GiB is reserved by PyTorch but unallocated.",
              loguru(at(56), "Train loop failed", level="ERROR", where="skyrl_train.trainer:train:530")]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(155)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="FAIL", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), signatures=["cuda_oom", "python_traceback", "train_loop_failed"],
                fired=["resources.cuda_oom", "liveness.fatal_signature"], confidence="high",
                not_fired=["confidence.kill_unnamed"],
                evidence=[dict(gate="resources", contains="CUDA out of memory. Tried to allocate 3.71 GiB")],
                description="torch >=2.4 CUDA OOM text during policy_train; the loop failed and nothing advanced after it.")


def pod(name, *, restarts=0, oom_last=False, waiting=None, phase="Running", oom_at=58, args=None):
    cs = {"name": "task", "ready": phase == "Running", "restartCount": restarts, "image": "ghcr.io/marin/rl:latest",
          "state": {"running": {"startedAt": iso(at(60))}} if waiting is None else {"waiting": {"reason": waiting, "message": "Back-off"}},
          "lastState": {}}
    if oom_last:
        cs["lastState"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": iso(at(0)), "finishedAt": iso(at(oom_at))}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "iris",
                                                            "labels": {"iris.job_id": "alice.rl-qwen8b-tb"}},
            "spec": {"containers": [{"name": "task", "image": "ghcr.io/marin/rl:latest",
                                     "command": ["python", "-m", "cloud.iris.task_runtime"], "args": list(args or [])}]},
            "status": {"phase": phase, "containerStatuses": [cs]}}


def job_json(gpu="H100-80GB-SXM", active=8.0, name="Qwen/Qwen3-8B", engines=2, seqs=128, trials=256, mode=None):
    return {"mode_hint": mode, "resolved_config": None,
            "model": {"name": name, "total_params_b": active, "active_params_b": active, "source": "config.json of the policy"},
            "hardware": {"gpu": gpu, "gpus_per_node": 8, "nodes": 2},
            "placement": {"colocate_all": True, "num_inference_engines": engines, "inference_tp": 2, "policy_gpus": 8,
                          "n_concurrent_trials": trials, "max_num_seqs": seqs}}


@incident
def host_oom_pod_oomkilled(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(100))
    lines = training_log(6) + ["(raylet) [2026-08-01 13:01:00,445 E 395 395] (raylet) node_manager.cc:3049: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: e5d9, IP: 10.0.62.231) over the last time period."]
    b.lines("finelog.log", lines)
    b.lines("pod_logs/iris-alice-rl-qwen8b-tb-1-9f8e7d-0.log", ["[  812.3] Out of memory: Killed process 7731 (ray::FSDPPolicy) total-vm:1400GB"])
    healthy_trials(b, n=6)
    b.capture(at(104), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0)), "finished_at": None,
                                            "exit_code": None, "error": None}]},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0"),
                                                                      pod("iris-alice-rl-qwen8b-tb-1-9f8e7d-0", restarts=1, oom_last=True,
                                                                          oom_at=99)]})
    return dict(now=iso(at(106)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), signatures=["host_oom_ray", "host_oomkilled_text"],
                fired=["resources.pod_oomkilled", "resources.host_oom"],
                evidence=[dict(gate="resources", contains="OOMKilled")],
                description="Host OOM: a pod restarted after OOMKilled (exit 137), kernel oom-killer and Ray memory-pressure kills.")


@incident
def slurm_host_oom_cgroup(b_root):
    b = Bundle(b_root, cluster="jsc-jupiter", job_id="/slurm/48301", jupiter=True, synced=at(100),
               extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "48301", "state": "running",
                                       "entrypoint": "", "submitted_at_ms": 0}})
    lines = training_log(6, stats_era="v1-early", engines=1)
    lines += ["/var/spool/slurmd/job48301/slurm_script: line 15: 259449 Killed  python -m skyrl_train.entrypoints.main_base",
              "slurmstepd: error: Detected 1 oom_kill event in StepId=48301.batch. Some of the step tasks have been OOM Killed."]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(105)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), signatures=["host_oom_cgroup"],
                evidence=[dict(gate="resources", contains="Detected 1 oom_kill event")],
                description="Slurm >=23.02 cgroup OOM wording in the job's .out.")


def slurm_oom_terminal(b_root, oom: bool):
    b = Bundle(b_root, cluster="jsc-jupiter", job_id="/slurm/48302", jupiter=True, synced=at(100),
               extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "48302", "state": "failed",
                                       "entrypoint": "", "submitted_at_ms": 0}})
    lines = training_log(6, stats_era="v1-early", engines=1)
    lines += ["[0]: exitcode  : -9 (pid: 259501) error_file: <N/A> traceback : Signal 9 (SIGKILL) received by PID 259501",
              "srun: error: jwb0042: task 0: Killed"]
    if oom:
        lines += ["slurmstepd: error: Detected 1 oom_kill event in StepId=48302.0. Some of the step tasks have been OOM Killed."]
    b.lines("finelog.log", lines)


@incident
def slurm_host_oom_terminal(b_root):
    slurm_oom_terminal(b_root, oom=True)
    return dict(now=iso(at(105)), verdict="NO-KILL", mode="standard", terminal=True,
                gates=dict(liveness="FAIL", resources="FAIL"), restarts=dict(burned=1, same_failure=False),
                signatures=["host_oom_cgroup"], fired=["resources.host_oom_ended_attempt"],
                evidence=[dict(gate="resources", contains="Detected 1 oom_kill event in StepId=48302.0")],
                description="A Slurm step killed by the cgroup OOM killer (SIGKILL, task Killed, then slurmstepd's oom_kill event); "
                            "the job is FAILED: RESOURCES names the host OOM instead of 'no OOM'.")


@incident
def slurm_killed_terminal_no_oom(b_root):
    slurm_oom_terminal(b_root, oom=False)
    return dict(now=iso(at(105)), verdict="NO-KILL", mode="standard", terminal=True,
                gates=dict(liveness="FAIL", resources="PASS"), restarts=dict(burned=1, same_failure=False),
                evidence=[], description="The same SIGKILLed step with no oom_kill event: not blamed on host memory.")


# ----------------------------------------------------------------------------------------------- rollouts
def agentic_running(b_root, steps=10, synced=125, reward=None):
    """An agentic run at ``steps``; ``reward`` fixes the trainer's logged reward (0.0 when every trial scores 0)."""
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(synced))
    b.lines("finelog.log", training_log(steps, stats_era="v1", reward=reward))
    return b


@incident
def weight_sync_token_salad(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(20):
        b.trial(f"task-{i:03d}__S{i:06d}", 0.0, at(5 + i * 4), agent=[salad(i), salad(i + 100)])
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.token_salad"],
                evidence=[dict(gate="rollouts", contains="token salad")],
                description="Degraded FSDP->vLLM weight sync serving token salad: 100% reward 0 with incoherent output.")


def uniform_infra(b_root, exc, *, exception_txt=None, message="", in_result=True):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__U{i:06d}", 0.0, at(5 + i * 4), exception=exc if in_result else None,
                exception_txt=exception_txt, message=message, agent=[COHERENT] if i % 4 == 0 else None)
    return b


def uniform_expected(exc, contains, description):
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.uniform_infra_exception"],
                evidence=[dict(gate="rollouts", contains=contains)], finding_contains=dict(rollouts=exc),
                description=description)


@incident
def uniform_unlisted_exception(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__U{i:06d}", 0.0, at(5 + i * 4), exception="SandboxCapacityExhaustedError", turns=0,
                message="no sandbox capacity left in region us-east-1 (requested 1, available 0)")
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.uniform_exception_before_turns"],
                not_fired=["rollouts.uniform_infra_exception"],
                evidence=[dict(gate="rollouts", contains="SandboxCapacityExhaustedError")],
                finding_contains=dict(rollouts="before any agent turn"),
                description="Every trial ends with an exception class the infrastructure list does not name "
                            "(SandboxCapacityExhaustedError) before its first agent turn: a uniform infrastructure failure by its shape.")


@incident
def same_exception_after_turns(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__U{i:06d}", 0.0, at(5 + i * 4), exception="AgentStepLimitReachedError", turns=40,
                agent=[COHERENT] if i % 4 == 0 else None)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                not_fired=["rollouts.uniform_exception_before_turns", "rollouts.uniform_infra_exception"],
                description="Twin of uniform-unlisted-exception: the same unlisted exception on every trial, but after 40 agent "
                            "turns each (the agent ran out of steps): no uniform infrastructure failure.")


@incident
def daytona_snapshot_quota(b_root):
    uniform_infra(b_root, "DaytonaValidationError", message="Failed to create sandbox: snapshot quota exceeded")
    return uniform_expected("DaytonaValidationError", "DaytonaValidationError",
                            "Daytona 40-snapshot quota exceeded: every trial dies unscored (DaytonaValidationError).")


@incident
def verification_not_completed(b_root):
    uniform_infra(b_root, None, in_result=False,
                  exception_txt="Traceback (most recent call last):\n  File \"harbor/trial.py\", line 210, in run\nharbor.trial.errors.VerificationNotCompletedError: verifier did not complete\n")
    return uniform_expected("VerificationNotCompletedError", "VerificationNotCompletedError",
                            "Sandbox never came up / DAYTONA_* not forwarded: VerificationNotCompletedError in every exception.txt.")


@incident
def bearer_token_invalid(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__B{i:06d}", 0.0, at(5 + i * 4), exception="RuntimeError",
                exception_txt="RuntimeError: request failed: 401 Unauthorized: Bearer token invalid\n")
    return uniform_expected("BearerTokenInvalid", "BearerTokenInvalid", "Auth failure: 'Bearer token invalid' in every trial's exception.txt.")


@incident
def sandbox_not_found(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__N{i:06d}", 0.0, at(5 + i * 4), exception="RuntimeError",
                exception_txt="RuntimeError: Sandbox not found. Please build the environment first.\n")
    return uniform_expected("SandboxNotFound", "SandboxNotFound", "Sandboxes idle-reaped mid-trial: 'Sandbox not found' everywhere.")


@incident
def verifier_timeout_everywhere(b_root):
    uniform_infra(b_root, "VerifierTimeoutError", message="Verifier execution timed out after 600.0 seconds")
    return uniform_expected("VerifierTimeoutError", "VerifierTimeoutError", "The verifier never scores: VerifierTimeoutError on every trial.")


@incident
def broken_agent_loop(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__L{i:06d}", 0.0, at(5 + i * 4), turns=1, agent=[COHERENT] if i % 2 == 0 else None)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.broken_agent_loop"],
                evidence=[dict(gate="rollouts", contains="16 with result.json")],
                description="About 1 turn per trial with 100% reward 0: dead engine or broken agent loop.")


@incident
def zero_reward_hard_tasks(b_root):
    b = agentic_running(b_root, reward=0.0)
    for i in range(16):
        b.trial(f"task-{i:03d}__H{i:06d}", 0.0, at(5 + i * 4), turns=9, agent=[COHERENT, COHERENT])
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.zero_reward_coherent"],
                evidence=[dict(gate="rollouts", contains="I'll start by reading the test file")],
                description="All rewards 0 but coherent multi-turn attempts: hard tasks, not a kill by itself.")


@incident
def agentic_bring_up_early(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(15))
    b.lines("finelog.log", [
        loguru(at(0.5), "[rl-iris] MarinSkyRL now at 2bb70a88c1", where="cloud.iris.training_driver:main:88"),
        loguru(at(2), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"),
        "(EngineCore_DP0 pid=336) INFO 08-01 12:05:50 [shm_broadcast.py:542] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation).",
        loguru(at(9), "Resumed training from global_step 0"),
        phase(at(10), "Started", "step"), phase(at(10.1), "Started", "generate"),
        vllm_stats(at(13), "v1", 1200.0, 30, 0), vllm_stats(at(14), "v1", 1450.0, 36, 0)])
    b.write("trace_jobs/task-000__E000000/config.json", "{}")
    b.write("trace_jobs/task-001__E000001/config.json", "{}")
    return dict(now=iso(at(16)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.bring_up", "rollouts.agentic_early", "dynamics.too_early"],
                evidence=[dict(gate="rollouts", contains="2 trial dirs, 0 with result.json")],
                description="15 minutes into a long-episode arm: rollouts executing, 0 trials completed yet; not missing evidence.")


@incident
def agentic_traces_missing(b_root):
    agentic_running(b_root)
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="ERROR", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.agentic_traces_missing", "verdict.error"],
                finding_contains=dict(rollouts="no trace_jobs/"),
                evidence=[],
                description="Agentic run at step 10 with no trace_jobs/ synced: required rollout evidence missing (mode from config, not from the directory).")


@incident
def standard_all_zero_reward(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125))
    b.lines("finelog.log", training_log(12, reward=0.0) + [
        loguru(at(60), "Exception breakdown: {'RewardFileNotFoundError': 32}", level="WARNING",
               where="terminal_bench.terminal_bench_generator:generate:501"),
        loguru(at(60), "Batch generation complete: 0/32 successful, 32 failed instances, 0 masked (excluded from baseline)",
               level="WARNING", where="terminal_bench.terminal_bench_generator:generate:502")])
    return dict(now=iso(at(130)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.std_all_zero_reward", "rollouts.std_batch_infra"],
                evidence=[dict(gate="rollouts", contains="reward 0.0")],
                description="Standard run with reward exactly 0 on every step and the verifier failing every batch.")


@incident
def standard_empty_generations(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125))

    def metrics(s):
        m = healthy_metrics(s)
        m["generate/avg_num_tokens"] = 0.0
        return m
    b.lines("finelog.log", training_log(12, metrics_fn=metrics))
    return dict(now=iso(at(130)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.std_gen_tokens_zero"],
                evidence=[], finding_contains=dict(rollouts="generate/avg_num_tokens is 0"),
                description="Engines return empty generations on every step.")


# ----------------------------------------------------------------------------------------------- restarts / terminal
NORM_TOPK = ["(skyrl_entrypoint pid=4120) Traceback (most recent call last):",
             '(skyrl_entrypoint pid=4120)   File "/app/skyrl_train/model_wrapper.py", line 88, in build_models',
             "(skyrl_entrypoint pid=4120) AttributeError: 'Qwen3MoeConfig' object has no attribute 'norm_topk_prob'"]


@incident
def restart_burn_same_failure(b_root):
    b = Bundle(b_root, job_id="/alice/rl-moe-ep8", entrypoint=AGENTIC_EP.replace("Qwen3-8B", "Qwen3-30B-A3B"), synced=at(95))
    lines = []
    for attempt, start in ((1, 0), (2, 30), (3, 60)):
        lines.append(f"task=/alice/rl-moe-ep8/0 | [iris setup] step 1/2")
        lines.append(loguru(at(start + 1), "[rl-iris] MarinSkyRL now at 2bb70a88c1", where="cloud.iris.training_driver:main:88"))
        lines.append(loguru(at(start + 2), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"))
        lines += NORM_TOPK
        if attempt < 3:
            lines.append(glog(at(start + 3), "W", 1, "TCPStore.cpp:106", "[c10d] sendBytes failed on SocketImpl(fd=67, addr=[bogon]:36214, remote=[bogon]:43145): Broken pipe"))
    b.lines("finelog.log", lines)
    b.capture(at(96), state={"source": "iris", "state": "running", "failure_count": 2, "preemption_count": 0, "max_retries": 2,
                             "attempts": [{"attempt": 0, "state": "failed", "started_at": iso(at(0)), "finished_at": iso(at(4)),
                                           "exit_code": 1, "error": None},
                                          {"attempt": 1, "state": "failed", "started_at": iso(at(30)), "finished_at": iso(at(34)),
                                           "exit_code": 1, "error": None},
                                          {"attempt": 2, "state": "running", "started_at": iso(at(60)), "finished_at": None,
                                           "exit_code": None, "error": None}]},
              job_id="/alice/rl-moe-ep8")
    return dict(now=iso(at(100)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=2, same_failure=True), signatures=["python_traceback", "tcpstore_broken_pipe"],
                fired=["restarts.same_failure", "liveness.fatal_signature"],
                evidence=[dict(gate="liveness", contains="has no attribute 'norm_topk_prob'")],
                description="Stale MoE image: the same AttributeError on every attempt (2 of 2 retries burned, the third reproducing it).")


@incident
def restart_transient_recovered(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(155))
    lines = ["task=/alice/rl-qwen8b-tb/0 | [iris setup] step 1/2",
             loguru(at(1), "OSError: Qwen/Qwen3-8B does not appear to have a file named model.safetensors", level="ERROR",
                    where="skyrl_train.model_wrapper:build_models:88"),
             "task=/alice/rl-qwen8b-tb/0 | [iris setup] step 1/2"]
    lines += training_log(12, start_min=30)
    b.lines("finelog.log", lines)
    healthy_trials(b, start_min=35)
    for i in range(30):   # the dead generation's trials (attempt 0): unscored, must not be mixed in
        b.trial(f"task-{i:03d}__D{i:06d}", 0.0, at(0.5 + i * 0.02), exception="DaytonaValidationError")
    b.capture(at(156), state={"source": "iris", "state": "running", "failure_count": 1, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "failed", "started_at": iso(at(0)), "finished_at": iso(at(2)),
                                            "exit_code": 1, "error": None},
                                           {"attempt": 1, "state": "running", "started_at": iso(at(29)), "finished_at": None,
                                            "exit_code": None, "error": None}]})
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=1, same_failure=False), signatures=["hf_weights_missing"],
                fired=["restarts.recovered_transient", "rollouts.learning"],
                evidence=[dict(gate="liveness", contains="Training Step Progress: 12 / 200"),
                          dict(gate="rollouts", contains="(30 from earlier attempts excluded)")],
                description="One attempt burned on an HF weight-resolution flake; the retry is healthy: transient, recovered.")


@incident
def terminal_failed_survivor_cascade(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, state="failed", synced=at(80))
    lines = training_log(6, stats_era="v1", engines=1)
    lines += [loguru(at(61), "RuntimeError: CUDA error: an illegal memory access was encountered", level="ERROR",
                     where="skyrl_train.workers.fsdp.fsdp_worker:training_step:430", actor="FSDPPolicyWorker pid=5120, ip=10.0.5.13"),
              glog(at(62), "E", 3, "ProcessGroupNCCL.cpp:632", "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800331 milliseconds before timing out."),
              glog(at(62.5), "W", 1, "TCPStore.cpp:106", "[c10d] sendBytes failed on SocketImpl(fd=67, addr=[bogon]:36214, remote=[bogon]:43145): Broken pipe"),
              glog(at(62.5), "W", 2, "TCPStore.cpp:106", "[c10d] sendBytes failed on SocketImpl(fd=68, addr=[bogon]:36215, remote=[bogon]:43145): Broken pipe"),
              "(skyrl_entrypoint pid=4120) ray.exceptions.RayTaskError(RuntimeError): ray::FSDPPolicyWorker.training_step() (pid=5120, ip=10.0.5.13)"]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(300)), verdict="NO-KILL", mode="standard", terminal=True,
                gates=dict(liveness="FAIL"), restarts=dict(burned=1, same_failure=False),
                signatures=["cuda_error", "nccl_collective_timeout", "tcpstore_broken_pipe", "ray_worker_crashed"],
                fired=["liveness.terminal", "verdict.terminal"],
                finding_contains=dict(liveness="TERMINAL"),
                first_error_contains="CUDA error: an illegal memory access",
                evidence=[dict(gate="liveness", contains='"state": "failed"')],
                description="Terminal failed job: the primary CUDA illegal-memory-access comes first; the NCCL timeout and TCPStore cascade are survivors.")


@incident
def terminal_config_override(b_root):
    b = Bundle(b_root, job_id="/alice/rl-bad-override", entrypoint=STANDARD_EP, state="failed", synced=at(5))
    b.lines("finelog.log", [
        "task=/alice/rl-bad-override/0 | [iris setup] step 1/2",
        loguru(at(1), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"),
        loguru(at(1.3), "omegaconf.errors.ConfigAttributeError: Could not override 'generator.max_num_seq'. Key 'max_num_seq' is not in struct",
               level="ERROR", where="skyrl_train.entrypoints.main_base:main:61")])
    return dict(now=iso(at(60)), verdict="NO-KILL", mode="standard", terminal=True, gates=dict(liveness="FAIL"),
                restarts=dict(burned=1, same_failure=False), signatures=["config_override_error"],
                fired=["liveness.terminal"], first_error_contains="Could not override 'generator.max_num_seq'",
                evidence=[], description="Config-parse death 18 s after Ray attach: terminal, deterministic; fix the override key.")


@incident
def terminal_unnamed_exception(b_root):
    b = Bundle(b_root, job_id="/alice/rl-bad-data", entrypoint=STANDARD_EP, state="failed", synced=at(70))
    lines = training_log(5, stats_era="v1", engines=1)
    lines += ["2026-08-01T12:51:39.331095044Z trainer-1  | " + line for line in (
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/skyrl_train/dataset/replay.py", line 88, in load_shard',
        "    table = pq.read_table(path)",
        "pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file.")]
    lines += ["2026-08-01T12:51:40.002311876Z trainer-1  | torch.distributed.elastic.multiprocessing.api: failed (exitcode: 1) local_rank: 0 (pid: 812) of binary: /opt/venv/bin/python"]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(120)), verdict="NO-KILL", mode="standard", terminal=True, gates=dict(liveness="FAIL"),
                restarts=dict(burned=1, same_failure=False), fired=["liveness.terminal", "verdict.terminal"],
                first_error_contains="pyarrow.lib.ArrowInvalid: Parquet magic bytes not found",
                evidence=[], description="Terminal job whose only error is an exception class no signature names, behind "
                                         "container timestamps and a compose service prefix: quoted verbatim as the first "
                                         "causal error, ahead of the launcher's exit status.")


@incident
def terminal_absent_no_pods(b_root):
    b = Bundle(b_root, job_id="/alice/rl-pruned", entrypoint=AGENTIC_EP, state="running", synced=at(60))
    b.lines("finelog.log", training_log(3))
    b.capture(at(200), state={"source": "iris", "state": "absent", "failure_count": 0, "preemption_count": 0,
                              "max_retries": None, "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": []}, job_id="/alice/rl-pruned")
    return dict(now=iso(at(205)), verdict="NO-KILL", mode="agentic", terminal=True, gates=dict(liveness="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.terminal"],
                finding_contains=dict(liveness="absent"), evidence=[dict(gate="liveness", contains='"state": "absent"')],
                description="Absence after existence is terminal: a capture newer than the manifest finds no controller record and 0 pods.")


@incident
def jupiter_chain_same_failure(b_root):
    b = Bundle(b_root, cluster="jsc-jupiter", job_id="/slurm/48403", jupiter=True, synced=at(100),
               extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "48403", "state": "pending",
                                       "entrypoint": "", "submitted_at_ms": 0}})
    crash = ["Traceback (most recent call last):",
             '  File "/e/project/skyrl/skyrl_train/dataset.py", line 77, in __init__',
             "AssertionError: dataset size 0 < train_batch_size 256 (placeholder train data not applied)",
             "srun: error: jpbo-012-01: task 0: Exited with exit code 1"]
    for leg, start in (("48401", 0), ("48402", 20)):
        b.lines(f"slurm_logs/grpo-qwen3-8b_{leg}.out", [loguru(at(start), "Ray nodes alive: 4/4")] + crash)
    b.lines("slurm_logs/grpo-qwen3-8b_48402.err", ["slurmstepd: error: *** JOB 48402 ON jpbo-012-01 CANCELLED AT 2026-08-01T12:21:40 DUE TO TASK FAILURE ***"])
    return dict(now=iso(at(105)), verdict="KILL", mode="unknown", terminal=False,
                gates=dict(liveness="PASS", rollouts="ERROR"), restarts=dict(burned=2, same_failure=True),
                signatures=["python_traceback", "slurm_cancelled"],
                fired=["restarts.same_failure", "verdict.kill_same_failure", "rollouts.mode_unknown"],
                evidence=[], first_error_contains="AssertionError: dataset size 0",
                description="Jupiter afterany chain: legs 48401 and 48402 failed with the same AssertionError; leg 48403 is pending to repeat it.")


# ----------------------------------------------------------------------------------------------- evidence problems
@incident
def missing_logs(b_root):
    Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(100))
    return dict(now=iso(at(105)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="ERROR"), restarts=dict(burned=0, same_failure=False), fired=["liveness.no_logs", "verdict.error"],
                evidence=[], finding_contains=dict(liveness="no log evidence"),
                description="A running job whose bundle holds only the manifest: missing evidence is ERROR, not a conservative NO-KILL.")


@incident
def stale_evidence(b_root):
    b = agentic_running(b_root, synced=125)
    healthy_trials(b)
    return dict(now=iso(at(125 + 180)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="ERROR"), restarts=dict(burned=0, same_failure=False), fired=["liveness.stale_evidence"],
                evidence=[dict(gate="liveness", contains="synced_at")], finding_contains=dict(liveness="stale"),
                description="The syncdown is 3 hours old and no newer capture exists: stale beyond --max-age.")


@incident
def evidence_after_now(b_root):
    b = agentic_running(b_root, synced=125)
    healthy_trials(b)
    return dict(now=iso(at(125 - 150)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="ERROR"), restarts=dict(burned=0, same_failure=False), fired=["liveness.evidence_after_now"],
                evidence=[dict(gate="liveness", contains="synced_at")],
                finding_contains=dict(liveness="evidence from the future: the newest evidence 2026-08-01T14:05:00Z is 9000s after the "
                                                "evaluation time 2026-08-01T11:35:00Z"),
                description="--now is 2.5 hours before the syncdown (a capture from the future of the evaluation time): "
                            "ERROR naming both times, not a confident verdict on ages that are negative.")


@incident
def evidence_slightly_after_now(b_root):
    b = agentic_running(b_root, synced=125)
    healthy_trials(b)
    return dict(now=iso(at(125 - 2)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.progressing"], evidence=[],
                description="--now two minutes before the syncdown: within the clock-skew allowance, judged as usual.")


@incident
def metrics_parse_failure(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125))
    lines = training_log(12)
    lines = [ln if "WANDB_MIRROR" not in ln else ln[: ln.index("metrics=") + 40] for ln in lines]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(130)), verdict="ERROR", mode="standard", terminal=False,
                gates=dict(liveness="PASS", dynamics="ERROR"), restarts=dict(burned=0, same_failure=False),
                fired=["dynamics.metrics_parse_failure", "rollouts.std_metrics_missing"],
                evidence=[dict(gate="dynamics", contains="WANDB_MIRROR kind=train step=1")],
                description="Steps advance (phase timers) but every WANDB_MIRROR payload is truncated: a failed metrics probe is ERROR, never a silent pass.")


@incident
def malformed_manifest(b_root):
    b = Bundle(b_root, manifest=False)
    b.write("manifest.json", '{"bundle_format": 1, "cluster": "cw-us-east-02a", "job_id": "/alice/rl-x", "job": {"state": "runn')
    b.lines("finelog.log", training_log(3))
    return dict(now=iso(at(40)), verdict="ERROR", mode="standard", terminal=False, gates=dict(liveness="ERROR"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.evidence_unreadable", "liveness.state_unknown",
                                                                     "liveness.stale_evidence"],
                evidence=[dict(gate="liveness", contains="malformed JSON")],
                description="Truncated manifest.json and no capture: controller state and freshness are unknown; the logs are still "
                            "read (mode from the launch log: the trainer stepped without an agent-harness generator).")


@incident
def sources_disagree(b_root):
    b = agentic_running(b_root)
    healthy_trials(b)
    b.capture(at(126), state={"source": "iris", "state": "absent", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0")]})
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False, gates=dict(liveness="ERROR"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.sources_disagree"],
                evidence=[], finding_contains=dict(liveness="disagree"),
                description="The controller reports the job absent while the same capture lists a running pod: unreconciled sources.")


# ----------------------------------------------------------------------------------------------- stalls
def polls(role_util: dict[str, float], n=3, start=None, mem=70371):
    start = start or at(200)
    rows = []
    for k in range(n):
        t = iso(start + (at(0.5) - at(0)) * k)
        for role, util in sorted(role_util.items()):
            host = "iris-alice-rl-qwen8b-tb-0-1a2b3c-0" if role == "policy" else "iris-alice-rl-qwen8b-tb-1-9f8e7d-0"
            for g in range(4):
                rows.append({"t": t, "host": host, "gpu": g, "util_pct": util, "mem_used_mib": mem, "mem_total_mib": 81559,
                             "power_w": 120.0 if util == 0 else 610.5, "dram_active": None, "role": role,
                             "processes": ["ray::FSDPPolicyWorker" if role == "policy" else "ray::AsyncVLLMInferenceEngine"]})
    return rows


STACK_ALLREDUCE = """Thread 5120 (idle): "MainThread"
    _wait_for_work (torch/distributed/distributed_c10d.py:2411)
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    clip_grad_norm_ (torch/distributed/fsdp/fully_sharded_data_parallel.py:1181)
    training_step (skyrl_train/workers/fsdp/fsdp_worker.py:430)
"""


@incident
def stall_without_live_evidence(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(200))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    return dict(now=iso(at(205)), verdict="ERROR", mode="standard", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS"), restarts=dict(burned=0, same_failure=False),
                fired=["liveness.trainer_frozen", "verdict.stall_without_live_evidence"],
                evidence=[dict(gate="liveness", contains="Started: 'fwd_logprobs_values_reward'")],
                description="Trainer frozen 2 h with no hard-failure signature and no live evidence: ERROR, next action capture GPU polls and stacks.")


@incident
def stall_with_live_evidence(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    b.capture(at(200), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0)), "finished_at": None,
                                            "exit_code": None, "error": None}]},
              polls=polls({"policy": 0.0}), stacks={"iris-alice-rl-qwen8b-tb-0-1a2b3c-0__5120.txt": STACK_ALLREDUCE},
              job=job_json(), job_id="/alice/rl-qwen8b-gsm8k")
    return dict(now=iso(at(202)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS"), restarts=dict(burned=0, same_failure=False),
                fired=["liveness.wedge_live_policy_idle", "liveness.wedge_live_stacks", "verdict.kill_hard_failure"],
                evidence=[dict(gate="liveness", contains='"role": "policy", "util_pct": 0.0')],
                description="The same frozen trainer with a live capture: policy GPUs idle with weights resident across 3 polls and "
                            "py-spy stacks in all_reduce: the stall is backed by live evidence -> KILL.")


@incident
def colocated_deception_live(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=True, until_min=150))
    healthy_trials(b)
    b.capture(at(200), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0)), "finished_at": None,
                                            "exit_code": None, "error": None}]},
              polls=polls({"policy": 0.0, "inference": 87.0}), job=job_json(),
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0"),
                                                                      pod("iris-alice-rl-qwen8b-tb-1-9f8e7d-0")]},
              files={"pod_logs/iris-alice-rl-qwen8b-tb-1-9f8e7d-0.log": "\n".join(
                  vllm_stats(at(190 + k), "v1", 2010.0, 44, 0, engine=e, pid=2871 + e) for k in range(5) for e in range(2)) + "\n"})
    return dict(now=iso(at(202)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="FAIL", resources="PASS", rollouts="PASS"), restarts=dict(burned=0, same_failure=False),
                fired=["liveness.wedge_live_policy_idle", "liveness.colocated_deception"],
                evidence=[dict(gate="liveness", contains='"role": "policy"')],
                description="Colocated-engine deception caught live: engine GPUs busy (87%), policy GPUs 0% with weights resident, "
                            "trainer frozen, no NCCL line at all.")


@incident
def stall_refuted_long_step(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    b.capture(at(132), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []}, polls=polls({"policy": 96.0}, start=at(131)), job=job_json(),
              job_id="/alice/rl-qwen8b-gsm8k")
    return dict(now=iso(at(152)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS"), restarts=dict(burned=0, same_failure=False),
                fired=["liveness.stall_refuted_live"], evidence=[dict(gate="liveness", contains='"util_pct": 96.0')],
                description="The trainer log is quiet past the cadence but live polls show the policy GPUs computing: a long step, not a wedge.")


# ----------------------------------------------------------------------------------------------- dynamics
@incident
def broken_replay_dynamics(b_root):
    b = Bundle(b_root, job_id="/alice/rl-moe-r3", entrypoint=STANDARD_EP.replace("Qwen3-8B", "Qwen3-30B-A3B"), synced=at(205))

    def metrics(s):
        m = healthy_metrics(s)
        if s >= 16:
            m.update({"policy/log_ratio_abs_max": 19.2, "policy/policy_loss": 10421.5, "policy/raw_grad_norm": 118234.0,
                      "policy/tis/imp_ratio_mean": 1.01})
        return m
    b.lines("finelog.log", training_log(20, metrics_fn=metrics))
    return dict(now=iso(at(210)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["dynamics.broken_replay"],
                evidence=[dict(gate="dynamics", contains="log_ratio_abs_max=19.2")],
                description="Broken router replay after a weight sync: log_ratio_abs_max ~19, policy_loss ~1e4, grad_norm ~1e5.")


@incident
def reward_plateau(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(205))
    b.lines("finelog.log", training_log(20, metrics_fn=lambda s: healthy_metrics(s, reward=0.31 + (0.004 if s % 2 else 0.0))))
    return dict(now=iso(at(210)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["dynamics.plateau"],
                evidence=[dict(gate="dynamics", contains="step 20:")], finding_contains=dict(dynamics="plateau"),
                description="Reward flat at 0.31 for 20 steps: a plateau alone is not a kill condition.")


@incident
def nan_loss(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125))

    def metrics(s):
        m = healthy_metrics(s)
        if s >= 11:
            m["policy/policy_loss"] = "nan"
        return m
    lines = training_log(12, metrics_fn=metrics)
    lines = [ln.replace('"policy/policy_loss": "nan"', '"policy/policy_loss": NaN') for ln in lines]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(130)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(dynamics="FAIL"), restarts=dict(burned=0, same_failure=False), fired=["dynamics.non_finite"],
                evidence=[], finding_contains=dict(dynamics="policy_loss"),
                description="NaN policy loss from step 11 (json NaN literal in WANDB_MIRROR).")


@incident
def tis_divergence(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125))

    def metrics(s):
        m = healthy_metrics(s)
        m["policy/tis/imp_ratio_mean"] = 0.97 if s < 10 else 3.4
        return m
    b.lines("finelog.log", training_log(12, metrics_fn=metrics))
    return dict(now=iso(at(130)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(dynamics="FAIL"), restarts=dict(burned=0, same_failure=False), fired=["dynamics.tis_out_of_range"],
                evidence=[], finding_contains=dict(dynamics="3.4"),
                description="TIS importance ratio mean jumps to 3.4 after a sync: trainer and served policies diverge.")


# ----------------------------------------------------------------------------------------------- hostile input
@incident
def hostile_input_healthy(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125))
    lines = training_log(12, stats_era="v1")
    body = "\r\n".join("\x1b[0;36m" + ln + "\x1b[0m" if i % 3 == 0 else ln for i, ln in enumerate(lines)) + "\r\n"
    junk = bytes(range(256)) * 64 + b"\n" + b"A" * (3 * 1024 * 1024) + b" Traceback (most recent call last) at the end of a giant line\n"
    b.write("finelog.log", junk + body.encode() + b"\xff\xfe truncated mid-li")
    b.write("pod_logs/empty.log", b"")
    b.write("ray_vllm_logs/pod-0/binary.out", bytes(range(256)) * 4096)
    healthy_trials(b)
    b.write("trace_jobs/task-broken__X000001/result.json", '{"verifier_result": {"rewards": {"reward": 1.0')
    loop = b.root / "ray_vllm_logs" / "pod-0" / "loop"
    loop.parent.mkdir(parents=True, exist_ok=True)
    if not loop.is_symlink():
        loop.symlink_to("..")
    outside = b.root / "pod_logs" / "outside.log"
    if not outside.is_symlink():
        outside.symlink_to("/etc/hostname")
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False),
                evidence=[dict(gate="liveness", contains="Training Step Progress: 12 / 200")],
                fired=["liveness.error_handled"],
                first_error_contains="Traceback (most recent call last) at the end of a giant line",
                description="Bad input everywhere (binary bytes, a 3 MB line, ANSI, CRLF, truncated tail, empty file, symlink loop, "
                            "a symlink outside the bundle, a malformed result.json): nothing crashes, nothing is lost; the "
                            "traceback at the end of the 3 MB line is quoted around its match.")


@incident
def misc_fatal_signatures(b_root):
    """Rare fatal signatures in one terminal attempt chain (each must be detected by the scanner)."""
    b = Bundle(b_root, job_id="/alice/rl-misc", entrypoint=STANDARD_EP, state="failed", synced=at(30))
    b.lines("finelog.log", [
        "task=/alice/rl-misc/0 | [iris setup] step 1/2",
        loguru(at(1), "NCCL WARN Bootstrap : no socket interface found", level="ERROR", where="nccl"),
        "[2026-08-01 12:01:10,000 E 395 395] raylet_client.cc:60: Failed to establish connection to the raylet at 10.0.5.12:6379",
        loguru(at(2), "FileNotFoundError: bucket does not exist: marin-na", level="ERROR", where="skyrl_train.storage:open:40"),
        "  Warning: pod iris-alice-rl-misc-0 SchedulingGated: topology 'infiniband' allows to fit only 2 out of 4 pod(s)",
        "task=/alice/rl-misc/0 | [iris setup] step 1/2",
        loguru(at(20), "Worker rank 3 received signal 11", level="ERROR", where="cloud.iris.training_driver:watch:210"),
        "slurmstepd: error: *** STEP 557341.0 ON c4-n12 CANCELLED AT 2026-08-01T12:20:25 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"])
    return dict(now=iso(at(60)), verdict="NO-KILL", mode="standard", terminal=True, gates=dict(liveness="FAIL"),
                restarts=dict(burned=2, same_failure=False),
                signatures=["nccl_no_socket_interface", "raylet_connection_failed", "object_store_bucket_missing",
                            "scheduling_topology_unfit", "worker_rank_signal", "slurm_node_failure"],
                first_error_contains="Worker rank 3 received signal 11", evidence=[],
                description="A failed job whose two attempts died differently (socket interface / bucket, then a signal): terminal, not the same failure.")


# ----------------------------------------------------------------------------------------------- more coverage
@incident
def oom_restart_recovered(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125))
    b.lines("finelog.log", training_log(12))
    healthy_trials(b)
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0"),
                                                                      pod("iris-alice-rl-qwen8b-tb-1-9f8e7d-0", restarts=1,
                                                                          oom_last=True, oom_at=40)]},
              files={"capture.json": json.dumps({"format": 1, "captured_at": iso(at(126)), "backend": "iris",
                                                 "cluster": "cw-us-east-02a", "job_id": "/alice/rl-qwen8b-tb", "probes": [
                  {"name": "pods:list-by-label", "api": "GET /api/v1/namespaces/iris/pods?labelSelector=iris.job_id%3Dalice.rl-qwen8b-tb",
                   "started_at": iso(at(126)), "finished_at": iso(at(126)), "exit_code": None, "output": "pods.json", "error": None},
                  {"name": "exec:nvidia-smi-query-gpu", "api": "GET /api/v1/namespaces/iris/pods/iris-alice-rl-qwen8b-tb-1-9f8e7d-0/exec",
                   "started_at": iso(at(126)), "finished_at": iso(at(126)), "exit_code": None, "output": None,
                   "error": "timed out after 10s waiting for the command to finish"}]}, indent=2, sort_keys=True)})
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.oom_recovered"],
                evidence=[], finding_contains=dict(resources="recovered"),
                description="One container OOMKilled at 12:40 and restarted; the trainer kept stepping afterwards: recovered. "
                            "A timed-out GPU poll is listed as an evidence problem, not a gate error.")


@incident
def live_capture_only_standard(b_root):
    """A bundle made by `rlhealth probe` alone: no watcher manifest; mode from the pods' launch args."""
    b = Bundle(b_root, manifest=False)
    args = json.loads(STANDARD_EP)["argv"][1:]
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0)), "finished_at": None,
                                            "exit_code": None, "error": None}]},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0", args=args)]},
              files={"pod_logs/iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0.log": "\n".join(training_log(12)) + "\n"},
              job_id="/alice/rl-qwen8b-gsm8k")
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), mode_source_contains="pods.json",
                evidence=[dict(gate="liveness", contains="Training Step Progress: 12 / 200")],
                description="A capture written by the live probe alone (no watcher manifest): identity and state from the capture, "
                            "mode from the task container's launch arguments in pods.json, logs from the capture's pod_logs/.")


@incident
def live_probe_api_faults(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125))
    b.lines("finelog.log", training_log(12))
    healthy_trials(b)
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0")]},
              files={"capture.json": json.dumps({"format": 1, "captured_at": iso(at(126)), "backend": "iris",
                                                 "cluster": "cw-us-east-02a", "job_id": "/alice/rl-qwen8b-tb", "probes": [
                  {"name": "pod:log", "api": "GET /api/v1/namespaces/iris/pods/iris-alice-rl-qwen8b-tb-0-1a2b3c-0/log?container=task",
                   "started_at": iso(at(126)), "finished_at": iso(at(126)), "exit_code": None, "output": None,
                   "error": "HTTP 500 Internal Server Error: Internal error occurred"}]}, indent=2, sort_keys=True)})
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False, gates=dict(liveness="ERROR"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.evidence_unreadable"],
                evidence=[dict(gate="liveness", contains="HTTP 500")],
                description="The live capture could not read the pod's task log (API 500): evidence that should exist is missing.")

@incident
def engines_idle_live_image_pull(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(150))
    lines = frozen_training(8, engines_after=False)
    b.lines("finelog.log", lines)
    healthy_trials(b)
    b.capture(at(200), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []},
              polls=polls({"inference": 0.0}), job=job_json(),
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0"),
                                                                      pod("iris-alice-rl-qwen8b-tb-1-9f8e7d-0", waiting="ImagePullBackOff")]})
    return dict(now=iso(at(202)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="FAIL", resources="FAIL"), restarts=dict(burned=0, same_failure=False),
                fired=["resources.engines_idle_live", "resources.image_pull_transient", "liveness.trainer_frozen"],
                evidence=[dict(gate="resources", contains='"role": "inference", "util_pct": 0.0')],
                description="Engines loaded (weights resident) but idle across 3 live polls while the trainer is frozen; "
                            "one pod in a transient ImagePullBackOff is noted, not blamed.")


@incident
def metrics_missing_after_recovered_restart(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(155))
    lines = ["task=/alice/rl-qwen8b-gsm8k/0 | [iris setup] step 1/2",
             loguru(at(1), "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error", level="ERROR",
                    where="skyrl_train.workers.fsdp.fsdp_worker:init:120"),
             "(skyrl_entrypoint pid=4120) Traceback (most recent call last):",
             "(skyrl_entrypoint pid=4120) RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error",
             "task=/alice/rl-qwen8b-gsm8k/0 | [iris setup] step 1/2"]
    lines += [ln for ln in training_log(12, start_min=30) if "WANDB_MIRROR" not in ln]
    b.lines("finelog.log", lines)
    b.capture(at(156), state={"source": "iris", "state": "running", "failure_count": 1, "preemption_count": 0, "max_retries": 2,
                              "attempts": [{"attempt": 0, "state": "failed", "started_at": iso(at(0)), "finished_at": iso(at(2)),
                                            "exit_code": 1, "error": None},
                                           {"attempt": 1, "state": "running", "started_at": iso(at(29)), "finished_at": None,
                                            "exit_code": None, "error": None}]},
              job_id="/alice/rl-qwen8b-gsm8k")
    return dict(now=iso(at(160)), verdict="ERROR", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="ERROR", dynamics="ERROR"),
                restarts=dict(burned=1, same_failure=False),
                fired=["dynamics.metrics_missing", "rollouts.std_metrics_missing", "restarts.recovered"],
                evidence=[], finding_contains=dict(dynamics="no metric record"),
                description="One attempt burned on an NCCL init error, the retry trains (phase timers advance) but the logger emits no "
                            "metric records at all: the dynamics probe failed, ERROR.")


@incident
def unreadable_results_bad_polls(b_root):
    b = agentic_running(b_root)
    for i in range(12):
        name = f"task-{i:03d}__R{i:06d}"
        b.write(f"trace_jobs/{name}/config.json", "{}")
        b.write(f"trace_jobs/{name}/result.json", "" if i % 2 else '{"verifier_result": {"rewards": ')
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []},
              files={"gpu_polls.jsonl": "index, utilization.gpu [%]\n0, [N/A]\n\x00\x01 not json\n"})
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="ERROR", rollouts="ERROR"), restarts=dict(burned=0, same_failure=False),
                fired=["rollouts.unreadable_results", "resources.evidence_unreadable"],
                evidence=[dict(gate="resources", contains="malformed lines")],
                description="Every result.json truncated or empty and the capture's gpu_polls.jsonl is raw CSV garbage: ERROR with reasons.")


# ----------------------------------------------------------------------------------------------- driver
# ----------------------------------------------------------------------------------------------- judgement depth
NAMED_LIKE_AGENT_EP = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-8B",
                                           "trainer.run_name=harbor-agent-terminal-gsm8k", "--train_data", "['gsm8k']",
                                           "generator.enforce_eager=false", "--gpu", "H100", "--max-retries", "4"]})


@incident
def standard_run_named_like_agentic(b_root):
    b = Bundle(b_root, job_id="/alice/rl-harbor-agent-terminal", entrypoint=NAMED_LIKE_AGENT_EP, synced=at(155))
    b.lines("finelog.log", training_log(15))
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False, max_retries=4, remaining=4), fired=["rollouts.std_ok"],
                mode_source_contains="no agent-harness or sandbox section",
                evidence=[dict(gate="rollouts", contains="step 15: reward")],
                description="A standard run whose name says harbor/agent/terminal has no harness section: standard, healthy; "
                            "the retry budget comes from --max-retries in the launch command.")


@incident
def early_spike_recovered(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(305))

    def metrics(s):
        m = healthy_metrics(s)
        if s in (3, 4):
            m.update({"policy/log_ratio_abs_max": 19.2, "policy/policy_loss": 10421.5, "policy/raw_grad_norm": 118234.0})
        return m
    b.lines("finelog.log", training_log(30, metrics_fn=metrics))
    return dict(now=iso(at(310)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["dynamics.healthy"],
                finding_contains=dict(dynamics="an earlier spike recovered"), evidence=[],
                description="A broken-replay-sized spike at steps 3-4 that returned to the healthy band for 26 steps: not a FAIL.")


@incident
def trainer_reward_disagrees_with_trials(b_root):
    b = agentic_running(b_root)
    for i in range(16):
        b.trial(f"task-{i:03d}__Z{i:06d}", 0.0, at(5 + i * 4), turns=9, agent=[COHERENT, COHERENT])
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="ERROR"),
                restarts=dict(burned=0, same_failure=False), fired=["dynamics.reward_disagrees_with_trials"],
                finding_contains=dict(dynamics="disagree"), evidence=[],
                description="The trainer logs a rising reward while every finished trial scores 0: the sources contradict each other.")


UNKNOWN_GPU_EP = STANDARD_EP.replace(', "--gpu", "H100"', "")


@incident
def unknown_gpu_healthy_throughput(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=UNKNOWN_GPU_EP, synced=at(155))
    b.lines("finelog.log", training_log(15))
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_ok"],
                evidence=[], description="GPU type unknown, throughput healthy: judged against the slowest GPU in the table, named.")


@incident
def unknown_gpu_throughput_floored(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=UNKNOWN_GPU_EP, synced=at(155))
    b.lines("finelog.log", training_log(15, gen=61.5))
    return dict(now=iso(at(160)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL"), restarts=dict(burned=0, same_failure=False),
                fired=["resources.throughput_floor"], finding_contains=dict(resources="GPU type unknown"), evidence=[],
                description="GPU type unknown and 61.5 tok/s per engine with 48 running: below even the most conservative floor.")


@incident
def token_salad_share(b_root):
    b = agentic_running(b_root)
    for i in range(20):
        incoherent = i % 10 >= 3
        b.trial(f"task-{i:03d}__T{i:06d}", 1.0 if i in (0, 1) else 0.0, at(5 + i * 4), turns=6,
                agent=[salad(i), salad(i + 100)] if incoherent else [COHERENT, COHERENT])
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.token_salad"],
                evidence=[dict(gate="rollouts", contains="token salad")], finding_contains=dict(rollouts="14/20"),
                description="After a weight sync on a new geometry 14 of 20 outputs are token salad, though 2 trials still score.")


MOE_EP = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-30B-A3B",
                              "terminal_bench_config.trials_dir=s3://marin-us-east-02a/tmp/ttl=14d/rl-qwen30b-a3b-tb/trace_jobs",
                              "generator.enforce_eager=false", "generator.num_inference_engines=2",
                              "generator.inference_engine_expert_parallel_size=4",
                              "generator.max_num_seqs=128", "terminal_bench_config.n_concurrent_trials=256", "--gpu", "H100",
                              "--max-retries", "1"]})
MOE_SALAD_KINDS = ("mixed_script", "subword", "special_tokens", "wrong_language", "loop", "subword", "special_tokens", "empty")
_SUBWORD = ["ertain", "ulously", "ifoundation", "Spl", "oxid", "vertex", "Tak", "ometric", "(self", "=[", "ression",
            "_init", "ategor", "ounted", "ipher", "lection", "Gener", "ativ", "_tok", "ensor", "):", "ifest", "orph"]


def moe_salad(kind: str, seed: int) -> str:
    """Token salad of one kind, as a policy served with scrambled MoE weights emits it."""
    x = seed * 7919 + 17
    def pick(seq):
        nonlocal x
        x = (x * 1103515245 + 12345) % (2 ** 31)
        return seq[x % len(seq)]
    if kind == "mixed_script":
        return salad(seed)
    if kind == "subword":
        return "".join(pick(_SUBWORD) + pick(["", " ", " ", "."]) for _ in range(70))
    if kind == "special_tokens":
        return (f"Let me check the {pick(['tests', 'parser', 'config'])} first.<|im_end|>\n<|im_start|>assistant\n"
                "<|im_start|>user\nLet me check the tests first.<|endoftext|> I will run the file")
    if kind == "wrong_language":
        return pick(["Сначала я прочитаю тестовый файл, чтобы понять, что должна возвращать функция, а потом исправлю парсер.",
                     "我先阅读测试文件，了解这个函数应该返回什么，然后修复解析器中失败的情况，再运行一次测试确认。"])
    if kind == "loop":
        return "I will read the file and then I will read the file again. " * 12
    return ""


def moe_run(b_root, *, reload_finished: bool):
    """A Qwen3-30B-A3B agentic run (2 engines x EP 4); a weight sync after every step: the engine
    log's update_weights line, then finish_weight_reload only when the reload bracket closes."""
    b = Bundle(b_root, entrypoint=MOE_EP, synced=at(125), job_id="/alice/rl-qwen30b-a3b-tb")
    lines = training_log(10, stats_era="v1", reward=0.0)
    sync = []
    for s in range(1, 11):
        t = (s - 1) * 10 + 9.92
        for e in range(2):
            actor = f"AsyncVLLMInferenceEngine pid={2871 + e}"
            sync.append((at(t), loguru(at(t), f"update_weights: received 18867 tensors via NCCL broadcast (weight version {s})",
                                        where="skyrl_train.inference_engines.vllm.vllm_engine:update_weights:318", actor=actor)))
            if reload_finished:
                sync.append((at(t + 0.01), loguru(at(t + 0.01), f"finish_weight_reload: weight version {s} loaded, w13 gate/up re-applied",
                                                   where="skyrl_train.inference_engines.vllm.vllm_engine:finish_weight_reload:352",
                                                   actor=actor)))
    b.lines("finelog.log", lines)
    b.lines("pod_logs/engine.log", [line for _, line in sorted(sync, key=lambda p: p[0])])
    return b


@incident
def moe_weight_sync_salad(b_root):
    b = moe_run(b_root, reload_finished=False)
    for i in range(50):
        if i < 12:       # started on the initial weights, before the first sync (step 1 ends at minute 9.9)
            b.trial(f"task-{i:03d}__M{i:06d}", 0.0, at(1 + i * 0.5), turns=9, agent=[COHERENT, "The test expects an empty list for blank input; I'll update parse() and rerun."])
        else:
            kind = "mixed_script" if i == 13 else MOE_SALAD_KINDS[i % len(MOE_SALAD_KINDS)]
            name = f"task-{i:03d}__M{i:06d}"
            b.trial(name, 0.0, at(11 + (i - 12) * 2.8), turns=9,
                    agent=[moe_salad(kind, i), moe_salad(kind, i + 100)] if kind != "empty" else None)
            if kind == "empty":   # the agent turns carry no text and no tool call
                traj = trajectory([])
                traj["steps"] += [{"step_id": 2 + k, "source": "agent", "message": ""} for k in range(3)]
                b.write(f"trace_jobs/{name}/agent/trajectory.json", json.dumps(traj))
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.token_salad_after_weight_sync"],
                evidence=[dict(gate="rollouts", contains="update_weights: received 18867 tensors")],
                finding_contains=dict(rollouts="38/38 sampled agent outputs incoherent after it"),
                description="New MoE geometry (Qwen3-30B-A3B, 2 engines x EP 4) whose weight sync breaks: coherent on the "
                            "initial weights, token salad of every kind after the first update_weights, no finish_weight_reload, every reward 0 "
                            "(a writing-system + common-word classifier alone flags 11 of the 50 samples).")


@incident
def moe_weight_sync_coherent_hard_tasks(b_root):
    b = moe_run(b_root, reload_finished=True)
    turns = [COHERENT, "The test expects an empty list for blank input; I'll update parse() and rerun.",
             "def parse(text: str) -> list[str]:\n    if not text.strip():\n        return []\n    return [t.strip() for t in text.split(',') if t.strip()]",
             '{"command": "cd /app && python -m pytest -q tests/test_parser.py -x 2>&1 | tail -20"}',
             "Traceback (most recent call last):\n  File \"/app/src/parser.py\", line 41, in parse\n    return int(fields[2])\nValueError: invalid literal for int() with base 10: 'N/A'"]
    for i in range(50):
        start = at(1 + i * 0.5) if i < 12 else at(11 + (i - 12) * 2.8)
        b.trial(f"task-{i:03d}__C{i:06d}", 0.0, start, turns=9, agent=[turns[i % 5], turns[(i + 1) % 5], turns[(i + 2) % 5]])
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.zero_reward_coherent"],
                evidence=[dict(gate="rollouts", contains="0/50 sampled agent outputs flagged")],
                description="Same MoE geometry with a closed reload bracket (finish_weight_reload after every update_weights): "
                            "coherent prose, code and tool calls on hard tasks, every reward 0: not token salad, not a kill.")


def moe_steps_run(b_root, salad_from_minute: float | None, stray=(), salad_until_minute: float = 1e9):
    """The MoE run with a weight sync after every step (closed reload brackets) and 60 trials two
    minutes apart; the 50 newest are sampled. Trials started at or after ``salad_from_minute`` emit
    token salad (reward 0); ``stray``: indices of single incoherent trials among coherent ones."""
    b = moe_run(b_root, reload_finished=True)
    turns = [COHERENT, "The test expects an empty list for blank input; I'll update parse() and rerun.",
             "def parse(text: str) -> list[str]:\n    if not text.strip():\n        return []\n    return [t.strip() for t in text.split(',') if t.strip()]"]
    for i in range(60):
        start = 1 + i * 2
        name = f"task-{i:03d}__S{i:06d}"
        if (salad_from_minute is not None and salad_from_minute <= start < salad_until_minute) or i in stray:
            kind = MOE_SALAD_KINDS[i % (len(MOE_SALAD_KINDS) - 1)]
            b.trial(name, 0.0, at(start), turns=9, agent=[moe_salad(kind, i), moe_salad(kind, i + 100)])
        else:
            b.trial(name, 1.0 if i % 3 == 0 else 0.0, at(start), turns=9, agent=[turns[i % 3], turns[(i + 1) % 3]])
    return b


@incident
def coherence_salad_recent_steps(b_root):
    moe_steps_run(b_root, salad_from_minute=80)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.token_salad_recent_steps", "trials.token_salad_recent_steps"],
                evidence=[dict(gate="rollouts", contains="(weight version 8)")],
                finding_contains=dict(rollouts="token salad in the newest 3 step(s), from weight sync 8"),
                description="The MoE run coherent (and scoring) for seven steps, then token salad from the eighth weight sync on: "
                            "20 of the 50 newest samples, below the overall salad share and with none before the first sync, so "
                            "only a per-step judgement catches it; the change point is quoted at weight sync 8.")


@incident
def coherence_salad_recovered(b_root):
    moe_steps_run(b_root, salad_from_minute=40, salad_until_minute=100)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.token_salad_recovered", "trials.token_salad_recovered"],
                not_fired=["trials.token_salad", "rollouts.token_salad", "rollouts.token_salad_recent_steps"],
                finding_contains=dict(rollouts="0/10 in the newest step (from weight sync 10 on"),
                evidence=[],
                description="Token salad in the steps from weight sync 4 to 9 (30 of the 50 sampled outputs), coherent again "
                            "after weight sync 10: judged per step the newest step is coherent, so the salad of earlier "
                            "steps is reported as recovered (NO-KILL, flip on salad in the newest step), not a kill.")


@incident
def coherence_coherent_recent_steps(b_root):
    moe_steps_run(b_root, salad_from_minute=None, stray=(45, 52, 58))
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.learning"], evidence=[],
                not_fired=["rollouts.token_salad_recent_steps", "trials.token_salad_recent_steps"],
                description="The same run with one stray incoherent sample in each of three recent steps (1 of 5 or 1 of 10 "
                            "per step): no step reaches the salad share, not token salad.")


@incident
def few_incoherent_among_coherent(b_root):
    b = agentic_running(b_root)
    for i in range(20):
        b.trial(f"task-{i:03d}__F{i:06d}", 1.0 if i % 3 == 0 else 0.0, at(5 + i * 4), turns=7,
                agent=[salad(i)] if i in (4, 11) else [COHERENT, COHERENT])
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.learning"], evidence=[],
                description="Two incoherent samples among 20, rewards flowing: not token salad.")


@incident
def last_retry_stalled(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(200))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    b.capture(at(201), state={"source": "iris", "state": "running", "failure_count": 2, "preemption_count": 0, "max_retries": 2,
                              "attempts": [{"attempt": 0, "state": "failed", "started_at": iso(at(-60)), "finished_at": iso(at(-50)),
                                            "exit_code": 1, "error": "RuntimeError: CUDA error: an illegal memory access was encountered"},
                                           {"attempt": 1, "state": "failed", "started_at": iso(at(-40)), "finished_at": iso(at(-30)),
                                            "exit_code": 1, "error": "ray.exceptions.ActorDiedError: The actor died unexpectedly"},
                                           {"attempt": 2, "state": "running", "started_at": iso(at(0)), "finished_at": None,
                                            "exit_code": None, "error": None}]},
              job_id="/alice/rl-qwen8b-gsm8k")
    return dict(now=iso(at(205)), verdict="ERROR", mode="standard", terminal=False, gates=dict(liveness="FAIL"),
                restarts=dict(burned=2, same_failure=False, max_retries=2, remaining=0),
                fired=["restarts.on_last_retry", "verdict.stall_without_live_evidence"],
                reasoning_contains="last retry", evidence=[],
                description="Two attempts burned with different errors; the last allowed attempt is frozen: urgency in REASONING.")


@incident
def gpu_memory_pinned_stalled(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    b.capture(at(200), polls=polls({"policy": 0.0, "inference": 0.0}, mem=81500), job_id="/alice/rl-qwen8b-gsm8k",
              state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                     "attempts": []})
    return dict(now=iso(at(205)), verdict="KILL", mode="standard", terminal=False, gates=dict(resources="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.gpu_memory_pinned_stalled"], evidence=[],
                description="Live polls: policy GPU memory pinned at the total while the trainer is frozen (VRAM exhausted).")


def pinned_cadence(b_root, policy_util):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(114))
    b.lines("finelog.log", training_log(8, engines=1))
    b.capture(at(115), polls=polls({"policy": policy_util, "inference": 0.0}, start=at(114.5), mem=81500), job_id="/alice/rl-qwen8b-gsm8k",
              state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                     "attempts": []})
    return b


@incident
def gpu_memory_pinned_cadence(b_root):
    pinned_cadence(b_root, 0.0)
    return dict(now=iso(at(115.5)), verdict="KILL", mode="standard", terminal=False, gates=dict(liveness="FAIL", resources="FAIL"),
                restarts=dict(burned=0, same_failure=False),
                fired=["trainer.frozen_live_policy_idle", "resources.gpu_memory_pinned_stalled", "liveness.wedge_live_policy_idle"],
                finding_contains=dict(liveness="(> 1791s)"), evidence=[],
                description="Live polls: every policy GPU at memory.total with 0% utilization while the trainer has been silent "
                            "for ~3.5 step cadences (under the fixed 45-minute floor): the cadence multiple sets the limit.")


@incident
def gpu_memory_high_cadence_busy(b_root):
    pinned_cadence(b_root, 88.0)
    return dict(now=iso(at(115.5)), verdict="NO-KILL", mode="standard", terminal=False, gates=dict(liveness="PASS", resources="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.progressing"], evidence=[],
                description="The same silence and near-total memory, but the policy GPUs compute in the live polls: a long step; "
                            "the fixed floor stays and nothing is frozen.")


@incident
def kv_cache_pressure_long_context(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(155))
    lines = training_log(15, gen=1210.0)
    lines = [ln.replace("GPU KV cache usage: 37.5%", "GPU KV cache usage: 96.8%") for ln in lines]
    b.lines("finelog.log", lines)
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS"), restarts=dict(burned=0, same_failure=False),
                fired=["resources.kv_cache_pressure"], finding_contains=dict(resources="KV-cache pressure"), evidence=[],
                description="131k-context arm: KV cache 97% full lowers tok/s but above the floor: reported, not a failure.")


@incident
def coordinator_not_dispatching(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125))
    lines = training_log(10, stats_era="v1")
    lines += [vllm_stats(at(t), "v1", 1980.0, 40, 0, engine=e, pid=2871 + e) for t in range(101, 125, 4) for e in range(2)]
    b.lines("finelog.log", lines)
    for i in range(6):
        b.trial(f"task-{i:03d}__C{i:06d}", 1.0 if i % 2 == 0 else 0.0, at(2 + i * 2), turns=7, agent=[COHERENT])
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False, gates=dict(rollouts="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.coordinator_not_dispatching"], evidence=[],
                description="Engines keep generating but no trial has started for ~2 hours: the coordinator is not dispatching.")


@incident
def manifest_artifact_errors(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(125),
               extra_manifest={"artifacts": {"finelog": "12,345 lines",
                                             "errors": [{"artifact": "trace_jobs", "error": "R2 list failed: 403 AccessDenied"},
                                                        {"artifact": "metrics_mirror", "error": "wandb mirror export timed out"}]}})
    b.lines("finelog.log", training_log(10))
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", rollouts="ERROR", dynamics="ERROR"), restarts=dict(burned=0, same_failure=False),
                fired=["rollouts.evidence_unreadable", "dynamics.evidence_unreadable"],
                finding_contains=dict(rollouts="403 AccessDenied", dynamics="timed out"), evidence=[],
                description="The watcher recorded that trace_jobs/ failed to sync: an evidence problem on ROLLOUTS.")


@incident
def tis_ratio_collapsed(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125))

    def metrics(s):
        m = healthy_metrics(s)
        m["policy/tis/imp_ratio_mean"] = 0.97 if s < 10 else 0.21
        return m
    b.lines("finelog.log", training_log(12, metrics_fn=metrics))
    return dict(now=iso(at(130)), verdict="KILL", mode="standard", terminal=False, gates=dict(dynamics="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["dyn.tis_low", "dynamics.tis_out_of_range"],
                finding_contains=dict(dynamics="0.21"), evidence=[],
                description="TIS importance ratio mean collapses to 0.21: served and trained policies diverge.")


@incident
def stale_evidence_with_crash(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(45))
    lines = training_log(4)
    lines.append(glog(at(41), "E", 5120, "ProcessGroupNCCL.cpp:1895", "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out."))
    b.lines("finelog.log", lines)
    return dict(now=iso(at(300)), verdict="ERROR", mode="standard", terminal=False, gates=dict(liveness="ERROR"),
                restarts=dict(burned=0, same_failure=False), fired=["gate.fail_on_stale_evidence"],
                finding_contains=dict(liveness="(stale evidence)"), evidence=[],
                description="A hang signature in a sync 4 hours old: a FAIL on stale evidence is only an ERROR (refresh first).")


@incident
def capture_running_without_pods(b_root):
    b = agentic_running(b_root)
    healthy_trials(b)
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": []})
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False, gates=dict(liveness="ERROR"),
                restarts=dict(burned=0, same_failure=False), fired=["job.sources_disagree_running", "liveness.sources_disagree"],
                finding_contains=dict(liveness="found no pods"), evidence=[],
                description="The controller says running but the capture finds no pod: unreconciled sources.")


@incident
def standard_bring_up_early(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(40))
    b.lines("finelog.log", [
        loguru(at(0.5), "[rl-iris] MarinSkyRL now at 2bb70a88c1", where="cloud.iris.training_driver:main:88"),
        loguru(at(2), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"),
        loguru(at(30), "Resumed training from global_step 0"),
        phase(at(31), "Started", "step"), phase(at(31.1), "Started", "generate"),
        vllm_stats(at(38), "v1", 2200.0, 40, 0)])
    return dict(now=iso(at(42)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"), confidence="medium",
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.std_early", "liveness.bring_up", "dynamics.too_early"],
                evidence=[], description="A standard run 40 minutes into bring-up: launch lines and a first step started, no reward yet.")


@incident
def controller_counted_failure(b_root):
    b = agentic_running(b_root)
    healthy_trials(b)
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 1, "preemption_count": 0, "max_retries": 3,
                              "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0")]})
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=1, same_failure=False, max_retries=3, remaining=2),
                fired=["restarts.controller_failures_only"], evidence=[],
                description="The controller counts one failed attempt that left no record or log; the run is healthy.")


@incident
def requeued_after_preemption(b_root):
    b = agentic_running(b_root)
    healthy_trials(b)
    b.capture(at(126), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 2, "max_retries": 2,
                              "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "items": [pod("iris-alice-rl-qwen8b-tb-0-1a2b3c-0")]})
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False, preemptions=2, max_retries=2, remaining=2),
                fired=["restarts.none"], evidence=[],
                description="Preempted and requeued twice: reported, and no retry burned.")


@incident
def model_from_engine_init_line(b_root):
    entry = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "--train_data", "['gsm8k']",
                                 "generator.enforce_eager=false", "--gpu", "H100"]})
    b = Bundle(b_root, job_id="/alice/rl-moe-gsm8k", entrypoint=entry, synced=at(155))
    lines = training_log(15, gen=2200.0)
    lines.insert(2, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3) INFO 08-01 12:00:40 [core.py:58] Initializing a V1 LLM "
                    "engine (v0.10.1.1) with config: model='Qwen/Qwen3-30B-A3B', speculative_config=None, "
                    "tokenizer='Qwen/Qwen3-30B-A3B', skip_tokenizer_init=False, tokenizer_mode=auto")
    b.lines("finelog.log", lines)
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_ok"],
                any_finding_contains=dict(resources="moe_30b_a3b on H100-80GB-SXM"), evidence=[],
                description="The launch names no model; the vLLM engine init line does (Qwen3-30B-A3B, ~3B active).")


@incident
def bring_up_stuck(b_root):
    b = Bundle(b_root, entrypoint=AGENTIC_EP, synced=at(235))
    b.lines("finelog.log", [
        loguru(at(0.5), "[rl-iris] MarinSkyRL now at 2bb70a88c1", where="cloud.iris.training_driver:main:88"),
        loguru(at(2), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"),
        loguru(at(9), "Resumed training from global_step 0"),
        phase(at(10), "Started", "step"), phase(at(10.1), "Started", "generate")])
    return dict(now=iso(at(240)), verdict="ERROR", mode="agentic", terminal=False, gates=dict(liveness="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["trainer.frozen_in_bring_up", "liveness.trainer_frozen"],
                evidence=[], description="Bring-up stuck: no trainer line for nearly 4 h before the first step (beyond the 3 h allowance).")


@incident
def frozen_without_step_cadence(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(120))
    b.lines("finelog.log", [loguru(at(0), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"),
                            step_progress(at(10), 1, 200), step_progress(at(20), 2, 200)])
    return dict(now=iso(at(125)), verdict="ERROR", mode="standard", terminal=False, gates=dict(liveness="FAIL"),
                restarts=dict(burned=0, same_failure=False),
                fired=["trainer.frozen_after_steps_no_cadence", "liveness.trainer_frozen"], evidence=[],
                description="Two steps without phase timers or metrics (no cadence measurable), then 100 minutes of silence.")


@incident
def terminal_chain_same_failure(b_root):
    b = Bundle(b_root, job_id="/alice/rl-bad-data", entrypoint=STANDARD_EP, state="failed", synced=at(100))
    crash = ["Traceback (most recent call last):",
             '  File "/app/skyrl_train/dataset.py", line 77, in __init__',
             "AssertionError: dataset size 0 < train_batch_size 256 (placeholder train data not applied)"]
    lines = []
    for start in (0, 30, 60):
        lines.append("task=/alice/rl-bad-data/0 | [iris setup] step 1/2")
        lines.append(loguru(at(start + 1), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"))
        lines += crash
    b.lines("finelog.log", lines)
    return dict(now=iso(at(105)), verdict="NO-KILL", mode="standard", terminal=True, gates=dict(liveness="FAIL"),
                restarts=dict(burned=3, same_failure=True), fired=["restarts.same_first_error_terminal", "restarts.same_failure"],
                evidence=[], first_error_contains="AssertionError: dataset size 0",
                description="A failed job whose three attempts all died on the same AssertionError: terminal, deterministic.")


def gpu_health_doc(*, ecc=0, remap_failure=False, xid=None):
    gpus = [{"gpu": g, "bus_id": f"00000000:{0x18 + g:02X}:00.0", "ecc_volatile_uncorrectable": ecc if g == 2 else 0,
             "ecc_volatile_correctable": 0, "ecc_aggregate_uncorrectable": ecc if g == 2 else 0, "ecc_aggregate_correctable": 3,
             "retired_pages_single_bit": 0, "retired_pages_double_bit": 0, "remapped_rows_correctable": 0,
             "remapped_rows_uncorrectable": 1 if remap_failure and g == 2 else 0, "retired_pages_pending": False,
             "remapped_rows_pending": False, "remapping_failure": remap_failure and g == 2,
             "evidence": ({"ecc_volatile_uncorrectable": [{"source": "nodes/gd92c00/gpu_health.txt", "line": 12 + 40 * g,
                                                           "text": f"DRAM Uncorrectable        : {ecc}"}]} if ecc and g == 2 else {})}
            for g in range(4)]
    xids = [{"source": "nodes/gd92c00/kernel.log", "line": 1, "pci": "0000:1a:00", "xid": xid,
             "text": f"2026-08-01T13:58:02,412345+00:00 NVRM: Xid (PCI:0000:1a:00): {xid}, pid=5120, name=python, "
                     "GPU has fallen off the bus."}] if xid else []
    return {"hosts": [{"host": "gd92c00", "source": "nodes/gd92c00/gpu_health.txt", "gpus": gpus,
                       "xid_source": "nodes/gd92c00/kernel.log", "xid": xids}]}


def healthy_live(b_root, health):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", training_log(15))
    b.capture(at(151), job_id="/alice/rl-qwen8b-gsm8k",
              state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                     "attempts": []},
              polls=polls({"policy": 87.0, "inference": 64.0}, start=at(150)),
              files={"gpu_health.json": json.dumps(health, indent=2, sort_keys=True),
                     "nodes/gd92c00/gpu_health.txt": nvidia_smi_health_text(health),
                     "nodes/gd92c00/kernel.log": "".join(x["text"] + "\n" for h in health["hosts"] for x in h["xid"])})
    return b


def nvidia_smi_health_text(health) -> str:
    """The `nvidia-smi -q -d ECC,...` text the health summary quotes (its quoted lines at their line numbers)."""
    lines = ["==============NVSMI LOG==============", ""] + ["    filler" for _ in range(200)]
    for h in health["hosts"]:
        for gpu in h["gpus"]:
            lines[40 * gpu["gpu"] + 2] = f"GPU {gpu['bus_id']}"
            for evs in gpu["evidence"].values():
                for e in evs:
                    lines[e["line"] - 1] = "                " + e["text"]
    return "\n".join(lines) + "\n"


@incident
def gpu_fallen_off_the_bus(b_root):
    healthy_live(b_root, gpu_health_doc(xid=79))
    return dict(now=iso(at(155)), verdict="KILL", mode="standard", terminal=False, gates=dict(resources="FAIL"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.gpu_fatal_xid"],
                evidence=[dict(gate="resources", contains="NVRM: Xid (PCI:0000:1a:00): 79")],
                description="A node's kernel log shows NVRM Xid 79 (GPU fallen off the bus) during a live probe.")


@incident
def gpu_uncorrectable_ecc(b_root):
    healthy_live(b_root, gpu_health_doc(ecc=2, remap_failure=True))
    return dict(now=iso(at(155)), verdict="KILL", mode="standard", terminal=False, gates=dict(resources="FAIL"),
                restarts=dict(burned=0, same_failure=False),
                fired=["resources.gpu_uncorrectable_ecc", "resources.gpu_remapping_failure"], evidence=[],
                description="nvidia-smi -q on a node shows uncorrectable volatile ECC errors and a row-remapping failure.")


@incident
def baseline_healthy_live_gpu_health(b_root):
    healthy_live(b_root, gpu_health_doc(xid=13))
    return dict(now=iso(at(155)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["liveness.progressing"], evidence=[],
                description="A healthy live probe: GPUs busy, ECC clean, one Xid 13 (an application fault, not hardware).")


def fr_capture(b: Bundle, stamp_time, dumps: dict[int, bytes], nodes: dict[int, str]) -> None:
    """A live capture holding the flight-recorder dumps as the probes store them
    (``flight_recorder/dumps/<node>/nccl_trace_rank_<r>``) and the summary the capture writes from them."""
    from rlhealth.probes import live

    files = {"flight_recorder/prefix.txt": "/tmp/nccl_trace_rank_\n"}
    files.update({f"flight_recorder/dumps/{nodes[r]}/nccl_trace_rank_{r}": data for r, data in dumps.items()})
    b.capture(stamp_time, job_id=json.loads((b.root / "manifest.json").read_text())["job_id"],
              state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                     "attempts": []},
              files=files)
    live.write_flight_recorder_summary(b.root / "rlhealth" / "captures" / stamp_time.strftime("%Y%m%dT%H%M%SZ"))


@incident
def flight_recorder_desync(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    fr_capture(b, at(200), _fr.job(4, done=4710, absent={3}), {r: "iris-alice-rl-qwen8b-gsm8k-0-5f2c1d-0" for r in range(4)})
    return dict(now=iso(at(205)), verdict="KILL", mode="standard", terminal=False, gates=dict(liveness="FAIL"),
                confidence="high", restarts=dict(burned=0, same_failure=False),
                fired=["liveness.wedge_live_flight_recorder", "job.live_evidence_flight_recorder"], evidence=[],
                finding_contains=dict(liveness="suspected rank(s): 3 (never enqueued nccl:all_reduce seq 4711"),
                flight_recorder_suspected=[3],
                description="A frozen trainer whose flight-recorder dumps show ranks 0-2 in all_reduce seq 4711 and rank 3, "
                            "a member of the group, never enqueued it.")


FR_NODES = {r: ("gpu-node-a" if r < 8 else "gpu-node-b") for r in range(16)}


@incident
def flight_recorder_gpu_and_host_stall(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    fr_capture(b, at(200), _fr.job(16, done=40, lagging={5}, absent={11}), FR_NODES)
    return dict(now=iso(at(205)), verdict="KILL", mode="standard", terminal=False, gates=dict(liveness="FAIL"),
                confidence="high", restarts=dict(burned=0, same_failure=False),
                fired=["liveness.wedge_live_flight_recorder", "job.live_evidence_flight_recorder"], evidence=[],
                finding_contains=dict(liveness="suspected rank(s): 5 (enqueued nccl:all_reduce seq 41 of process group "
                                               "0:default_pg, never started it); 11 (never enqueued nccl:all_reduce seq 41"),
                next_action_contains="inspect the suspected rank(s) first on gpu-node-a (rank 5); gpu-node-b (rank 11)",
                flight_recorder_suspected=[5, 11],
                description="16 ranks on two nodes stuck in all_reduce seq 41: rank 5 enqueued it but its GPU work never "
                            "started (a GPU fault), rank 11 never enqueued it (a host-side stall holding the GIL); "
                            "exactly those two ranks and their nodes are named.")


@incident
def flight_recorder_no_suspect(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(150))
    b.lines("finelog.log", frozen_training(8, engines_after=False, engines=1))
    fr_capture(b, at(200), _fr.job(16, done=40), FR_NODES)
    return dict(now=iso(at(205)), verdict="ERROR", mode="standard", terminal=False, gates=dict(liveness="FAIL"),
                restarts=dict(burned=0, same_failure=False),
                fired=["job.live_evidence_flight_recorder", "liveness.trainer_frozen"], evidence=[],
                not_fired=["liveness.wedge_live_flight_recorder"],
                flight_recorder_suspected=[],
                description="16 ranks all started all_reduce seq 41 and wait in it: no member is absent or lagging, so the "
                            "dumps name no rank and prove no desync.")


# ----------------------------------------------------------------------------------------------- engines present
def engines_ep(n: int) -> str:
    """The agentic launch with ``n`` configured inference engines."""
    return AGENTIC_EP.replace('"generator.num_inference_engines=2"', f'"generator.num_inference_engines={n}"')


def engines_job_json(n: int) -> dict:
    """A probe's job.json whose resolved configuration configures ``n`` engines (one key a line)."""
    info = job_json(engines=n)
    info["resolved_config"] = {"generator": {"enforce_eager": False, "max_num_seqs": 128, "num_inference_engines": n},
                               "terminal_bench_config": {"n_concurrent_trials": 256,
                                                         "trials_dir": "s3://marin-us-east-02a/tmp/ttl=14d/rl-qwen8b-tb/trace_jobs"},
                               "trainer": {"policy": {"model": {"path": "Qwen/Qwen3-8B"}}}}
    return info


def engine_pods(ips: dict[str, str]) -> dict:
    items = []
    for name, ip in ips.items():
        p = pod(name)
        p["status"]["podIP"] = ip
        items.append(p)
    return {"items": items}


@incident
def engine_missing(b_root):
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125))
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=3))
    b.capture(at(125), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0))}]},
              job=engines_job_json(4),
              pods=engine_pods({"iris-alice-rl-qwen8b-tb-0-1a2b3c-0": "10.1.2.2", "iris-alice-rl-qwen8b-tb-1-9f8e7d-0": "10.1.2.3"}))
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_missing", "verdict.kill_hard_failure"],
                finding_contains=dict(resources="3 of 4 configured engine(s) print stats"),
                evidence=[dict(gate="resources", contains='"num_inference_engines": 4')],
                description="num_inference_engines=4 in the resolved configuration, but only three engines print stats through 12 steps: "
                            "one configured engine never came up (RESOURCES FAIL quoting the configuration line, naming the engines seen).")


ACTOR_PREFIX_RE = re.compile(r"^\(AsyncVLLMInferenceEngine pid=\d+, ip=[0-9.]+\) ")


def indexed_engines(b_root, engines):
    """One process serving several data-parallel engines: stats lines without a Ray actor prefix,
    each engine named only by its ``Engine NNN`` index."""
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125))
    b.lines("finelog.log", [ACTOR_PREFIX_RE.sub("", line) for line in training_log(12, stats_era="v1", engines=engines)])
    b.capture(at(125), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0))}]},
              job=engines_job_json(4),
              pods=engine_pods({"iris-alice-rl-qwen8b-tb-0-1a2b3c-0": "10.1.2.2", "iris-alice-rl-qwen8b-tb-1-9f8e7d-0": "10.1.2.3"}))
    healthy_trials(b)


@incident
def engine_missing_by_index(b_root):
    indexed_engines(b_root, 3)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_missing", "verdict.kill_hard_failure"],
                finding_contains=dict(resources="3 of 4 configured engine(s) print stats"),
                evidence=[dict(gate="resources", contains='"num_inference_engines": 4')],
                description="Four engines configured; the stats lines carry no process prefix, only Engine 000-002: the index tells "
                            "the engines apart, so the missing fourth is RESOURCES FAIL (not 'engine count not judged').")


@incident
def engines_present_by_index(b_root):
    indexed_engines(b_root, 4)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engines_generating"], evidence=[],
                description="The same prefix-less stats lines from Engine 000-003: every configured engine accounted for.")


ENGINE_PODS = {f"iris-alice-rl-qwen8b-tb-{e + 1}-5c6d7e-0": f"10.1.2.{e + 2}" for e in range(4)}
POLICY_POD = "iris-alice-rl-qwen8b-tb-0-1a2b3c-0"


def engines_on_pods(b_root, *, idle=None, unlogged=None):
    """Four engines (TP 2), one per pod, each logging to its own pod log with its Ray actor prefix;
    a live capture polls every GPU. Engine ``idle`` prints stats with nothing running and its GPUs
    sit at 0% with the weights resident; engine ``unlogged`` computes but its pod log was not
    captured. Engines 0 and 3 are matched to their GPUs by pid (the engine actor is the GPU's
    compute process), engines 1 and 2 by host (the GPUs run a TP worker of another pid)."""
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125))
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=0))
    for e, (name, ip) in enumerate(ENGINE_PODS.items()):
        if e == unlogged:
            continue
        gen, running = (0.0, 0) if e == idle else (2310.7, 48)
        b.lines(f"pod_logs/{name}.log", [vllm_stats(at((s - 1) * 10 + 3 + k), "v1", gen, running, 0, engine=0, pid=2871 + e, ip=ip)
                                         for s in range(1, 13) for k in range(3)])
    rows = []
    for k in range(3):
        t = iso(at(121 + 0.5 * k))
        for g in range(4):
            rows.append({"t": t, "host": POLICY_POD, "gpu": g, "util_pct": 91.0, "mem_used_mib": 70371, "mem_total_mib": 81559,
                         "power_w": 610.5, "dram_active": None, "role": "policy", "processes": ["4410 ray::FSDPPolicyWorker"]})
        for e, name in enumerate(ENGINE_PODS):
            proc = f"{2871 + e} ray::AsyncVLLMInferenceEngine" if e in (0, 3) else f"{5120 + e} ray::RayWorkerWrapper"
            for g in range(2):
                util = 0.0 if e == idle else 86.0
                rows.append({"t": t, "host": name, "gpu": g, "util_pct": util, "mem_used_mib": 70371, "mem_total_mib": 81559,
                             "power_w": 120.0 if util == 0 else 590.0, "dram_active": None, "role": "inference", "processes": [proc]})
    b.capture(at(125), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0))}]},
              job=engines_job_json(4), polls=rows, pods=engine_pods({POLICY_POD: "10.1.2.1", **ENGINE_PODS}))
    healthy_trials(b)
    return b


@incident
def engine_gpus_idle_resident(b_root):
    engines_on_pods(b_root, idle=3)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_gpus_idle", "verdict.kill_hard_failure"],
                not_fired=["resources.engine_missing", "resources.engine_silent"],
                finding_contains=dict(resources="engine AsyncVLLMInferenceEngine pid=2874, ip=10.1.2.5 idle"),
                evidence=[dict(gate="resources", contains='"host": "iris-alice-rl-qwen8b-tb-4-5c6d7e-0", "gpu": 0, "role": "inference", "util_pct": 0.0')],
                description="Four engines on four pods, all printing stats; engine pid 2874 runs nothing and its two GPUs sit at 0% "
                            "with 70 GB resident across three live polls while the other three engines' GPUs compute: matched to "
                            "its GPUs by its pid among their compute processes, it is RESOURCES FAIL by name (the median "
                            "throughput over engines alone passes).")


@incident
def engine_gpus_all_busy(b_root):
    engines_on_pods(b_root)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engines_generating"],
                not_fired=["resources.engine_gpus_idle", "resources.engine_unlogged_computing"], evidence=[],
                description="The same four engines with every engine's GPUs computing in the live polls: every engine accounted for.")


@incident
def engine_unlogged_gpus_busy(b_root):
    engines_on_pods(b_root, unlogged=2)
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="ERROR", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_unlogged_computing"],
                not_fired=["resources.engine_missing"],
                finding_contains=dict(resources="inference GPUs on iris-alice-rl-qwen8b-tb-3-5c6d7e-0"),
                description="Four engines configured, three in the logs read: the fourth pod's log was not captured, yet its "
                            "GPUs compute in the live polls. The engine is alive and its logs are missing: ERROR (capture its "
                            "logs), not a missing engine.")


@incident
def engine_silent(b_root):
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125))
    silent_after = {at((s - 1) * 10 + 3).strftime("%m-%d %H:%M:%S") for s in range(6, 13)}
    lines = [line for line in training_log(12, stats_era="v1", engines=4)
             if not ("pid=2874," in line and any(stamp in line for stamp in silent_after))]
    b.lines("finelog.log", lines)
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_silent", "verdict.kill_hard_failure"],
                finding_contains=dict(resources="engine AsyncVLLMInferenceEngine pid=2874, ip=10.1.2.3 silent"),
                evidence=[dict(gate="resources", contains="(AsyncVLLMInferenceEngine pid=2874, ip=10.1.2.3) INFO 08-01 12:43:00")],
                description="Four engines configured and present; engine pid 2874 prints its last stats line at step 5 while the other "
                            "three keep generating through step 12 (RESOURCES FAIL quoting that engine's last line).")


@incident
def engine_logs_not_captured(b_root):
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125))
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=0))
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="ERROR", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_logs_not_captured", "verdict.error"],
                finding_contains=dict(resources="the engines' logs were not captured"),
                evidence=[dict(gate="resources", contains="generator.num_inference_engines=4")],
                description="12 steps with four engines configured, but no log read holds a vLLM stats line (the engine actors' "
                            "output was not forwarded to the finelog and no Ray/vLLM logs were synced): ERROR naming what is missing.")


@incident
def engines_present_across_files(b_root):
    """Four engines: two actors local to the driver pod (Ray prefixes them without an ip) and two on the
    worker pod (prefix with ip). The finelog holds all four; the driver pod's log repeats the local
    ones; the worker pod's Ray worker files hold the remote ones without any prefix."""
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125))
    driver, worker = "iris-alice-rl-qwen8b-tb-0-1a2b3c-0", "iris-alice-rl-qwen8b-tb-1-9f8e7d-0"
    lines = training_log(12, stats_era="v1", engines=0)
    stats_by_engine = {pid: [] for pid in (3101, 3102, 2871, 2872)}
    for s in range(1, 13):
        t = at((s - 1) * 10 + 3)
        for pid in (3101, 3102):
            stats_by_engine[pid].append(vllm_stats(t, "v1", 2290.0, 46, 0, pid=pid).replace(", ip=10.1.2.3", ""))
        for pid in (2871, 2872):
            stats_by_engine[pid].append(vllm_stats(t, "v1", 2330.0, 50, 0, pid=pid, ip="10.1.2.4"))
    merged = []
    for line in lines:
        merged.append(line)
        if "Started: 'generate'" in line:
            step = sum(1 for m in merged if "Started: 'generate'" in m)
            merged += [stats_by_engine[pid][step - 1] for pid in (3101, 3102, 2871, 2872)]
    b.lines("finelog.log", merged)
    b.lines(f"pod_logs/{driver}.log", [stats_by_engine[pid][k] for k in range(8, 12) for pid in (3101, 3102)])
    for pid, wid in ((2871, "3f9a0c11"), (2872, "8be1d402")):
        b.lines(f"ray_vllm_logs/{worker}/worker-{wid}-01000000-{pid}.out", [line.split(") ", 1)[1] for line in stats_by_engine[pid]])
    b.capture(at(125), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                              "attempts": [{"attempt": 0, "state": "running", "started_at": iso(at(0))}]},
              pods=engine_pods({driver: "10.1.2.3", worker: "10.1.2.4"}))
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engines_generating", "verdict.no_kill"],
                finding_contains=dict(resources="4 engine(s) generating"),
                evidence=[],
                description="Healthy: four configured engines, each seen in two files (finelog + driver pod log, or finelog + "
                            "the worker pod's Ray worker file); one identity per engine, so four engines, not eight.")


@incident
def engines_bring_up_young(b_root):
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(20))
    b.lines("finelog.log", [
        loguru(at(0.5), "[rl-iris] MarinSkyRL now at 2bb70a88c1", where="cloud.iris.training_driver:main:88"),
        loguru(at(2), "Ray nodes alive: 2/2", where="cloud.iris.training_driver:main:120"),
        "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3) INFO 08-01 12:04:10 [core.py:93] Initializing a V1 LLM engine (v0.11.0) with "
        "config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B', enforce_eager=False",
        loguru(at(9), "Resumed training from global_step 0"),
        phase(at(10), "Started", "step")])
    return dict(now=iso(at(22)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), confidence="medium",
                fired=["liveness.bring_up", "resources.engines_bring_up", "confidence.no_kill_young"],
                finding_contains=dict(resources="bring-up: 0 of 4 configured engine(s) reporting stats so far"),
                evidence=[],
                description="20 minutes into bring-up: four engines configured, none printing stats yet (weights loading); "
                            "a young run is not missing engines.")


WORKER_POD = "iris-alice-rl-qwen8b-tb-1-9f8e7d-0"
BUNDLE_DIR = "/Users/alice/Documents/iris-job-bundles/jobs/cw-us-east-02a"


def ray_sync_error(pod: str, job: str = "alice/rl-qwen8b-tb") -> str:
    """The watcher's artifacts.errors entry for a failed Ray/vLLM transfer (watch_coreweave_rl.py
    sync_pod_and_ray_logs around coreweave_ops.save_ray_logs)."""
    return (f"{pod} Ray/vLLM: Could not archive Ray/vLLM logs (exit=1; diagnostics saved to "
            f"{BUNDLE_DIR}/{job}/ray_vllm_logs/{pod}/ray-vllm-sync-error.txt)")


PROXY_502 = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>502 Bad Gateway</title>"
             "<style>body{font-family:sans-serif}</style></head>\n<body><h1>Bad Gateway</h1><p>The proxy could not reach "
             "the upstream exec endpoint.</p><script>window.location.reload()</script></body></html>\n")


@incident
def engine_logs_sync_failed(b_root):
    pod_name = "iris-alice-rl-qwen8b-gsm8k-0-7c4d2e-0"
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125),
               extra_manifest={"artifacts": {"finelog": "12,345 lines", "pod_logs": "1 pod(s), 1 Running", "ray_logs": "0 files",
                                             "errors": [ray_sync_error(pod_name, "alice/rl-qwen8b-gsm8k")]}})
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=0))
    b.write(f"ray_vllm_logs/{pod_name}/ray-vllm-sync-error.txt", PROXY_502)
    return dict(now=iso(at(130)), verdict="ERROR", mode="standard", terminal=False,
                gates=dict(liveness="ERROR", resources="ERROR", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engine_logs_sync_failed", "verdict.error"],
                not_fired=["resources.no_engine_stats"],
                finding_contains=dict(resources='engine logs not captured: the Ray/vLLM log transfer of pod '
                                                f'{pod_name} failed: HTML error page (HTTP 502: "502 Bad Gateway")'),
                next_action_contains="re-run the watcher's full sync for this job while its pods are Running",
                report_not_contains=["<html", "<title>", "<!DOCTYPE", "window.location"],
                evidence=[],
                description="A standard run stepping, no vLLM stats line in the finelog, and the watcher's Ray/vLLM log "
                            "transfer failed on a proxy's 502 page: RESOURCES ERROR 'engine logs not captured' with the "
                            "fix, not PASS 'no vLLM stats lines'; the HTML body is summarised, never printed.")


@incident
def engine_logs_synced_no_stats(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(125),
               extra_manifest={"artifacts": {"finelog": "12,345 lines", "pod_logs": "1 pod(s), 1 Running",
                                             "ray_logs": "14 files", "errors": []}})
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=0))
    b.lines("ray_vllm_logs/iris-alice-rl-qwen8b-gsm8k-0-7c4d2e-0/raylet.out", [
        "[2026-08-01 12:00:01,000 I 412 412] (raylet) main.cc:212: Setting cluster ID to: 9c1f"])
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.no_engine_stats"],
                not_fired=["resources.engine_logs_sync_failed"],
                finding_contains=dict(resources="no vLLM stats lines in the evidence"),
                evidence=[],
                description="The healthy counterpart: the same standard run with its Ray/vLLM logs synced and no stats line "
                            "in them: the missing-stats PASS stands.")


@incident
def engines_missing_ray_logs_unsynced(b_root):
    """Two of four engines print stats in the driver pod's log; the worker pod's Ray/vLLM logs, where
    the other two log, failed to sync: their absence is missing evidence, not a missing engine."""
    driver = "iris-alice-rl-qwen8b-tb-0-1a2b3c-0"
    b = Bundle(b_root, entrypoint=engines_ep(4), synced=at(125),
               extra_manifest={"artifacts": {"finelog": "12,345 lines", "errors": [ray_sync_error(WORKER_POD)]}})
    b.write(f"ray_vllm_logs/{WORKER_POD}/ray-vllm-sync-error.txt", "tar stream failed: context deadline exceeded\n")
    b.lines("finelog.log", training_log(12, stats_era="v1", engines=0))
    b.lines(f"pod_logs/{driver}.log", [vllm_stats(at((s - 1) * 10 + 3), "v1", 2290.0, 46, 0, pid=pid).replace(", ip=10.1.2.3", "")
                                       for s in range(1, 13) for pid in (3101, 3102)])
    healthy_trials(b)
    return dict(now=iso(at(130)), verdict="ERROR", mode="agentic", terminal=False,
                gates=dict(liveness="ERROR", resources="ERROR", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.engines_missing_logs_incomplete", "verdict.error"],
                finding_contains=dict(resources="2 of 4 configured engine(s) reporting stats"),
                evidence=[dict(gate="resources", contains="generator.num_inference_engines=4")],
                description="Two of four configured engines seen; the Ray/vLLM logs of the worker pod failed to sync, so the "
                            "other two cannot be judged missing: RESOURCES ERROR naming the failed sync.")


# ----------------------------------------------------------------------- GPU type and agent stop reasons
def gpu_pod(node_selector: dict | None = None) -> dict:
    """A task pod of the standard job, optionally pinned to a GPU product by its nodeSelector."""
    p = pod("iris-alice-rl-qwen8b-gsm8k-0-7c4d2e-0")
    p["metadata"]["labels"] = {"iris.job_id": "alice.rl-qwen8b-gsm8k"}
    if node_selector:
        p["spec"]["nodeSelector"] = node_selector
    return p


def gpu_evidence_run(b_root, gen: float, *, selector: dict | None = None, inventory: str | None = None):
    """A standard run whose launch names no GPU; the GPU type comes only from the capture's
    node labels (pods.json nodeSelector) and/or the raw nvidia-smi inventory."""
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=UNKNOWN_GPU_EP, synced=at(155))
    b.lines("finelog.log", training_log(15, gen=gen))
    files = {"raw/exec/iris-alice-rl-qwen8b-gsm8k-0-7c4d2e-0/nvidia-smi.inventory.csv": inventory} if inventory else {}
    b.capture(at(156), job_id="/alice/rl-qwen8b-gsm8k",
              state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0, "max_retries": 1,
                     "attempts": []},
              pods={"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [gpu_pod(selector)]}, files=files)
    return b


def inventory_csv(name: str, n: int = 8) -> str:
    return "".join(f"{i}, GPU-{i:08x}-aaaa-bbbb-cccc-0123456789ab, {name}\n" for i in range(n))


@incident
def gpu_from_node_labels_floored(b_root):
    gpu_evidence_run(b_root, 600.0, selector={"nvidia.com/gpu.product": "NVIDIA-H200"})
    return dict(now=iso(at(160)), verdict="KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="FAIL", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_floor"],
                finding_contains=dict(resources="dense_7_8b on H200-141GB"),
                evidence=[dict(gate="resources", contains="Avg generation throughput: 600.0 tokens/s")],
                description="The GPU type is only in the pods' node label (nvidia.com/gpu.product=NVIDIA-H200): 600 tok/s per "
                            "engine is below the H200 floor (~716), though it would clear the unknown-GPU floor (~232).")


@incident
def gpu_from_nvidia_smi_log(b_root):
    b = Bundle(b_root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=UNKNOWN_GPU_EP, synced=at(155))
    b.lines("finelog.log", training_log(15))
    b.lines("pod_logs/iris-alice-rl-qwen8b-gsm8k-0-7c4d2e-0.log", [
        "+-----------------------------------------------------------------------------------------+",
        "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
        "|-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "|=========================================+========================+======================|",
        "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |",
        "| N/A   31C    P0             70W /  700W |       1MiB /  81559MiB |      0%      Default |",
        "|   1  NVIDIA H100 80GB HBM3          On  |   00000000:2A:00.0 Off |                    0 |"])
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_ok"],
                any_finding_contains=dict(resources="dense_7_8b on H100-80GB-SXM"), evidence=[],
                description="The GPU type is only in nvidia-smi's table printed into a pod log (NVIDIA H100 80GB HBM3): "
                            "throughput judged against the H100 row, no assumption.")


@incident
def gpu_sources_disagree_floor(b_root):
    gpu_evidence_run(b_root, 420.0, selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                     inventory=inventory_csv("NVIDIA A100-SXM4-80GB"))
    return dict(now=iso(at(160)), verdict="ERROR", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="ERROR", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.gpu_type_disagreement"],
                finding_contains=dict(resources="GPU sources disagree"), evidence=[],
                description="nvidia-smi says A100-SXM4-80GB, the node label says H100: 420 tok/s clears the A100 floor "
                            "(~304) but not the H100 floor (500), so the gate depends on which is right: ERROR.")


@incident
def gpu_sources_disagree_healthy(b_root):
    gpu_evidence_run(b_root, 2310.7, selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                     inventory=inventory_csv("NVIDIA A100-SXM4-80GB"))
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["resources.throughput_ok"],
                any_finding_contains=dict(resources="GPU sources disagree"), evidence=[],
                description="The same disagreement with 2310 tok/s per engine: above the floor on either GPU, "
                            "so it does not change the gate; it is stated.")



@incident
def given_model_contradicts_launch(b_root):
    expected = baseline_healthy_agentic(b_root)
    return dict(expected, given={"model": {"name": "Qwen/Qwen3-30B-A3B"}},
                fired=["identity.given_model_class_contradicts", "verdict.no_kill"],
                not_fired=["identity.given_model_size_contradicts", "identity.given_gpu_contradicts"],
                reasoning_contains="The given --model Qwen/Qwen3-30B-A3B (MoE, 30.0B total / 3.0B active) contradicts the evidence",
                description="The dispatcher passes --model Qwen/Qwen3-30B-A3B (an MoE) while the launch configuration runs the dense "
                            "Qwen/Qwen3-8B: judged on the observed model (the verdict is the healthy baseline's), and the "
                            "contradiction is stated in REASONING and the identity block, not silently ignored.")


@incident
def given_model_size_contradicts_launch(b_root):
    expected = baseline_healthy_agentic(b_root)
    return dict(expected, given={"model": {"name": "Qwen/Qwen3-32B"}},
                fired=["identity.given_model_size_contradicts", "verdict.no_kill"],
                not_fired=["identity.given_model_class_contradicts", "identity.given_gpu_contradicts"],
                reasoning_contains="The given --model Qwen/Qwen3-32B (32.0B active) contradicts the evidence",
                description="The dispatcher passes --model Qwen/Qwen3-32B while the launch configuration runs the dense "
                            "Qwen/Qwen3-8B (both dense, 4x apart): judged on the observed model, the contradiction stated.")


@incident
def given_model_matches_launch(b_root):
    moe_steps_run(b_root, salad_from_minute=None)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS"),
                restarts=dict(burned=0, same_failure=False), given={"model": {"name": "Qwen/Qwen3-30B-A3B"}, "gpu": "H100"},
                fired=["rollouts.learning"], evidence=[],
                not_fired=["identity.given_model_class_contradicts", "identity.given_model_size_contradicts",
                           "identity.given_gpu_contradicts"],
                description="The MoE run (Qwen/Qwen3-30B-A3B, 2 engines x EP 4) dispatched with the matching --model and --gpu: "
                            "the identity names MoE 30B total / 3B active, no contradiction.")


@incident
def given_gpu_contradicts_nvidia_smi(b_root):
    gpu_evidence_run(b_root, 2310.7, inventory=inventory_csv("NVIDIA H100 80GB HBM3"))
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), given={"gpu": "H200"},
                fired=["identity.given_gpu_contradicts", "resources.throughput_ok"], evidence=[],
                reasoning_contains="The given --gpu H200 (H200-141GB) contradicts the evidence",
                description="The dispatcher passes --gpu H200 while the capture's nvidia-smi inventory shows NVIDIA H100 80GB HBM3: "
                            "the throughput floor uses the observed H100, and the contradiction is stated.")


@incident
def given_gpu_matches_nvidia_smi(b_root):
    gpu_evidence_run(b_root, 2310.7, inventory=inventory_csv("NVIDIA H100 80GB HBM3"))
    return dict(now=iso(at(160)), verdict="NO-KILL", mode="standard", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), given={"gpu": "H100", "model": {"name": "Qwen/Qwen3-8B"}},
                fired=["resources.throughput_ok"], evidence=[],
                not_fired=["identity.given_gpu_contradicts", "identity.given_model_class_contradicts",
                           "identity.given_model_size_contradicts"],
                description="The same capture dispatched with --gpu H100 and --model Qwen/Qwen3-8B, as observed: no contradiction.")

def stop_trial(b: Bundle, name: str, reward: float, start, *, stop_reason: str | None, exception: str | None = None,
               turns: int = 12):
    """A finished trial whose agent metadata records why the agent stopped (``stop_reason``; None: no field)."""
    b.trial(name, reward, start, exception=exception, turns=turns, agent=[COHERENT, COHERENT])
    if stop_reason is not None:
        doc = result_json(name, reward, start, exception, turns)
        doc["agent_result"]["metadata"]["stop_reason"] = stop_reason
        b.write(f"trace_jobs/{name}/result.json", json.dumps(doc, indent=2))


@incident
def agent_stop_reason_context_storm(b_root):
    b = agentic_running(b_root)
    for i in range(20):
        start = at(5 + i * 4)
        if i < 3:
            stop_trial(b, f"task-{i:03d}__S{i:06d}", 1.0 if i < 2 else 0.0, start, stop_reason="agent_finished")
        elif i < 13:
            stop_trial(b, f"task-{i:03d}__S{i:06d}", 0.0, start, stop_reason="context_length_exceeded",
                       exception="ContextLengthExceededError", turns=31)
        else:
            stop_trial(b, f"task-{i:03d}__S{i:06d}", 0.0, start, stop_reason=None, exception="ContextLengthExceededError",
                       turns=29)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.abnormal_stop_reason", "trials.abnormal_stop_reason"],
                finding_contains=dict(rollouts="context_length_exceeded ends 17/20 finished trials"),
                evidence=[dict(gate="rollouts", contains="context_length_exceeded ends 17/20")],
                description="A context-overflow storm: 17 of 20 finished trials stop at the context limit (10 say so in "
                            "agent_result.metadata.stop_reason, 7 only by ContextLengthExceededError), 2 score: raise the context.")


@incident
def agent_stop_reasons_healthy_mix(b_root):
    b = agentic_running(b_root)
    reasons = ["agent_finished"] * 14 + ["max_turns"] * 5 + ["context_length_exceeded"] * 3 + ["timeout"] * 2
    for i, reason in enumerate(reasons):
        exception = {"context_length_exceeded": "ContextLengthExceededError", "timeout": "AgentTimeoutError"}.get(reason)
        stop_trial(b, f"task-{i:03d}__M{i:06d}", 1.0 if reason == "agent_finished" and i % 2 == 0 else 0.0, at(5 + i * 4),
                   stop_reason=reason, exception=exception, turns=40 if reason == "max_turns" else 11)
    return dict(now=iso(at(130)), verdict="NO-KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="PASS", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.learning"], evidence=[],
                description="A healthy mix of stop reasons: agents finish 14 of 24 trials; max turns, context limit and "
                            "timeouts end the rest (none near the dominant share): no stop-reason finding.")



@incident
def agent_stop_reason_max_turns(b_root):
    b = agentic_running(b_root)
    for i in range(16):
        stop_trial(b, f"task-{i:03d}__X{i:06d}", 1.0 if i == 0 else 0.0, at(5 + i * 4),
                   stop_reason="agent_finished" if i < 2 else "max_turns_reached", turns=8)
    return dict(now=iso(at(130)), verdict="KILL", mode="agentic", terminal=False,
                gates=dict(liveness="PASS", resources="PASS", rollouts="FAIL", dynamics="PASS"),
                restarts=dict(burned=0, same_failure=False), fired=["rollouts.abnormal_stop_reason"],
                finding_contains=dict(rollouts="agent stop reason max_turns ends 14/16"),
                description="14 of 16 finished trials stop at the agent's turn limit (stop_reason max_turns_reached, "
                            "8 turns each): raise max turns or find why the agent never finishes.")


def build(names=None, root: Path = HERE) -> list[str]:
    """Write the incidents (bundle + expected.yaml) under ``root`` (default: this directory)."""
    built = []
    for name, fn in INCIDENTS.items():
        if names and name not in names:
            continue
        inc_id = f"2026-08-01_{'jsc-jupiter' if 'jupiter' in name or 'slurm' in name else 'cw-us-east-02a'}_{name.replace('_', '-')}"
        d = root / inc_id
        if (d / "bundle").exists():
            shutil.rmtree(d / "bundle")
        expected = fn(d / "bundle")
        expected = {"id": inc_id, **expected}
        (d / "expected.yaml").write_text(yaml.safe_dump(expected, sort_keys=False, width=120, allow_unicode=True))
        built.append(inc_id)
    return built


EXAMPLES = {"colocated-wedge": "2026-08-01_cw-us-east-02a_colocated-wedge-nccl-watchdog",
            "healthy-agentic": "2026-08-01_cw-us-east-02a_baseline-healthy-agentic"}


def copy_examples() -> None:
    """The package ships a few incidents as examples (rlhealth examples --path NAME)."""
    dest_root = HERE.parent.parent / "rlhealth" / "examples"
    for name, inc_id in EXAMPLES.items():
        dest = dest_root / name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(HERE / inc_id / "bundle", dest, symlinks=True)


if __name__ == "__main__":
    print("\n".join(build(sys.argv[1:] or None)))
    copy_examples()
