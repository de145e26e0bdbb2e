"""Line builders in the real formats of every log source, by version (reference: log-formats.md,
marin-artifacts.md). Used only to (re)generate the committed incident bundles."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 8, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def loguru(t: datetime, msg: str, level: str = "INFO", where: str = "skyrl_train.trainer:train:412", actor: str | None = None) -> str:
    line = f"{t.strftime('%Y-%m-%d %H:%M:%S')}.{t.microsecond // 1000:03d} | {level:<8} | {where} - {msg}"
    return f"({actor}) {line}" if actor else line


def wandb(t: datetime, step: int, metrics: dict, actor: str | None = "skyrl_entrypoint pid=4120") -> str:
    payload = dict(metrics)
    payload.setdefault("trainer/global_step", step)
    return loguru(t, f"WANDB_MIRROR kind=train step={step} metrics={json.dumps(payload, sort_keys=True)}",
                  where="skyrl_train.trainer:_log_metrics_stdout:1951", actor=actor)


def dict_block(t: datetime, step: int, metrics: dict) -> list[str]:
    """SkyRL console logger: 'Step N:' then a pprint-wrapped dict, floats quoted, keys sorted."""
    items = {k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in metrics.items()}
    items["trainer/global_step"] = step
    keys = sorted(items)
    if not keys[0].startswith("async/"):
        items["async/staleness_max"] = 0
        keys = sorted(items)
    out = [loguru(t, f"Step {step}: ", where="skyrl.train.utils.tracking:log:189")]
    for i, k in enumerate(keys):
        v = items[k]
        val = f"'{v}'" if isinstance(v, str) else str(v)
        prefix = "{" if i == 0 else " "
        suffix = "}" if i == len(keys) - 1 else ","
        out.append(f"{prefix}'{k}': {val}{suffix}")
    return out


def phase(t: datetime, what: str, name: str, cost: float | None = None) -> str:
    msg = f"{what}: '{name}'" + (f", time cost: {cost:.2f}s" if cost is not None else "")
    return loguru(t, msg, where="skyrl_train.utils.timer:__exit__:41")


def step_progress(t: datetime, n: int, m: int) -> str:
    return loguru(t, f"Training Step Progress: {n} / {m}")


def vllm_stats(t: datetime, era: str, gen: float, running: int, waiting: int, engine: int = 0, pid: int = 2871,
               ip: str = "10.1.2.3", kv: float = 37.5) -> str:
    stamp = t.strftime("%m-%d %H:%M:%S")
    if era == "v0":
        return (f"INFO {stamp} metrics.py:351] Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
                f"Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.")
    if era == "v1-early":
        return (f"(AsyncVLLMInferenceEngine pid={pid}, ip={ip}) INFO {stamp} [loggers.py:111] Avg prompt throughput: 812.4 tokens/s, "
                f"Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs ")
    extra = ", MM cache hit rate: 0.0%" if era == "v1-2026" else ""
    return (f"(AsyncVLLMInferenceEngine pid={pid}, ip={ip}) INFO {stamp} [loggers.py:259] Engine {engine:03d}: Avg prompt throughput: 812.4 tokens/s, "
            f"Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
            f"GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 61.2%{extra}")


def glog(t: datetime, sev: str, rank: int | None, file_line: str, msg: str) -> str:
    stamp = f"{sev}{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d}123"
    pre = f"[rank{rank}]:" if rank is not None else ""
    return f"{pre}[{stamp} {file_line}] {msg}"


def healthy_metrics(step: int, reward: float | None = None) -> dict:
    r = reward if reward is not None else round(0.18 + 0.015 * step, 4)
    return {"policy/policy_entropy": round(1.2 - 0.01 * step, 4), "policy/policy_loss": -0.0031,
            "policy/raw_grad_norm": 0.061, "reward/avg_raw_reward": r, "policy/tis/imp_ratio_mean": 0.97,
            "policy/log_ratio_abs_max": 0.42, "generate/avg_num_tokens": 1843.25, "timing/step": 600.0,
            "timing/generate": 420.5, "timing/policy_train": 120.2, "timing/sync_weights": 14.1}


def result_json(name: str, reward: float | None, start: datetime, exception: str | None = None, turns: int = 7,
                message: str = "") -> dict:
    def block(a, b):
        return {"started_at": iso(start + timedelta(seconds=a)), "finished_at": iso(start + timedelta(seconds=b))}
    return {"task_name": f"org/{name.split('__')[0]}", "trial_name": name, "started_at": iso(start),
            "finished_at": iso(start + timedelta(seconds=372)),
            "environment_setup": block(0, 21), "agent_setup": block(21, 30), "agent_execution": block(30, 350),
            "verifier": block(350, 371),
            "agent_result": {"n_input_tokens": 181234, "n_output_tokens": 5120,
                             "metadata": {"n_episodes": turns, "summarization_count": 0, "api_request_times_msec": [812, 1033]}},
            "config": {"agent": {"kwargs": {"api_base": "https://iris.oa.dev/proxy/t/FAKEFAKEFAKE/v1"}}},
            "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
            "exception_info": None if exception is None else {"exception_type": exception,
                                                              "exception_message": message, "occurred_at": iso(start)}}


COHERENT = ("I'll start by reading the test file to understand what the function should return. "
            "Then I will run the tests and fix the failing case in the parser. Let me check the file first.")


def salad(seed: int) -> str:
    frags = ["ertain", "\u0645\u0646", "Spl", "ifoundation", "\u0436\u0438\u0442", "\u6c34\u5e73", "oxid", "\u0928\u0939\u0940\u0902",
             "vertex", "\u3057\u307e\u3059", "\u05e9\u05dc\u05d5\u05dd", "ulously", "\u0e2a\u0e27\u0e31\u0e2a", "Tak", "\uac00\ub2e4"]
    out = []
    x = seed
    for _ in range(60):
        x = (x * 1103515245 + 12345) % (2 ** 31)
        a = frags[x % len(frags)]
        x = (x * 1103515245 + 12345) % (2 ** 31)
        b = frags[x % len(frags)]
        out.append(a + b if x % 3 else a)
    return " ".join(out)


def trajectory(messages: list[str]) -> dict:
    steps = [{"step_id": 0, "source": "system", "message": "You are an agent."},
             {"step_id": 1, "source": "user", "message": "Fix the failing test in parser.py"}]
    for i, m in enumerate(messages):
        steps.append({"step_id": 2 + 2 * i, "source": "agent", "message": m,
                      "tool_calls": [{"function_name": "bash", "arguments": {"command": "pytest -q tests/test_parser.py"}}]})
        steps.append({"step_id": 3 + 2 * i, "source": "user", "observation": {"results": [{"content": "1 failed"}]}})
    return {"schema_version": "ATIF-v1.7", "agent": {"name": "terminus-2", "model_name": "policy"}, "steps": steps}
