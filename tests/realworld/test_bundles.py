"""Real excerpts embedded where they appear in an evidence bundle (trainer pod log, Ray worker
log, vLLM engine log, Slurm .err, kernel log), diagnosed end to end: verdict and first error.

Bundles are generated here at test time with the incident corpus' own ``Bundle`` writer. Each
embeds the excerpt of ONE public report (tests/realworld/corpus.yaml names the source) so its
timeline is the report's own; nothing synthetic is mixed into a failure bundle's logs. The
expectations are the operator's judgement of each report, not a copy of rlhealth's output.
"""
from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.report import load_schema

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "incidents"))
from build import Bundle, STANDARD_EP, training_log  # noqa: E402
from _lines import at, iso  # noqa: E402

CORPUS = {e["id"]: e for e in yaml.safe_load(Path(__file__).with_name("corpus.yaml").read_text())["entries"]}
SCHEMA = load_schema()


def text(*entry_ids: str) -> str:
    return "".join(CORPUS[i]["text"] for i in entry_ids)


def running(root: Path, synced_min: float = 100) -> Bundle:
    return Bundle(root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, synced=at(synced_min))


# name -> (writer, expected verdict, substring of the first error quoted, gate that must FAIL)
CASES: dict[str, tuple] = {}


def case(verdict: str, first_error: str | None, failing_gate: str | None):
    def deco(fn):
        CASES[fn.__name__] = (fn, verdict, first_error, failing_gate)
        return fn
    return deco


@case("KILL", "[rank3]: torch.distributed.DistBackendError", "liveness")
def torchrun_pod_log_rank_prefixed_nccl_error(root):
    running(root).write("pod_logs/iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0.log", text("nccl-remote-error-torchrun-rank-prefix"))


@case("KILL", "[rank0]: AttributeError: 'AcceleratorState' object has no attribute 'mixed_precision'", "liveness")
def torchrun_pod_log_rank_prefixed_traceback_quotes_exception_not_frame(root):
    running(root).write("pod_logs/iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0.log",
                        text("torchrun-rank-prefixed-traceback-attributeerror"))


@case("KILL", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue", "resources")
def vllm_logged_traceback_names_engine_death_not_a_frame(root):
    running(root).write("ray_vllm_logs/api-server-0.log", text("vllm-v1-output-handler-failed-ascend"))


@case("KILL", "SIGSEGV received at time=1709028495", "liveness")
def ray_worker_err_sigsegv(root):
    running(root).write("ray_logs/worker-5f2a-01000000-73667.err", text("ray-sigsegv-logging-cc"))


@case("KILL", "Owner's node has crashed", "liveness")
def ray_driver_actor_died_after_owner_node_crashed(root):
    running(root).write("finelog.log", text("actor-died-owner-node-crashed-easyr1"))


@case("KILL", "Worker proc VllmWorker-3 died unexpectedly", "resources")
def vllm_engine_log_worker_proc_died(root):
    running(root).write("ray_vllm_logs/engine-0.log", text("vllm-v1-worker-proc-died-executor"))


@case("KILL", "Xid (PCI:0000:00:08): 94", "liveness")
def kernel_log_xid_94_dmesg_ctime(root):
    b = running(root)
    b.capture(at(101), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0,
                              "max_retries": 1, "attempts": []},
              files={"logs/dmesg-node-3.log": text("xid-94-dmesg-ctime")}, job_id="/alice/rl-qwen8b-gsm8k")


@case("KILL", "Out of memory: Kill process 27438 (R) score 31 or sacrifice child", "resources")
def kernel_log_older_oom_killer_wording(root):
    b = running(root)
    b.capture(at(101), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0,
                              "max_retries": 1, "attempts": []},
              files={"logs/kern.log": text("kernel-oom-kill-process-sacrifice-child")}, job_id="/alice/rl-qwen8b-gsm8k")


@case("KILL", "The node was low on resource: memory. Threshold quantity: 250Mi", "resources")
def k8s_events_json_eviction_message(root):
    # the kubelet's Evicted event of kubernetes/kubernetes#126053, as the live probe stores the
    # pod's events (capture events.json, an EventList written one field a line)
    import json
    message = ("The node was low on resource: memory. Threshold quantity: 250Mi, available: 232700Ki. Container "
               "oomkill-nodeallocatable-container was using 4923412Ki, request is 0, has larger consumption of memory.")
    events = {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": [
        {"metadata": {"name": "iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0.1", "namespace": "iris"},
         "involvedObject": {"kind": "Pod", "name": "iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0", "namespace": "iris"},
         "type": "Warning", "reason": "Evicted", "message": message, "count": 1,
         "firstTimestamp": "2024-07-12T15:49:58Z", "lastTimestamp": "2024-07-12T15:49:58Z"}]}
    b = running(root)
    b.capture(at(101), state={"source": "iris", "state": "running", "failure_count": 0, "preemption_count": 0,
                              "max_retries": 1, "attempts": []},
              files={"events.json": json.dumps(events, indent=2, sort_keys=True) + "\n"}, job_id="/alice/rl-qwen8b-gsm8k")


@case("KILL", "Detected 1 oom_kill event in StepId=440575.0", "resources")
def slurm_err_cgroup_oom_then_step_cancelled(root):
    b = Bundle(root, cluster="jsc-jupiter", job_id="/slurm/440575", jupiter=True, synced=at(100),
               extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "440575", "state": "running",
                                       "entrypoint": "", "submitted_at_ms": 0}})
    b.write("slurm_logs/grpo-qwen3-8b_440575.err", text("slurm-oom-kill-event-stepid"))


@case("KILL", "Step 1141810.0 exceeded memory limit (52917772 > 20971520), being killed", "resources")
def slurm_err_older_memory_limit_wording_then_task_killed(root):
    b = Bundle(root, cluster="jsc-jupiter", job_id="/slurm/1141810", jupiter=True, synced=at(100),
               extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "1141810", "state": "running",
                                       "entrypoint": "", "submitted_at_ms": 0}})
    b.write("slurm_logs/index_human_1141810.err", text("slurm-step-exceeded-memory-limit-being-killed"))


@case("KILL", "failed (exitcode: -9) local_rank: 0", "liveness")
def torchrun_unknown_fatal_is_not_silence(root):
    running(root).write("pod_logs/iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0.log", text("torchelastic-failed-exitcode-minus-9"))


@case("KILL", "[rank0]:[E321 02:07:08.408271257", "liveness")
def c10_unpadded_month_orders_ranks_across_pod_logs(root):
    # rank 2's pod sorts first, but rank 0 timed out 24 ms earlier (c10 "[E321" = March 21);
    # both lines from hiyouga/LlamaFactory#7396 (the rank 2 line as the report cuts it)
    excerpt = CORPUS["nccl-watchdog-timeout-c10-march"]["text"]
    rank2 = ("[80750] [rank2]:[E321 02:07:08.432379535 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran fo")
    b = running(root)
    b.write("pod_logs/a-rank2.log", rank2 + "\n")
    b.write("pod_logs/b-rank0.log", excerpt)


@case("NO-KILL", "DUE TO TIME LIMIT on n447", None)
def terminal_job_older_slurm_time_limit_wording(root):
    Bundle(root, job_id="/alice/rl-qwen8b-gsm8k", entrypoint=STANDARD_EP, state="failed", synced=at(100)).write(
        "finelog.log", text("slurm-time-limit-older-on-after"))


@case("NO-KILL", "DUE TO TIME LIMIT on n447", None)
def jupiter_chain_leg_ended_by_older_time_limit_wording(root):
    # leg 1's .out ends with Slurm's older wording (no "ON node" before CANCELLED); leg 2 resumed:
    # a chain restart, not a burned attempt (checked in test_older_time_limit_is_a_chain_restart)
    b = Bundle(root, cluster="jsc-jupiter", job_id="/slurm/830330", jupiter=True, synced=at(240),
               extra_manifest={"job": {"cluster": {"name": "jsc-jupiter"}, "job_id": "830330", "state": "running",
                                       "entrypoint": "", "submitted_at_ms": 0}})
    leg1 = training_log(6, fmt="wandb", stats_era="v1-early", engines=1)
    leg1.append(text("slurm-time-limit-older-on-after").rstrip("\n"))
    b.lines("slurm_logs/canu_830329.out", leg1)
    b.lines("finelog.log", training_log(10, start_min=130, fmt="wandb", stats_era="v1-early", engines=1)[2:])


@case("NO-KILL", None, None)
def healthy_run_with_real_vllm_and_ray_noise(root):
    b = running(root, synced_min=125)
    lines = training_log(12, fmt="wandb", stats_era="v1")
    b.lines("finelog.log", lines)
    b.write("ray_vllm_logs/engine-0.log", text("vllm-shm-broadcast-wait-apiserver-requests", "vllm-v0-request-noise",
                                                "vllm-v1-worker-loading-noise", "ray-resubmit-retry-warning"))
    b.write("pod_logs/iris-alice-rl-qwen8b-gsm8k-0-1a2b3c-0.log", text("nccl-warn-broken-pipe-info-trail",
                                                                       "deepspeed-info-noise"))


NOW = {"healthy_run_with_real_vllm_and_ray_noise": 130, "jupiter_chain_leg_ended_by_older_time_limit_wording": 245}


def _now(name: str) -> str:
    return iso(at(NOW.get(name, 102)))


def test_at_least_ten_bundles():
    assert len(CASES) >= 10


@pytest.mark.parametrize("name", sorted(CASES))
def test_bundle(name, tmp_path, monkeypatch):
    writer, verdict, first_error, failing_gate = CASES[name]
    writer(tmp_path / "bundle")
    monkeypatch.chdir(tmp_path)
    report = diagnose(Path("bundle"), now=parse_now(_now(name)))
    doc = report.to_json_dict()
    jsonschema.validate(doc, SCHEMA)
    quoted = (doc["first_error"] or {}).get("text")
    assert doc["verdict"] == verdict, (doc["reasoning"], quoted)
    if first_error is None:
        assert quoted is None, quoted
    else:
        assert quoted is not None and first_error in quoted, quoted
    if failing_gate:
        assert doc["gates"][failing_gate]["status"] == "FAIL", doc["gates"][failing_gate]["finding"]


def test_older_time_limit_is_a_chain_restart(tmp_path, monkeypatch):
    jupiter_chain_leg_ended_by_older_time_limit_wording(tmp_path / "bundle")
    monkeypatch.chdir(tmp_path)
    doc = diagnose(Path("bundle"), now=parse_now(_now("jupiter_chain_leg_ended_by_older_time_limit_wording"))).to_json_dict()
    restarts = doc["restarts"]
    assert restarts["burned"] == 0, restarts
    first_leg = restarts["attempts"][0]
    assert "DUE TO TIME LIMIT on n447" in (first_leg["first_error"] or ""), first_leg
