"""Deterministic generator of a large, healthy, agentic Iris evidence bundle.

Layout (contract §2.1): ``<workdir>/jobs/<cluster>/<user>/<job>/`` with ``manifest.json``,
``finelog.log``, ``finelog.stderr``, ``pod_logs/<pod>.log``,
``ray_vllm_logs/<pod>/{worker-*.out,worker-*.err,raylet.out,gcs_server.out}`` and
``trace_jobs/<trial>/{config.json,result.json,agent/trajectory.json,exception.txt}``.

Speed: every log file is written as big chunks. A chunk is built from one of a few
pre-rendered templates (lines with timestamp placeholders and per-line random numbers)
by a single ``str.join``; timestamps are formatted once per second, not once per line.
Trainer events (WANDB_MIRROR lines, phase timers, step progress, handled tracebacks,
start-up lines) are injected at their times between template lines, so steps and their
loguru timestamps increase monotonically through the file. The job's duration scales
with the log size (1 GiB of logs = 36 h of a healthy run), so 4x the logs is 4x the steps.
"""
from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

GIB = 1024 ** 3
CLUSTER = "cw-us-east-02a"
USER = "bench"
JOB = "rl-qwen3-8b-tb-bench"
SYNCED_AT = datetime(2026, 8, 3, 12, 0, 0, 123456, tzinfo=timezone.utc)
NOW = "2026-08-03T12:05:00Z"          # --now for the diagnosis: 5 minutes after the sync
HOURS_PER_GIB = 24.0
STEP_S = 180.0                        # one training step every 3 minutes
RUNNING_S = 1300.0                    # trials started this close to the end are still running (a trial takes <= ~950 s)
CHUNK_LINES = 4096
TEMPLATES = 8
STATS_SHARE = 0.01                    # vLLM stats lines: every 10 s per engine among ~100 lines/s of access/harbor logs
PODS = ["rl-qwen3-8b-tb-bench-0-head", "rl-qwen3-8b-tb-bench-1-worker", "rl-qwen3-8b-tb-bench-2-worker",
        "rl-qwen3-8b-tb-bench-3-worker"]
ENGINES_PER_POD = 2
TASKS = ["fix-flaky-ci", "sanitize-git-repo", "build-cython-ext", "count-dataset-tokens", "crack-7z-hash",
         "fix-pandas-version", "git-multibranch", "hello-world", "log-summary-date-ranges", "modernize-fortran-build",
         "nginx-request-logging", "openssl-selfsigned-cert", "polyglot-c-py", "qemu-startup", "regex-log",
         "sqlite-with-gcov", "vim-terminal-task", "write-compressor", "path-tracing", "password-recovery"]

# placeholders inside templates (never present in real text)
P_ISO = "\x01"      # 'YYYY-MM-DD HH:MM:SS' (loguru / Ray python-core)
P_VLLM = "\x02"     # 'MM-DD HH:MM:SS' (vLLM logger)
P_GLOG = "\x03"     # 'MMDD HH:MM:SS' (c10 / glog)


# ----------------------------------------------------------------------------- line builders
def _engine_prefix(pod_i: int, e: int) -> str:
    return f"(AsyncVLLMInferenceEngine pid={3100 + 17 * pod_i + e}, ip=10.1.{pod_i}.{11 + e})"


ENTRY = "(skyrl_entrypoint pid=4120)"
GENERATOR = "(TerminalBenchGenerator pid=48213, ip=10.1.0.11)"


def _loguru(msg: str, level: str = "INFO", where: str = "skyrl_train.trainer:train:412",
            ms: int = 0, actor: str | None = None) -> str:
    line = f"{P_ISO}.{ms:03d} | {level:<8} | {where} - {msg}"
    return f"{actor} {line}" if actor else line


def _stats_line(rng: random.Random, era: str, prefix: str | None, engine: int) -> str:
    gen = rng.uniform(2200.0, 3600.0)
    prompt = rng.uniform(300.0, 9000.0)
    running = rng.randint(40, 120)
    waiting = rng.randint(0, 12)
    kv = rng.uniform(20.0, 85.0)
    pre = f"{prefix} " if prefix else ""
    if era == "v0":
        return (f"{pre}INFO {P_VLLM} metrics.py:351] Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
                f"{gen:.1f} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, GPU KV cache usage: "
                f"{kv:.1f}%, CPU KV cache usage: 0.0%.")
    if era == "v1-early":
        return (f"{pre}INFO {P_VLLM} [loggers.py:111] Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
                f"{gen:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs ")
    extra = ", MM cache hit rate: 0.0%" if era == "v1-2026" else ""
    return (f"{pre}INFO {P_VLLM} [loggers.py:259] Engine {engine:03d}: Avg prompt throughput: {prompt:.1f} tokens/s, "
            f"Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
            f"GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {rng.uniform(20, 80):.1f}%{extra}")


def _access_line(rng: random.Random, prefix: str | None) -> str:
    pre = f"{prefix} " if prefix else ""
    path = rng.choice(["/v1/chat/completions"] * 8 + ["/v1/completions", "/health", "/v1/models"])
    return f"{pre}INFO:     10.1.{rng.randint(0, 3)}.{rng.randint(20, 250)}:{rng.randint(30000, 65000)} - \"POST {path} HTTP/1.1\" 200 OK"


def _harbor_line(rng: random.Random) -> str:
    task = rng.choice(TASKS)
    trial = f"{task}__{''.join(rng.choice('abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789') for _ in range(7))}"
    kind = rng.randrange(8)
    if kind == 0:
        msg = f"Starting trial {trial} (sandbox {rng.getrandbits(64):016x})"
    elif kind == 1:
        msg = f"Trial {trial} finished: reward={rng.choice(['0.0', '1.0', '1.0', '0.0', '0.5'])}, episodes={rng.randint(3, 40)}"
    elif kind == 2:
        msg = f"litellm.acompletion model=hosted_vllm/policy tokens_in={rng.randint(2000, 60000)} tokens_out={rng.randint(20, 2000)} latency_ms={rng.randint(200, 9000)}"
    elif kind == 3:
        msg = f"daytona: sandbox {rng.getrandbits(64):016x} state=started cpu=2 memory=4GiB disk=10GiB"
    elif kind == 4:
        msg = f"terminus-2 episode {rng.randint(1, 40)} for {trial}: executing {rng.randint(1, 4)} command(s)"
    elif kind == 5:
        msg = f"Verifier for {trial}: running tests/test_outputs.py ({rng.randint(1, 30)} tests)"
    elif kind == 6:
        msg = f"HTTP Request: POST http://10.1.0.11:8000/v1/chat/completions \"HTTP/1.1 200 OK\""
    else:
        msg = f"Uploading {trial} artifacts to s3://marin-us-east-02a/tmp/ttl=14d/{JOB}/trace_jobs/{trial}/ ({rng.randint(2, 900)} KiB)"
    return _loguru(msg, where=rng.choice(["harbor.trial.trial:run:233", "harbor.agents.terminus_2:_run_episode:611",
                                          "harbor.environments.daytona:start:144", "httpx:_send_single_request:1025"]),
                   ms=rng.randrange(1000), actor=GENERATOR)


def _noise_line(rng: random.Random, prefix: str | None) -> str:
    pre = f"{prefix} " if prefix else ""
    kind = rng.randrange(6)
    if kind == 0:
        return f"{pre}INFO {P_VLLM} [async_llm.py:{rng.randint(200, 600)}] Added request chatcmpl-{rng.getrandbits(96):024x}."
    if kind == 1:
        return f"{pre}INFO {P_VLLM} [logger.py:43] Received request chatcmpl-{rng.getrandbits(96):024x}: prompt: '<|im_start|>user\\n...', params: SamplingParams(n=1, temperature=1.0, top_p=1.0, max_tokens={rng.randint(512, 8192)}), lora_request: None."
    if kind == 2:
        return f"{pre}DEBUG {P_VLLM} [scheduler.py:{rng.randint(300, 900)}] num_running={rng.randint(1, 128)} num_waiting={rng.randint(0, 8)} kv_blocks_free={rng.randint(1000, 90000)}"
    if kind == 3:
        return f"{pre}{P_ISO},{rng.randrange(1000):03d}\tINFO worker.py:{rng.randint(100, 3000)} -- Task finished in {rng.uniform(0.01, 9):.3f}s"
    if kind == 4:
        return f"{pre}INFO {P_VLLM} [metrics.py:{rng.randint(50, 400)}] Prefix cache queries={rng.randint(1, 999999)} hits={rng.randint(1, 99999)}"
    return f"{pre}WARNING {P_VLLM} [protocol.py:{rng.randint(50, 99)}] The following fields were present in the request but ignored: {{'reasoning_effort'}}"


def _shm_line(prefix: str | None) -> str:
    pre = f"{prefix} " if prefix else ""
    return (f"{pre}INFO {P_VLLM} [shm_broadcast.py:542] No available shared memory broadcast block found in 60 seconds. "
            "This typically happens when some processes are hanging or doing some time-consuming work "
            "(e.g. compilation, weight/kv cache quantization).")


def _raylet_line(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"[{P_ISO},{rng.randrange(1000):03d} I {rng.randint(100, 999)} {rng.randint(1000, 9999)}] (raylet) node_manager.cc:{rng.randint(500, 3000)}: Lease granted to worker {rng.getrandbits(112):028x}"
    if kind == 1:
        return f"[{P_ISO},{rng.randrange(1000):03d} I {rng.randint(100, 999)} {rng.randint(1000, 9999)}] (raylet) local_object_manager.cc:{rng.randint(100, 900)}: Spilled {rng.randint(1, 90)} MiB, {rng.randint(1, 50)} objects, write throughput {rng.randint(100, 900)} MiB/s"
    if kind == 2:
        return f"[{P_ISO},{rng.randrange(1000):03d} D {rng.randint(100, 999)} {rng.randint(1000, 9999)}] (raylet) worker_pool.cc:{rng.randint(100, 900)}: Returning worker {rng.getrandbits(112):028x} to idle pool"
    return f"[{P_ISO},{rng.randrange(1000):03d} I {rng.randint(100, 999)} {rng.randint(1000, 9999)}] (raylet) memory_monitor.cc:{rng.randint(100, 300)}: Memory usage {rng.uniform(0.2, 0.7):.4f} below threshold 0.95"


def _genbuf_line(rng: random.Random) -> str:
    n = rng.randint(0, 32)
    return f"{ENTRY} Generation Buffer Progress: {n}/32 [{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}<?, ?it/s]"


# mix: (weight, builder) per file kind; builders take (rng, prefix, engine)
@dataclass
class Kind:
    name: str
    mix: list


def _mix_trainer(rng, prefix, engine):           # finelog.log and the head pod log
    r = rng.random()
    if r < STATS_SHARE:
        return _stats_line(rng, rng.choice(["v1", "v1", "v1-2026", "v1-early", "v0"]), _engine_prefix(rng.randrange(4), engine), engine)
    if r < 0.50:
        return _access_line(rng, _engine_prefix(rng.randrange(4), rng.randrange(ENGINES_PER_POD)))
    if r < 0.80:
        return _harbor_line(rng)
    if r < 0.9975:
        return _noise_line(rng, _engine_prefix(rng.randrange(4), rng.randrange(ENGINES_PER_POD)))
    if r < 0.9990:
        return _genbuf_line(rng)
    return _shm_line(_engine_prefix(rng.randrange(4), engine))


def _mix_pod(rng, prefix, engine):               # worker pod logs: engines of that pod
    r = rng.random()
    if r < STATS_SHARE:
        return _stats_line(rng, "v1", prefix, engine)
    if r < 0.65:
        return _access_line(rng, prefix)
    if r < 0.999:
        return _noise_line(rng, prefix)
    return _shm_line(prefix)


def _mix_worker(rng, prefix, engine):            # ray_vllm_logs/<pod>/worker-*.err (no actor prefix)
    r = rng.random()
    if r < STATS_SHARE:
        return _stats_line(rng, "v1-2026", None, engine)
    if r < 0.60:
        return _access_line(rng, None)
    if r < 0.999:
        return _noise_line(rng, None)
    return _shm_line(None)


def _mix_raylet(rng, prefix, engine):
    return _raylet_line(rng)


# ----------------------------------------------------------------------------- templates / chunks
class Template:
    """CHUNK_LINES lines split around timestamp placeholders."""

    def __init__(self, lines: list[str]):
        text = "\n".join(lines) + "\n"
        parts = _PLACEHOLDERS.split(text)
        self.pieces: list[str] = parts[0::2]
        kinds = parts[1::2]
        n = len(text)
        self.slots: list[tuple[str, float]] = []   # (placeholder kind, position fraction in chunk)
        pos = len(self.pieces[0])
        for k, piece in zip(kinds, self.pieces[1:]):
            self.slots.append((k, pos / n))
            pos += 1 + len(piece)
        self.nbytes = len(text.encode()) - len(self.slots) + sum(
            19 if k == P_ISO else 14 if k == P_VLLM else 13 for k, _ in self.slots)


_PLACEHOLDERS = re.compile("([\x01\x02\x03])")


class Clock:
    """Second-granular timestamp strings, cached."""

    def __init__(self):
        self.cache: dict[tuple[str, int], str] = {}

    def fmt(self, kind: str, sec: int) -> str:
        key = (kind, sec)
        s = self.cache.get(key)
        if s is None:
            t = time.gmtime(sec)
            if kind == P_ISO:
                s = time.strftime("%Y-%m-%d %H:%M:%S", t)
            elif kind == P_VLLM:
                s = time.strftime("%m-%d %H:%M:%S", t)
            else:
                s = time.strftime("%m%d %H:%M:%S", t)
            if len(self.cache) > 200_000:
                self.cache.clear()
            self.cache[key] = s
        return s


def _render(tpl: Template, clock: Clock, t0: float, dur: float) -> str:
    vals = [clock.fmt(kind, int(t0 + frac * dur)) for kind, frac in tpl.slots]
    out = [None] * (len(tpl.pieces) + len(vals))
    out[0::2] = tpl.pieces
    out[1::2] = vals
    return "".join(out)


def _iso_at(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}"


def _sub(line: str, t: float) -> str:
    return (line.replace(P_ISO, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)))
            .replace(P_VLLM, time.strftime("%m-%d %H:%M:%S", time.gmtime(t)))
            .replace(P_GLOG, time.strftime("%m%d %H:%M:%S", time.gmtime(t))))


# ----------------------------------------------------------------------------- trainer events
def _metrics(step: int, rng: random.Random) -> dict:
    m = {"policy/policy_entropy": round(1.2 - 0.0002 * step + rng.uniform(-0.02, 0.02), 4),
         "policy/policy_loss": round(rng.uniform(-0.01, 0.01), 5),
         "policy/raw_grad_norm": round(rng.uniform(0.04, 0.09), 4),
         "reward/avg_raw_reward": round(min(0.9, 0.2 + 0.0001 * step + rng.uniform(-0.03, 0.03)), 4),
         "reward/avg_pass_at_8": round(min(0.95, 0.35 + 0.0004 * step), 4),
         "policy/tis/imp_ratio_mean": round(rng.uniform(0.93, 1.01), 4),
         "policy/tis/log_ratio_abs_mean": round(rng.uniform(0.01, 0.05), 4),
         "policy/log_ratio_abs_max": round(rng.uniform(0.3, 0.8), 4),
         "generate/avg_num_tokens": round(rng.uniform(1500, 2500), 2),
         "generate/tis/exact_match_fraction": round(rng.uniform(0.6, 0.8), 4),
         "timing/step": round(STEP_S + rng.uniform(-30, 30), 2),
         "timing/generate": round(rng.uniform(100, 130), 2),
         "timing/policy_train": round(rng.uniform(25, 35), 2),
         "timing/sync_weights": round(rng.uniform(5, 8), 2),
         "trainer/epoch": step // 100, "trainer/global_step": step}
    for i in range(24):   # the long tail of per-step metrics SkyRL logs
        m[f"generate/extra_metric_{i:02d}"] = round(rng.uniform(0, 100), 3)
    return m


def _trainer_events(t_start: float, t_end: float, seed: int, prefixed: bool) -> list[tuple[float, str]]:
    """(time, line) of trainer output; lines are final text (no placeholders)."""
    rng = random.Random(seed)
    actor = ENTRY if prefixed else None
    ev: list[tuple[float, str]] = []

    def lg(t, msg, level="INFO", where="skyrl_train.trainer:train:412", a=actor):
        line = f"{_iso_at(t)} | {level:<8} | {where} - {msg}"
        ev.append((t, f"{a} {line}" if a else line))

    t = t_start
    ev.append((t, f"task=/{USER}/{JOB}/0 | [iris setup] step 1/2"))
    ev.append((t + 1, f"task=/{USER}/{JOB}/0 | [iris setup] step 2/2"))
    lg(t + 5, "MarinSkyRL now at 3f9c2a1e7b", where="marin_skyrl.launch:main:88", a=None)
    lg(t + 40, "trainer config: trainer.algorithm.use_tis=true trainer.policy.model.path=Qwen/Qwen3-8B", where="skyrl_train.entrypoints.main_base:main:301")
    for p in range(len(PODS)):
        for e in range(ENGINES_PER_POD):
            ev.append((t + 300 + p, f"{_engine_prefix(p, e)} INFO {time.strftime('%m-%d %H:%M:%S', time.gmtime(t + 300 + p))} "
                       f"[core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B', "
                       f"tensor_parallel_size=4, enforce_eager=False, gpu_memory_utilization=0.8"))
            ev.append((t + 420 + p, f"{_engine_prefix(p, e)} INFO {time.strftime('%m-%d %H:%M:%S', time.gmtime(t + 420 + p))} "
                       f"[gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB"))
    lg(t + 600, "TerminalBenchGenerator initialized: Concurrent trials: 256, max_turns: 40", where="terminal_bench.terminal_bench_generator:__init__:97",
       a=GENERATOR)
    step = 0
    t = t_start + 900
    total = int((t_end - t) // STEP_S)
    while t + STEP_S < t_end:
        step += 1
        lg(t, "Started: 'step'", where="skyrl_train.utils.timer:__enter__:35")
        lg(t + 1, "Started: 'generate'", where="skyrl_train.utils.timer:__enter__:35")
        gen = rng.uniform(100, 130)
        lg(t + 1 + gen, f"Finished: 'generate', time cost: {gen:.2f}s", where="skyrl_train.utils.timer:__exit__:41")
        if step % 50 == 7:   # a handled traceback (WARNING): benign, skipped by the signature's skip regex
            tb = t + 2 + gen
            lg(tb, "Traceback (most recent call last):", level="WARNING", where="terminal_bench.terminal_bench_generator:_run_trial:412",
               a=GENERATOR)
            ev.append((tb, f"{GENERATOR}   File \"/app/harbor/trial/trial.py\", line 233, in run"))
            ev.append((tb, f"{GENERATOR}     await self._verify()"))
            ev.append((tb, f"{GENERATOR} harbor.trial.errors.VerifierTimeoutError: Verifier execution timed out after 600.0 seconds"))
            lg(tb, "Batch generation complete: 31/32 successful, 1 failed instances, 1 masked (excluded from baseline)",
               level="WARNING", where="terminal_bench.terminal_bench_generator:generate:501", a=GENERATOR)
            lg(tb, "Exception breakdown: {'VerifierTimeoutError': 1}", level="WARNING",
               where="terminal_bench.terminal_bench_generator:generate:503", a=GENERATOR)
        else:
            lg(t + 2 + gen, "Batch generation complete: 32/32 successful, 0 failed instances, 0 masked",
               where="terminal_bench.terminal_bench_generator:generate:501", a=GENERATOR)
        cur = t + 3 + gen
        for phase, lo, hi in (("fwd_logprobs_values_reward", 10, 20), ("compute_advantages_and_returns", 1, 3),
                              ("policy_train", 25, 35), ("sync_weights", 5, 8)):
            lg(cur, f"Started: '{phase}'", where="skyrl_train.utils.timer:__enter__:35")
            cost = rng.uniform(lo, hi)
            cur += cost
            if phase == "sync_weights":
                lg(cur - 1, "finish_weight_reload: 8 engines updated", where="skyrl_train.weight_sync:reload:77")
            lg(cur, f"Finished: '{phase}', time cost: {cost:.2f}s", where="skyrl_train.utils.timer:__exit__:41")
        cost = cur - t
        lg(cur, f"Finished: 'step', time cost: {cost:.2f}s", where="skyrl_train.utils.timer:__exit__:41")
        lg(cur + 0.5, f"WANDB_MIRROR kind=train step={step} metrics={json.dumps(_metrics(step, rng), sort_keys=True)}",
           where="skyrl_train.trainer:_log_metrics_stdout:1951")
        lg(cur + 0.6, f"Training Step Progress: {step} / {total + 100}")
        t += STEP_S
    ev.sort(key=lambda x: x[0])
    return ev


# ----------------------------------------------------------------------------- files
def _write_log(path: Path, nbytes: int, mix, seed: int, t_start: float, t_end: float,
               events: list[tuple[float, str]], prefix: str | None = None, engine: int = 0) -> int:
    rng = random.Random(seed)
    templates = [Template([mix(rng, prefix, engine) for _ in range(CHUNK_LINES)]) for _ in range(TEMPLATES)]
    avg = sum(t.nbytes for t in templates) / len(templates)
    n_chunks = max(1, round(nbytes / avg))
    dur = (t_end - t_start) / n_chunks
    clock = Clock()
    ei = 0
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n", buffering=16 * 1024 * 1024) as out:
        for c in range(n_chunks):
            a = t_start + c * dur
            b = a + dur
            text = _render(templates[(c * 7 + seed) % TEMPLATES], clock, a, dur)
            if ei < len(events) and events[ei][0] < b:
                parts = []
                pos = 0
                while ei < len(events) and events[ei][0] < b:
                    et, line = events[ei]
                    cut = int(len(text) * max(0.0, (et - a) / dur))
                    nl = text.find("\n", max(pos, cut))
                    cut = len(text) if nl < 0 else nl + 1
                    parts.append(text[pos:cut])
                    parts.append(line + "\n")
                    pos = cut
                    ei += 1
                parts.append(text[pos:])
                text = "".join(parts)
            written += out.write(text)
        for et, line in events[ei:]:
            written += out.write(line + "\n")
    return written


def _manifest(root: Path, t_start: float) -> dict:
    trials_dir = f"s3://marin-us-east-02a/tmp/ttl=14d/{JOB}/trace_jobs"
    entry = ["python", "-m", "marin_skyrl.launch", "--gpu", "H100", "--nodes", "4",
             "trainer.policy.model.path=Qwen/Qwen3-8B", f"terminal_bench_config.trials_dir={trials_dir}",
             "generator.num_inference_engines=8", "generator.inference_engine_tensor_parallel_size=4",
             "trainer.algorithm.use_tis=true", "generator.n_concurrent_trials=256", f"trainer.run_name={JOB}"]
    return {"bundle_format": 1, "cluster": CLUSTER, "job_id": f"/{USER}/{JOB}", "kind": "rl",
            "bundle_directory": str(root), "job_directory": str(root),
            "job": {"cluster": {"name": CLUSTER, "kubeconfig": "/home/bench/.kube/coreweave-iris", "context": "marin-gpu_US-EAST-02A"},
                    "job_id": f"/{USER}/{JOB}", "state": "running", "submitted_at_ms": int(t_start * 1000) - 60_000,
                    "entrypoint": json.dumps({"argv": entry}, separators=(",", ":")), "dataset": "terminal-bench-2",
                    "finished_at_ms": None, "task_state": "running"},
            "trials_uri": trials_dir, "synced_at": SYNCED_AT.isoformat(), "max_non_log_bytes": 104857600,
            "trace_sync_limit": 500,
            "artifacts": {"finelog": "many lines", "pod_logs": f"{len(PODS)} pod(s), {len(PODS)} Running",
                          "ray_logs": "many files", "traces": "fleet all", "trace_started": None, "trace_completed": None,
                          "errors": [], "slurm_logs": "not applicable", "trace_selected": None}}


def generate_logs(root: Path, log_bytes: int, seed: int = 1, hours: float | None = None) -> dict:
    """``hours`` of job in ``log_bytes`` of logs (default: HOURS_PER_GIB per GiB)."""
    t_end = SYNCED_AT.timestamp() - 20.0
    t_start = t_end - 3600.0 * (hours if hours is not None else HOURS_PER_GIB * (log_bytes / GIB))
    trainer_prefixed = _trainer_events(t_start, t_end, seed, prefixed=True)
    finelog_events = [(t, line if line.startswith("task=") else f"task=/{USER}/{JOB}/0 | {line}") for t, line in trainer_prefixed]
    shares = {"finelog": 0.42, "head": 0.14, "pods": 0.14, "workers": 0.27, "raylet": 0.03}
    sizes: dict[str, int] = {}
    sizes["finelog.log"] = _write_log(root / "finelog.log", int(log_bytes * shares["finelog"]), _finelog_mix, seed, t_start, t_end,
                                      finelog_events)
    (root / "finelog.stderr").write_text("")
    rel = f"pod_logs/{PODS[0]}.log"
    sizes[rel] = _write_log(root / rel, int(log_bytes * shares["head"]), _mix_trainer, seed + 1, t_start, t_end, trainer_prefixed)
    for i, pod in enumerate(PODS[1:], start=1):
        rel = f"pod_logs/{pod}.log"
        sizes[rel] = _write_log(root / rel, int(log_bytes * shares["pods"] / (len(PODS) - 1)), _mix_pod, seed + 10 + i,
                                t_start, t_end, [], prefix=_engine_prefix(i, 0))
    n_worker_files = len(PODS) * ENGINES_PER_POD * 2
    for i, pod in enumerate(PODS):
        base = root / "ray_vllm_logs" / pod
        for e in range(ENGINES_PER_POD):
            wid = f"{(seed * 7919 + i * 31 + e) & 0xffffffff:08x}" * 7
            for ext in ("err", "out"):
                rel = f"ray_vllm_logs/{pod}/worker-{wid}-01000000-{3100 + 17 * i + e}.{ext}"
                share = 0.85 if ext == "err" else 0.15
                sizes[rel] = _write_log(root / rel, int(log_bytes * shares["workers"] * share * 2 / n_worker_files), _mix_worker,
                                        seed + 100 + i * 10 + e + (ext == "out"), t_start, t_end, [], engine=e)
        rel = f"ray_vllm_logs/{pod}/raylet.out"
        sizes[rel] = _write_log(root / rel, int(log_bytes * shares["raylet"] / len(PODS)), _mix_raylet, seed + 200 + i,
                                t_start, t_end, [])
        (base / "gcs_server.out").write_text("[2026-08-01 00:00:00,000 I 10 10] (gcs_server) gcs_server.cc:300: GCS started\n")
        (base / ".ray-vllm-sync-manifest.json").write_text(json.dumps({"version": 1, "files": {}}))
    return {"t_start": t_start, "t_end": t_end, "sizes": sizes}


def _finelog_mix(rng, prefix, engine):
    return f"task=/{USER}/{JOB}/0 | " + _mix_trainer(rng, prefix, engine)


# ----------------------------------------------------------------------------- trials
_TURNS = (
    "I'll start by reading the test file to understand what the function should return for empty input.",
    "The failing case is in the parser: it drops the last token when the line has no trailing newline.",
    "Let me look at the error output again; the assertion compares a list of three items with two.",
    "I will add a guard for the final token and rerun only the parser tests to check the fix quickly.",
    "Two tests still fail because the fixture writes Windows line endings, so I should strip carriage returns.",
    "Now the parser tests pass. Next I run the whole suite to make sure nothing else regressed.",
    "One integration test times out; it waits on a socket that the sandbox does not allow, which is unrelated.",
    "I will mark that dependency as optional in the config and keep the original behaviour for real runs.",
    "Checking the diff: the change touches only the tokenizer and its tests, which is what the task asked for.",
    "Running the linter shows an unused import that I introduced, so I remove it before finishing.",
    "Everything passes locally now, including the flaky case I reproduced with a fixed random seed.",
    "Summary: the parser keeps the last token, line endings are normalised, and the tests cover both cases.",
)


def _trial_templates(trials_dir: str) -> dict:
    """indent=4 JSON texts (Harbor's ``model_dump_json(indent=4)``) with @@FIELD@@ slots, rendered once."""
    def q(k):
        return f"@@{k}@@"
    config = {"trial_name": q("name"), "task": {"path": q("taskpath"), "git_url": None},
              "agent": {"name": "terminus-2", "model_name": "hosted_vllm/policy",
                        "kwargs": {"api_base": "http://10.1.0.11:8000/v1", "max_turns": 40, "temperature": 1.0}},
              "environment": {"type": "daytona", "cpus": 2, "memory_mb": 4096, "storage_mb": 10240, "force_build": False},
              "verifier": {"timeout_sec": 600.0}, "timeout_multiplier": 1.0, "trials_dir": trials_dir, "job_id": q("jobid")}
    out = {"config": json.dumps(config, indent=4)}
    for variant in ("ok", "exc", "exc_noreward"):
        result = {"id": q("id"), "task_name": q("taskpath"), "trial_name": q("name"), "trial_uri": q("uri"),
                  "task_id": {"path": q("taskpath")}, "source": "terminal-bench", "task_checksum": q("checksum"),
                  "config": config,
                  "agent_info": {"name": "terminus-2", "version": "2.0.0", "model_info": {"name": "policy", "provider": "hosted_vllm"}},
                  "agent_result": {"n_input_tokens": q("n_in"), "n_cache_tokens": q("n_cache"), "n_output_tokens": q("n_out"),
                                   "cost_usd": None, "rollout_details": q("rollout"),
                                   "metadata": {"n_episodes": q("episodes"), "summarization_count": 0,
                                                "api_request_times_msec": q("api")}},
                  "verifier_result": None if variant == "exc_noreward" else {"rewards": {"reward": q("reward")}},
                  "exception_info": None if variant == "ok" else {"exception_type": q("exc_type"), "exception_message": q("exc_msg"),
                                                                   "exception_traceback": q("exc_tb"), "occurred_at": q("t_exc")},
                  "started_at": q("t0"), "finished_at": q("t_end"),
                  "environment_setup": {"started_at": q("t0"), "finished_at": q("t21")},
                  "agent_setup": {"started_at": q("t21"), "finished_at": q("t30")},
                  "agent_execution": {"started_at": q("t30"), "finished_at": q("t_exec")},
                  "verifier": {"started_at": q("t_exec"), "finished_at": q("t_ver")}}
        out[variant] = json.dumps(result, indent=4)
    return out


_SLOT = re.compile(r'"@@([a-z_0-9]+)@@"|@@([a-z_0-9]+)@@')


def _fill(template: str, values: dict) -> str:
    """Quoted slots take JSON values (already serialized); bare slots inside strings take raw text."""
    return _SLOT.sub(lambda m: values[m.group(1)] if m.group(1) else values[m.group(2)], template)


def generate_trials(root: Path, n: int, t_start: float, t_end: float, seed: int = 1) -> int:
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(seed * 1000003 + n)
    trace = root / "trace_jobs"
    trace.mkdir(parents=True, exist_ok=True)
    alphabet = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    tpl = _trial_templates(f"s3://marin-us-east-02a/tmp/ttl=14d/{JOB}/trace_jobs")
    big_rollout = json.dumps([{"logprobs": [round(-0.001 * k, 4) for k in range(60000)]} for _ in range(4)])
    span = max(60.0, t_end - t_start - 1200)     # starts from t_start + 900 s to t_end - 300 s
    total = 0

    def write(job):
        d, files = job
        os.mkdir(d)
        if "agent/trajectory.json" in files:
            os.mkdir(os.path.join(d, "agent"))
        for rel, text in files.items():
            with open(os.path.join(d, rel), "w", encoding="utf-8") as fh:
                fh.write(text)

    def jobs():
        nonlocal total
        for i in range(n):
            task = TASKS[i % len(TASKS)]
            name = f"{task}__{''.join(rng.choice(alphabet) for _ in range(7))}{i:06d}"
            s = t_start + 900 + span * i / n
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s))

            def at(off: float) -> str:
                return json.dumps(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s + off)) + ".000Z")

            v = {"name": json.dumps(name), "taskpath": json.dumps(f"terminal-bench/{task}"), "jobid": json.dumps(f"{rng.getrandbits(128):032x}")}
            files = {"config.json": _fill(tpl["config"], v)}
            if s > t_end - RUNNING_S or i == n - 1:    # started in the last ~20 minutes: still running (config only)
                total += len(files["config.json"])
                yield str(trace / name), files
                continue
            exc = None
            r = rng.random()
            if r < 0.04:
                exc = ("AgentTimeoutError", "Agent execution timed out after 900.0 seconds")
            elif r < 0.05:
                exc = ("VerifierTimeoutError", "Verifier execution timed out after 600.0 seconds")
            reward = None if exc and exc[0] == "VerifierTimeoutError" else (1.0 if rng.random() < 0.42 else 0.0)
            episodes = rng.randint(3, 40)
            a_exec = rng.uniform(120, 880)
            v.update(id=json.dumps(f"{rng.getrandbits(128):032x}"), uri=json.dumps(f"file:///app/jobs/{JOB}/{name}"),
                     checksum=json.dumps(f"{rng.getrandbits(256):064x}"), n_in=str(rng.randint(20000, 400000)),
                     n_cache=str(rng.randint(0, 300000)), n_out=str(rng.randint(500, 20000)),
                     rollout=big_rollout if i % 4000 == 1234 else "null",     # a few huge result.json (logprobs)
                     episodes=str(episodes), api=json.dumps([800 + (j * 37) % 900 for j in range(episodes)]),
                     reward=json.dumps(reward), t0=json.dumps(f"{stamp}.{i % 1000:03d}Z"), t_end=at(a_exec + 70),
                     t21=at(21), t30=at(30), t_exec=at(30 + a_exec), t_ver=at(a_exec + 69), t_exc=at(a_exec))
            if exc:
                v.update(exc_type=json.dumps(exc[0]), exc_msg=json.dumps(exc[1]),
                         exc_tb=json.dumps(f"Traceback (most recent call last):\n  ...\n{exc[0]}: {exc[1]}"))
            variant = "ok" if exc is None else ("exc_noreward" if reward is None else "exc")
            files["result.json"] = _fill(tpl[variant], v)
            if exc is not None:
                files["exception.txt"] = (f"Traceback (most recent call last):\n  File \"/app/harbor/trial/trial.py\", "
                                          f"line 233, in run\n    await self._execute()\n{exc[0]}: {exc[1]}\n")
            if i % 10 == 0:
                msgs = [_TURNS[(i // 10 + k) % len(_TURNS)] for k in range(min(episodes, 12))]
                steps = [{"step_id": 0, "source": "system", "message": "You are an agent."},
                         {"step_id": 1, "source": "user", "message": f"Solve the task {task}."}]
                for k, m in enumerate(msgs):
                    steps.append({"step_id": 2 + 2 * k, "source": "agent", "message": m,
                                  "tool_calls": [{"function_name": "bash", "arguments": {"command": "pytest -q"}}]})
                    steps.append({"step_id": 3 + 2 * k, "source": "user", "observation": {"results": [{"content": "1 failed"}]}})
                files["agent/trajectory.json"] = json.dumps(
                    {"schema_version": "ATIF-v1.7", "agent": {"name": "terminus-2", "model_name": "policy"}, "steps": steps})
            total += sum(len(t) for t in files.values())
            yield str(trace / name), files

    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in pool.map(write, jobs(), chunksize=256):
            pass
    (trace / "sync_selection.json").write_text(json.dumps({"mode": "fleet all", "selected": n}))
    (trace / "skipped_objects.json").write_text("[]")
    return total


def bundle_dir(workdir: Path, tag: str) -> Path:
    return workdir / tag / "jobs" / CLUSTER / USER / JOB


def generate(workdir: Path, tag: str, log_bytes: int, trials: int, seed: int = 1,
             hours: float | None = None) -> tuple[Path, dict]:
    """Generate (or reuse, when the same parameters were generated before) one bundle."""
    root = bundle_dir(workdir, tag)
    stamp = workdir / tag / "generated.json"
    params = {"log_bytes": log_bytes, "trials": trials, "seed": seed, "generator": 7}
    if hours is not None:
        params["hours"] = hours
    if stamp.exists():
        try:
            info = json.loads(stamp.read_text())
            if info.get("params") == params:
                return root, info
        except ValueError:
            pass
    import shutil
    if (workdir / tag).exists():
        shutil.rmtree(workdir / tag)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    logs = generate_logs(root, log_bytes, seed, hours)
    t1 = time.perf_counter()
    trial_bytes = generate_trials(root, trials, logs["t_start"], logs["t_end"], seed)
    t2 = time.perf_counter()
    (root / "manifest.json").write_text(json.dumps(_manifest(root, logs["t_start"]), indent=2, sort_keys=True, default=str))
    info = {"params": params, "log_bytes": sum(logs["sizes"].values()), "log_files": len(logs["sizes"]),
            "trial_bytes": trial_bytes, "gen_logs_s": round(t1 - t0, 1), "gen_trials_s": round(t2 - t1, 1)}
    stamp.write_text(json.dumps(info, indent=2))
    return root, info
