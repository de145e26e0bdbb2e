"""Incidents served by the fake API server: one Iris RL job on CoreWeave, as its pods,
logs, events and in-pod command outputs would look (formats: marin-artifacts §4.3,
log-formats §1.2, §4, §5, §8.1). All times are relative to ``NOW``.
"""
from __future__ import annotations

import hashlib
import pickle
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from fake_apiserver import ExecResult, Fault, Incident

NOW = datetime(2026, 8, 1, 14, 30, 0, tzinfo=timezone.utc)
NOW_ISO = "2026-08-01T14:30:00Z"
JOB_ID = "/alice/rl-qwen8b-tb"
USER, JOB = "alice", "rl-qwen8b-tb"
CLUSTER = "cw-us-east-02a"
PG_PREFIX = "iris-pg-" + hashlib.sha256(JOB_ID.encode()).hexdigest()[:16] + "-"
H100_TOTAL = 81559


def iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_name(rank: int, gen: int = 0, job: str = JOB, user: str = USER) -> str:
    return f"iris-{user}-{job}-{rank}-7f9c2d{rank}-{gen}"


def make_pod(rank: int, gen: int = 0, *, phase: str = "Running", restart_count: int = 0,
             last_terminated: dict | None = None, job: str = JOB, user: str = USER,
             labels: bool = True, gpus: int = 4, started: datetime | None = None,
             terminated: dict | None = None) -> dict:
    name = pod_name(rank, gen, job, user)
    job_id = f"/{user}/{job}"
    lab = {"app.kubernetes.io/managed-by": "iris"}
    if labels:
        lab["iris.job_id"] = f"{user}.{job}"
        lab["kueue.x-k8s.io/pod-group-name"] = ("iris-pg-" + hashlib.sha256(job_id.encode()).hexdigest()[:16]
                                                + f"-{gen}")
    started = started or NOW - timedelta(hours=2)
    if terminated:
        state = {"terminated": terminated}
    elif phase == "Running":
        state = {"running": {"startedAt": iso(started)}}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    cs = {"name": "task", "ready": phase == "Running", "restartCount": restart_count, "started": phase == "Running",
          "image": "ghcr.io/marin-community/rl:latest", "imageID": "", "containerID": f"containerd://{rank}{gen}abc",
          "state": state, "lastState": {"terminated": last_terminated} if last_terminated else {}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "iris", "uid": f"uid-{name}", "labels": lab,
                     "creationTimestamp": iso(NOW - timedelta(hours=2, minutes=5)), "resourceVersion": "1"},
        "spec": {"nodeName": f"gd92c{rank}{gen}", "restartPolicy": "OnFailure",
                 "containers": [{"name": "task", "image": "ghcr.io/marin-community/rl:latest",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                                 "env": [{"name": "IRIS_TASK_ID", "value": f"{job_id}/{rank}"}]}]},
        "status": {"phase": phase, "hostIP": f"10.0.0.{rank + 10}", "podIP": f"10.1.0.{rank + 10}",
                   "startTime": iso(NOW - timedelta(hours=2)), "containerStatuses": [cs]},
    }


# --------------------------------------------------------------------------- in-pod state

@dataclass
class Gpu:
    index: int
    role: str                 # "policy" | "inference" | "idle"
    pid: int | None
    util: list[float]         # per poll; the last value repeats
    mem: int
    power: list[float]

    @property
    def uuid(self) -> str:
        return f"GPU-{self.index:02d}{self.pid or 0:06d}-aaaa-bbbb-cccc-{self.index:012d}"


@dataclass
class PodState:
    gpus: list[Gpu]
    procs: dict[int, str]                         # pid -> args (ps)
    stacks: dict[int, str] = field(default_factory=dict)
    ray_files: dict[str, str] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)   # command names that hang ("nvidia-smi-query", "ps", ...)
    files: dict[str, bytes] = field(default_factory=dict)     # absolute path -> content (cat/head/ls)
    environ: dict[int, dict[str, str]] = field(default_factory=dict)  # pid -> environment
    health: str = ""                                          # nvidia-smi -q output ("" = healthy GPUs)
    kernel_log: str = ""                                      # dmesg output


POLICY_ARGS = "ray::FSDPPolicyWorker.ppo_train"
ENGINE_ARGS = "ray::AsyncVLLMInferenceEngine.generate"
DRIVER_ARGS = "ray::skyrl_entrypoint"

STACK_TRAINING = """Process {pid}: {args}
Python v3.11.7 (/opt/openthoughts/envs/rl/bin/python3.11)

Thread {pid} (active): "MainThread"
    _conv_forward (torch/nn/modules/conv.py:456)
    forward (transformers/models/qwen3/modeling_qwen3.py:301)
    training_step (skyrl_train/workers/worker.py:612)
    ppo_train (skyrl_train/workers/worker.py:688)
"""
STACK_NCCL_WAIT = """Process {pid}: {args}
Python v3.11.7 (/opt/openthoughts/envs/rl/bin/python3.11)

Thread {pid} (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    _reduce_grads (torch/distributed/fsdp/_runtime_utils.py:803)
    backward (torch/_tensor.py:626)
    training_step (skyrl_train/workers/worker.py:640)
    ppo_train (skyrl_train/workers/worker.py:688)
"""
STACK_ENGINE = """Process {pid}: {args}
Python v3.11.7 (/opt/openthoughts/envs/rl/bin/python3.11)

Thread {pid} (active): "MainThread"
    step (vllm/v1/engine/core.py:241)
    run_busy_loop (vllm/v1/engine/core.py:612)
"""
STACK_DRIVER = """Process {pid}: {args}
Python v3.11.7 (/opt/openthoughts/envs/rl/bin/python3.11)

Thread {pid} (idle): "MainThread"
    get_objects (ray/_private/worker.py:871)
    get (ray/_private/worker.py:2771)
    train (skyrl_train/trainer.py:402)
"""


def pod_state(rank: int, *, policy_util: list[float], engine_util: list[float], policy_stack: str) -> PodState:
    base = 4000 + rank * 100
    gpus = [Gpu(0, "policy", base + 1, policy_util, 61234, [95.0 if policy_util[0] < 1 else 612.3]),
            Gpu(1, "policy", base + 2, policy_util, 61190, [94.5 if policy_util[0] < 1 else 598.7]),
            Gpu(2, "inference", base + 3, engine_util, 70371, [587.47]),
            Gpu(3, "inference", base + 4, engine_util, 70102, [571.02])]
    procs = {1: "/bin/bash /opt/iris/run_task.sh", 57: "/opt/openthoughts/envs/rl/bin/python -m ray.util.client.server",
             base + 1: POLICY_ARGS, base + 2: POLICY_ARGS, base + 3: ENGINE_ARGS, base + 4: ENGINE_ARGS,
             base + 9: "/usr/bin/python3 /opt/iris/fd_monitor.py"}
    stacks = {base + 1: policy_stack, base + 2: policy_stack, base + 3: STACK_ENGINE, base + 4: STACK_ENGINE}
    if rank == 0:
        procs[base + 5] = DRIVER_ARGS
        stacks[base + 5] = STACK_DRIVER
    ray_files = {
        "raylet.out": f"[2026-08-01 14:29:{50 + rank},113 I 833 2105] node_manager.cc:712: heartbeat ok\n",
        "gcs_server.out": "[2026-08-01 12:31:02,001 I 77 77] gcs_server.cc:281: GCS server started\n" if rank == 0 else "",
        f"worker-0a1b2c{rank}-01000000-{base + 1}.err": "",
        f"worker-0a1b2c{rank}-01000000-{base + 3}.out": "INFO engine alive\n",
    }
    return PodState(gpus=gpus, procs=procs, stacks=stacks, ray_files=ray_files)


class ExecScript:
    """Answers ``pods/exec`` like the pod's shell would, from a PodState per pod."""

    def __init__(self, states: dict[str, PodState]):
        self.states = states
        self.calls: list[tuple[str, list[str]]] = []
        self.call_times: list[float] = []        # time.monotonic() when each call arrived
        self.poll_count: dict[str, int] = {}

    def __call__(self, pod: str, argv: list[str]) -> ExecResult:
        self.calls.append((pod, list(argv)))
        self.call_times.append(time.monotonic())
        st = self.states.get(pod)
        if st is None:
            return ExecResult(stderr=b"error: no state for pod\n", exit_code=1)
        prog = argv[0] if argv else ""
        if prog == "nvidia-smi":
            q = next((a for a in argv if a.startswith("--query-gpu=")), None)
            if q == "--query-gpu=index,uuid,name":
                return ExecResult(stdout="".join(f"{g.index}, {g.uuid}, NVIDIA H100 80GB HBM3\n"
                                                 for g in st.gpus).encode())
            if q is not None:
                if "nvidia-smi-query" in st.hang:
                    return ExecResult(hang=True)
                i = self.poll_count.get(pod, 0)
                self.poll_count[pod] = i + 1
                lines = []
                for g in st.gpus:
                    util = g.util[min(i, len(g.util) - 1)]
                    power = g.power[min(i, len(g.power) - 1)]
                    lines.append(f"{g.index}, {util:.0f} %, {g.mem} MiB, {H100_TOTAL} MiB, {power:.2f} W")
                return ExecResult(stdout=("\n".join(lines) + "\n").encode())
            if any(a.startswith("--query-compute-apps=") for a in argv):
                return ExecResult(stdout="".join(
                    f"{g.uuid}, {g.pid}, {st.procs.get(g.pid, 'python3')}, {g.mem - 600} MiB\n"
                    for g in st.gpus if g.pid).encode())
        if prog == "nvidia-smi" and "-q" in argv:
            return ExecResult(stdout=(st.health or healthy_gpus_q(len(st.gpus))).encode())
        if prog == "dmesg":
            return ExecResult(stdout=st.kernel_log.encode())
        if prog in ("cat", "head"):
            path = argv[-1]
            m = re.fullmatch(r"/proc/(\d+)/(cmdline|environ)", path)
            if m:
                pid = int(m.group(1))
                if pid not in st.procs:
                    return ExecResult(stderr=f"{prog}: {path}: No such file or directory\n".encode(), exit_code=1)
                if m.group(2) == "cmdline":
                    return ExecResult(stdout=st.procs[pid].split(" ")[0].encode() + b"\0")
                env = {"PATH": "/usr/bin:/bin", "HOME": "/root", **st.environ.get(pid, {})}
                return ExecResult(stdout=b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
            if path not in st.files:
                return ExecResult(stderr=f"{prog}: cannot open '{path}' for reading: No such file or directory\n".encode(),
                                  exit_code=1)
            data = st.files[path]
            return ExecResult(stdout=data[:int(argv[argv.index("-c") + 1])] if "-c" in argv else data)
        if prog == "ls" and argv[-1] != "/tmp/ray/session_latest/logs":
            directory = argv[-1].rstrip("/")
            entries = sorted((p.rsplit("/", 1)[1], c) for p, c in st.files.items() if p.rsplit("/", 1)[0] == directory)
            if not entries:
                return ExecResult(stderr=f"ls: cannot access '{directory}': No such file or directory\n".encode(), exit_code=2)
            lines = ["total 8"] + [f"-rw-r--r-- 1 root root {len(c)} 2026-08-01 14:00:00.000000000 +0000 {n}" for n, c in entries]
            return ExecResult(stdout=("\n".join(lines) + "\n").encode())
        if prog == "ps":
            if "ps" in st.hang:
                return ExecResult(hang=True)
            return ExecResult(stdout="".join(f"{pid:>7} {args}\n" for pid, args in sorted(st.procs.items())).encode())
        if prog == "py-spy":
            pid = int(argv[argv.index("--pid") + 1])
            if pid not in st.procs:
                return ExecResult(stderr=f"Error: Failed to find process {pid}\n".encode(), exit_code=1)
            tmpl = st.stacks.get(pid, STACK_DRIVER)
            return ExecResult(stdout=tmpl.format(pid=pid, args=st.procs[pid]).encode())
        if prog == "ls":
            lines = ["total 64",
                     "drwxr-xr-x 4 root root 4096 2026-08-01 12:30:01.000000000 +0000 .",
                     "drwxr-xr-x 9 root root 4096 2026-08-01 12:30:00.000000000 +0000 .."]
            for k, (name, content) in enumerate(sorted(st.ray_files.items())):
                lines.append(f"-rw-r--r-- 1 root root {len(content.encode())} "
                             f"2026-08-01 14:{10 + k:02d}:00.123456789 +0000 {name}")
            lines.append("drwxr-xr-x 2 root root 4096 2026-08-01 12:30:01.000000000 +0000 events")
            return ExecResult(stdout=("\n".join(lines) + "\n").encode())
        if prog == "tail":
            path = argv[-1]
            name = path.rsplit("/", 1)[-1]
            if name not in st.ray_files:
                return ExecResult(stderr=f"tail: cannot open '{path}' for reading: No such file or directory\n".encode(),
                                  exit_code=1)
            n = int(argv[argv.index("-c") + 1])
            return ExecResult(stdout=st.ray_files[name].encode()[-n:])
        return ExecResult(stderr=(f'OCI runtime exec failed: exec failed: unable to start container process: '
                                  f'exec: "{prog}": executable file not found in $PATH: unknown\n').encode(),
                          exit_code=126)


def healthy_gpus_q(n: int, bad: int | None = None) -> str:
    """``nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`` of ``n`` GPUs (GPU ``bad`` with an
    uncorrectable ECC error and a pending row remap)."""
    out = ["==============NVSMI LOG==============", "", f"Attached GPUs                             : {n}"]
    for i in range(n):
        e = i == bad
        out += [f"GPU 00000000:{0x18 + i:02X}:00.0", "    ECC Errors", "        Volatile",
                "            DRAM Correctable              : 0", f"            DRAM Uncorrectable            : {3 if e else 0}",
                "        Aggregate", "            DRAM Correctable              : 0",
                f"            DRAM Uncorrectable            : {3 if e else 0}",
                "    Remapped Rows", "        Correctable Error                 : 0",
                f"        Uncorrectable Error               : {1 if e else 0}",
                f"        Pending                           : {'Yes' if e else 'No'}",
                "        Remapping Failure Occurred        : No", ""]
    return "\n".join(out) + "\n"


def fr_dump(last_done: int, pending: str | None) -> bytes:
    """A flight-recorder dump (the watchdog's pickle of plain containers, log-formats §2.4)."""
    entries = [{"record_id": s, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": s,
                "profiling_name": "nccl:all_reduce", "state": "completed", "is_p2p": False} for s in range(1, last_done + 1)]
    if pending:
        entries.append({"record_id": last_done + 1, "pg_id": 0, "process_group": ("0", "default_pg"),
                        "collective_seq_id": last_done + 1, "profiling_name": pending, "state": "scheduled", "is_p2p": False})
    return pickle.dumps({"version": "2.4", "entries": entries}, protocol=2)


# --------------------------------------------------------------------------- logs

def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def trainer_log(last_step: int, last_step_at: datetime, step_every_s: int = 240) -> list[str]:
    """SkyRL console-logger lines (log-formats §8.1) for steps 1..last_step."""
    lines = [f"{_ts(last_step_at - timedelta(hours=1, minutes=30))} | INFO     | skyrl_train.entrypoints.main_base:main:88 - "
             "Ray nodes alive: 2/2",
             f"{_ts(last_step_at - timedelta(hours=1, minutes=29))} | INFO     | skyrl_train.trainer:train:212 - "
             f"total training steps 200"]
    for step in range(1, last_step + 1):
        t = last_step_at - timedelta(seconds=step_every_s * (last_step - step))
        lines += [f"{_ts(t - timedelta(seconds=200))} | INFO     | skyrl_train.utils.utils:__enter__:51 - Started: 'generate'",
                  f"{_ts(t - timedelta(seconds=60))} | INFO     | skyrl_train.utils.utils:__exit__:55 - Finished: 'generate', time cost: 140.12s",
                  f"{_ts(t)} | INFO     | skyrl_train.utils.tracking:log:189 - Step {step}: ",
                  "{'generate/avg_num_tokens': '1843.2500',",
                  f" 'policy/grad_norm': '{0.8 + step / 100:.4f}',",
                  f" 'policy/policy_loss': '-0.0{step % 9 + 1}21',",
                  f" 'reward/avg_raw_reward': '{0.20 + step / 200:.4f}',",
                  f" 'timing/step': '{step_every_s - 1}.5000',",
                  f" 'trainer/global_step': {step}}}"]
    return lines


def engine_lines(start: datetime, end: datetime, every_s: int = 10, running: int = 48, tput: float = 2345.6) -> list[str]:
    out, t = [], start
    while t <= end:
        out.append(f"(AsyncVLLMInferenceEngine pid=4003) INFO {t.strftime('%m-%d %H:%M:%S')} [loggers.py:259] "
                   f"Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: {tput:.1f} tokens/s, "
                   f"Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 41.2%, Prefix cache hit rate: 12.0%")
        t += timedelta(seconds=every_s)
    return out


def _merge(*streams: list[str]) -> str:
    return "\n".join(line for s in streams for line in s) + "\n"


def other_job_pods() -> list[dict]:
    """Neighbours in the namespace that must never be taken for the job's pods."""
    a = make_pod(0, 0, job="rl-qwen8b-tb2")             # name contains our short name, label says otherwise
    b = make_pod(0, 0, job="sft-llama", user="bob")
    return [a, b]


# --------------------------------------------------------------------------- scenarios

@dataclass
class Scenario:
    incident: Incident
    script: ExecScript
    description: str


def _two_pods(*, policy_util, engine_util, policy_stack, trainer_last_at, engine_until, last_step=20):
    pods, logs, states = [], {}, {}
    for rank in (0, 1):
        pods.append(make_pod(rank, 0))
        states[pod_name(rank)] = pod_state(rank, policy_util=policy_util, engine_util=engine_util,
                                           policy_stack=policy_stack)
    engine = engine_lines(NOW - timedelta(minutes=40), engine_until)
    logs[(pod_name(0), False)] = _merge(trainer_log(last_step, trainer_last_at), engine)
    logs[(pod_name(1), False)] = _merge(engine)
    return pods, logs, states


def healthy() -> Scenario:
    pods, logs, states = _two_pods(policy_util=[88, 93, 97], engine_util=[61, 74, 55],
                                   policy_stack=STACK_TRAINING, trainer_last_at=NOW - timedelta(seconds=70),
                                   engine_until=NOW - timedelta(seconds=5))
    # an older, failed retry generation of the same job is still listed: never exec'd into
    old = make_pod(0, 0, phase="Failed", terminated={"exitCode": 1, "reason": "Error",
                                                    "startedAt": iso(NOW - timedelta(hours=3)),
                                                    "finishedAt": iso(NOW - timedelta(hours=2, minutes=10))})
    old["metadata"]["name"] = pod_name(0, 0).replace("-7f9c2d0-0", "-3e1a9b0-0")
    old["status"]["startTime"] = iso(NOW - timedelta(hours=3))
    for p in pods:  # the running pods are generation 1
        gen1 = p["metadata"]["name"][:-2] + "-1"
        states[gen1] = states.pop(p["metadata"]["name"])
        logs[(gen1, False)] = logs.pop((p["metadata"]["name"], False))
        p["metadata"]["name"] = gen1
        p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = PG_PREFIX + "1"
    logs[(old["metadata"]["name"], False)] = ("2026-08-01 12:19:40.000 | ERROR    | skyrl_train.trainer:train:300 - "
                                              "Train loop failed\nRuntimeError: NCCL error: unhandled system error\n")
    script = ExecScript(states)
    inc = Incident(pods=pods + [old] + other_job_pods(), logs=logs, exec_handler=script,
                   events=[_event(pods[0]["metadata"]["name"], "Normal", "Started", "Started container task", 1)])
    return Scenario(inc, script, "healthy: trainer stepping every 4 min, all GPUs busy")


def deception() -> Scenario:
    """Seed 004: policy mesh wedged in an NCCL collective, engines keep generating."""
    pods, logs, states = _two_pods(policy_util=[0, 0, 0], engine_util=[96, 28, 71],
                                   policy_stack=STACK_NCCL_WAIT, trainer_last_at=NOW - timedelta(minutes=60),
                                   engine_until=NOW - timedelta(seconds=5), last_step=7)
    script = ExecScript(states)
    inc = Incident(pods=pods + other_job_pods(), logs=logs, exec_handler=script,
                   events=[_event(pods[0]["metadata"]["name"], "Normal", "Started", "Started container task", 1)])
    return Scenario(inc, script, "deception: policy GPUs 0% with weights resident, engine GPUs busy, trainer frozen 60 min")


def oom_restart() -> Scenario:
    pods, logs, states = _two_pods(policy_util=[81, 90, 86], engine_util=[60, 66, 58],
                                   policy_stack=STACK_TRAINING, trainer_last_at=NOW - timedelta(seconds=50),
                                   engine_until=NOW - timedelta(seconds=5))
    p1 = pods[1]
    cs = p1["status"]["containerStatuses"][0]
    cs["restartCount"] = 1
    cs["lastState"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                      "startedAt": iso(NOW - timedelta(hours=2)),
                                      "finishedAt": iso(NOW - timedelta(minutes=6)),
                                      "containerID": "containerd://old1"}}
    cs["state"] = {"running": {"startedAt": iso(NOW - timedelta(minutes=5, seconds=30))}}
    name = p1["metadata"]["name"]
    logs[(name, True)] = ("2026-08-01 14:23:40.001 | INFO     | skyrl_train.workers.worker:ppo_train:688 - "
                          "HOST_RAM_BREAKDOWN node=gd92c10 cgroup=1887.2/1900.0 GiB\n"
                          "2026-08-01 14:23:59.870 | INFO     | skyrl_train.workers.worker:ppo_train:688 - "
                          "HOST_RAM_BREAKDOWN node=gd92c10 cgroup=1899.8/1900.0 GiB\n")
    logs[(name, False)] = _merge(["2026-08-01 14:24:31.000 | INFO     | skyrl_train.entrypoints.main_base:main:40 - "
                                  "starting ray worker"], engine_lines(NOW - timedelta(minutes=4), NOW - timedelta(seconds=5)))
    script = ExecScript(states)
    events = [_event(name, "Normal", "Pulled", 'Container image "ghcr.io/marin-community/rl:latest" already present on machine', 2),
              _event(name, "Normal", "Created", "Created container task", 2),
              _event(name, "Normal", "Started", "Started container task", 2),
              _event(name, "Warning", "BackOff", f"Back-off restarting failed container task in pod {name}_iris(uid-{name})", 1),
              _event("unrelated-pod", "Normal", "Started", "Started container app", 1)]
    inc = Incident(pods=pods + other_job_pods(), logs=logs, exec_handler=script, events=events)
    return Scenario(inc, script, "a pod whose task container restarted after OOMKilled")


RESOLVED_CONFIG = b"""\
trainer:
  policy:
    model:
      path: Qwen/Qwen3-8B
generator:
  num_inference_engines: 2
  enforce_eager: false
"""
LAUNCH_ARGS = ["bash", "-c", "exec python -m skyrl_train.entrypoints.main_base --config /app/run/resolved_config.yaml "
               "--max-retries 2 trainer.epochs=1"]
WATCHDOG_LINE = ("[rank0]:[E801 13:29:10.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
                 "Timeout(ms)=1800000) ran for 1800042 milliseconds before timing out.")


def launched_hang() -> Scenario:
    """Deception (policy wedged in an all_reduce, engines busy) with its launch readable from the pod:
    container args naming the resolved config and --max-retries, the config file, and the
    flight-recorder dumps the watchdog wrote (rank 3 never reached collective 8)."""
    sc = deception()
    driver_pod = pod_name(0)
    for pod in sc.incident.pods:
        if pod["metadata"]["name"] == driver_pod:
            pod["spec"]["containers"][0]["command"] = LAUNCH_ARGS[:2]
            pod["spec"]["containers"][0]["args"] = LAUNCH_ARGS[2:]
    sc.incident.logs[(driver_pod, False)] += WATCHDOG_LINE + "\n"
    prefix = "/tmp/fr/nccl_trace_rank_"
    for rank, name in enumerate((pod_name(0), pod_name(1))):
        st = sc.script.states[name]
        base = 4000 + rank * 100
        for pid in (base + 1, base + 2):
            st.environ[pid] = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix, "TORCH_NCCL_TRACE_BUFFER_SIZE": "20000",
                               "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
        st.files[f"{prefix}{2 * rank}"] = fr_dump(7, "nccl:all_reduce")
        st.files[f"{prefix}{2 * rank + 1}"] = fr_dump(7 if rank == 0 else 6, "nccl:all_reduce" if rank == 0 else None)
    sc.script.states[driver_pod].files["/app/run/resolved_config.yaml"] = RESOLVED_CONFIG
    sc.script.states[pod_name(1)].health = healthy_gpus_q(4, bad=1)
    sc.script.states[pod_name(1)].kernel_log = ("2026-08-01T13:20:00,000000+00:00 NVRM: Xid (PCI:0000:19:00): 79, "
                                                "pid=4102, GPU has fallen off the bus.\n")
    sc.description = "deception with the launch, the flight-recorder dumps and a GPU fault readable from the pods"
    return sc


def deleted_between_list_and_exec() -> Scenario:
    sc = healthy()
    sc.incident.delete_on_first_exec = [pod_name(1, 1)]
    sc.description = "rank-1 pod deleted after it was listed and its logs read, before the first exec"
    return sc


def api_faults() -> Scenario:
    """A 500 on the first pod list (retried), events always 500, rank-1 log 500, rank-1 nvidia-smi hangs."""
    sc = healthy()
    sc.incident.faults = [Fault("GET", r"/pods$", 500, times=1),
                          Fault("GET", r"/events$", 500),
                          Fault("GET", rf"/pods/{pod_name(1, 1)}/log$", 500)]
    sc.script.states[pod_name(1, 1)].hang.add("nvidia-smi-query")
    sc.description = "API 500s and a hung exec"
    return sc


def pods_unlistable() -> Scenario:
    sc = healthy()
    sc.incident.faults = [Fault("GET", r"/pods$", 500)]
    sc.description = "the pod list always answers 500"
    return sc


def absent() -> Scenario:
    script = ExecScript({})
    return Scenario(Incident(pods=other_job_pods(), exec_handler=script), script, "no pods of the job")


def _event(pod: str, type_: str, reason: str, message: str, count: int) -> dict:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{pod}.{reason.lower()}", "namespace": "iris"},
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": "iris", "uid": f"uid-{pod}",
                               "fieldPath": "spec.containers{task}"},
            "type": type_, "reason": reason, "message": message, "count": count,
            "firstTimestamp": iso(NOW - timedelta(hours=2)), "lastTimestamp": iso(NOW - timedelta(minutes=5)),
            "source": {"component": "kubelet", "host": "gd92c10"}}


def wide_exec_forbidden(n: int = 64) -> Scenario:
    """A job of ``n`` running pods on ``n`` nodes whose identity may read pods, logs, events and
    nodes but not exec (every pods/exec is HTTP 403), with events of neighbours in the namespace:
    what a probe's request count and time grow with."""
    pods, logs = [], {}
    for rank in range(n):
        pod = make_pod(rank, 0)
        pods.append(pod)
        logs[(pod["metadata"]["name"], False)] = _merge(trainer_log(20, NOW - timedelta(seconds=70)) if rank == 0 else [],
                                                        engine_lines(NOW - timedelta(minutes=10), NOW - timedelta(seconds=5)))
    neighbours = other_job_pods()
    events = [_event(p["metadata"]["name"], "Normal", "Started", "Started container task", 1) for p in pods + neighbours]
    script = ExecScript({})
    inc = Incident(pods=pods + neighbours, logs=logs, events=events, exec_handler=script,
                   faults=[Fault("GET", r"/exec$", status=403)])
    return Scenario(inc, script, f"{n} running pods, exec forbidden (HTTP 403)")
