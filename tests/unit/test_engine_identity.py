"""Engine identity: one engine per process however many files it logs to (finelog, pod logs, Ray
worker files), ambiguous matches kept apart, and num_inference_engines quoted from its line."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from rlhealth.catalog import load_catalog
from rlhealth.observers import observe
from rlhealth.probes.bundle import read_bundle

NOW = datetime(2026, 8, 1, 13, 0, tzinfo=timezone.utc)
CATALOG = load_catalog()


def stats(minute: int, prefix: str = "", engine: str = "Engine 000: ") -> str:
    return (f"{prefix}INFO 08-01 12:{minute:02d}:00 [loggers.py:259] {engine}Avg prompt throughput: 812.4 tokens/s, "
            f"Avg generation throughput: 2310.7 tokens/s, Running: 48 reqs, Waiting: 0 reqs, GPU KV cache usage: 37.5%, "
            f"Prefix cache hit rate: 61.2%")


def write(root: Path, rel: str, lines: list[str]) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def bundle(tmp_path: Path, files: dict[str, list[str]], *, entrypoint: str = "", pods: dict[str, str] | None = None) -> Path:
    root = tmp_path / "jobs" / "cw" / "alice" / "rl"
    manifest = {"bundle_format": 1, "cluster": "cw", "job_id": "/alice/rl", "synced_at": "2026-08-01T12:58:00Z",
                "job": {"state": "running", "entrypoint": entrypoint}, "artifacts": {"errors": []}}
    write(root, "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).splitlines())
    for rel, lines in files.items():
        write(root, rel, lines)
    if pods is not None:
        cap = "rlhealth/captures/20260801T125800Z"
        write(root, f"{cap}/capture.json", [json.dumps({"format": 1, "captured_at": "2026-08-01T12:58:00Z", "backend": "iris",
                                                        "cluster": "cw", "job_id": "/alice/rl", "probes": []})])
        items = [{"metadata": {"name": name}, "status": {"phase": "Running", "podIP": ip}} for name, ip in pods.items()]
        write(root, f"{cap}/pods.json", json.dumps({"items": items}, indent=2).splitlines())
    return root


def facts(root: Path):
    read = read_bundle(root, CATALOG, now_epoch=NOW.timestamp())
    obs = observe(read, CATALOG, now=NOW.timestamp(), max_age_s=1800.0, mode_override=None)
    by_kind: dict[str, list] = {}
    for fact in obs.facts:
        by_kind.setdefault(fact.kind, []).append(fact)
    return by_kind


def test_same_engine_in_finelog_and_pod_log_is_one_engine(tmp_path):
    line = [stats(m, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3) ") for m in (10, 20, 30)]
    f = facts(bundle(tmp_path, {"finelog.log": line, "pod_logs/pod-0.log": line}))
    engines = f["engines"][0]
    assert engines.seen == 1 and engines.present == 1
    assert engines.identities == "AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3"
    (engine,) = f["engine"]
    assert engine.samples == 3, "the same line read twice is one sample"
    assert engine.sources == "finelog.log, pod_logs/pod-0.log"


def test_ray_worker_file_joins_the_prefixed_engine_by_pod_ip(tmp_path):
    files = {"finelog.log": [stats(m, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.4) ") for m in (10, 20)]
             + [stats(m, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.5) ") for m in (10, 20)],
             "ray_vllm_logs/pod-1/worker-3f9a0c11-01000000-2871.out": [stats(m) for m in (10, 20, 30)]}
    f = facts(bundle(tmp_path, files, pods={"pod-0": "10.1.2.5", "pod-1": "10.1.2.4"}))
    assert f["engines"][0].seen == 2, "same pid on two hosts: two engines; the worker file joins the one on its pod's IP"
    merged = next(e for e in f["engine"] if "10.1.2.4" in e.identity)
    assert "ray_vllm_logs/pod-1/worker-3f9a0c11-01000000-2871.out" in merged.sources and merged.samples == 3


def test_worker_file_without_pod_ip_joins_a_unique_pid_and_stays_apart_when_ambiguous(tmp_path):
    unique = {"finelog.log": [stats(10, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.4) ")],
              "ray_vllm_logs/pod-1/worker-3f9a0c11-01000000-2871.out": [stats(20)]}
    assert facts(bundle(tmp_path / "a", unique))["engines"][0].seen == 1
    ambiguous = {"finelog.log": [stats(10, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.4) "),
                                 stats(10, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.5) ")],
                 "ray_vllm_logs/pod-1/worker-3f9a0c11-01000000-2871.out": [stats(20)]}
    assert facts(bundle(tmp_path / "b", ambiguous))["engines"][0].seen == 3, "an ambiguous match errs high, never low"


def test_prefix_without_ip_in_the_stream_joins_the_driver_pod_engine(tmp_path):
    local = [stats(m, "(AsyncVLLMInferenceEngine pid=3101) ") for m in (10, 20)]
    f = facts(bundle(tmp_path, {"finelog.log": local, "pod_logs/driver.log": local}, pods={"driver": "10.1.2.3"}))
    assert f["engines"][0].seen == 1
    assert f["engine"][0].identity == "AsyncVLLMInferenceEngine pid=3101, ip=10.1.2.3"


def test_standalone_servers_with_the_same_pid_in_two_pods_are_two_engines(tmp_path):
    files = {"pod_logs/vllm-a.log": [stats(10, "(APIServer pid=1) ")], "pod_logs/vllm-b.log": [stats(10, "(APIServer pid=1) ")]}
    f = facts(bundle(tmp_path, files))
    assert f["engines"][0].seen == 2
    assert sorted(e.identity for e in f["engine"]) == ["APIServer pid=1 on vllm-a", "APIServer pid=1 on vllm-b"]


def test_lines_without_process_identity_are_unattributed(tmp_path):
    v0 = [f"INFO 08-01 12:{m:02d}:00 metrics.py:351] Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: "
          f"1532.9 tokens/s, Running: 48 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 37.5%, CPU KV cache usage: 0.0%."
          for m in (10, 20)]
    f = facts(bundle(tmp_path, {"finelog.log": v0}))
    assert f["engines"][0].seen == 1 and f["engines"][0].unattributed_files == 1


def test_silent_engine_lag_is_measured_against_the_newest_stats_line(tmp_path):
    lines = [stats(m, f"(AsyncVLLMInferenceEngine pid={pid}, ip=10.1.2.3) ") for m in range(0, 50, 10) for pid in (1, 2)]
    lines += [stats(m, "(AsyncVLLMInferenceEngine pid=1, ip=10.1.2.3) ") for m in (50,)]
    f = facts(bundle(tmp_path, {"finelog.log": lines}))
    lags = {e.identity: e.lag_s for e in f["engine"]}
    assert lags == {"AsyncVLLMInferenceEngine pid=1, ip=10.1.2.3": 0.0, "AsyncVLLMInferenceEngine pid=2, ip=10.1.2.3": 600.0}
    silent = next(e for e in f["engine"] if e.lag_s)
    assert silent.evidence[0].text.startswith("(AsyncVLLMInferenceEngine pid=2, ip=10.1.2.3) INFO 08-01 12:40:00")


def test_configured_engines_quote_the_configuration_line(tmp_path):
    ep = json.dumps({"argv": ["python", "-m", "driver", "generator.num_inference_engines=4"]})
    f = facts(bundle(tmp_path, {"finelog.log": [stats(10, "(AsyncVLLMInferenceEngine pid=1, ip=10.1.2.3) ")]}, entrypoint=ep))
    (cfg,) = f["engines_configured"]
    assert cfg.expected == 4
    source, line = cfg.source.rsplit(":", 1)
    assert source == "manifest.json"
    text = (tmp_path / "jobs/cw/alice/rl/manifest.json").read_text().splitlines()[int(line) - 1]
    assert cfg.evidence[0].text == text.strip("\n") and "num_inference_engines=4" in text
    assert f["engines"][0].expected_engines == 4


def test_no_configured_count_no_configured_fact(tmp_path):
    f = facts(bundle(tmp_path, {"finelog.log": [stats(10, "(AsyncVLLMInferenceEngine pid=1, ip=10.1.2.3) ")]}))
    assert "engines_configured" not in f


def test_ray_deduplicated_stats_lines_are_counted(tmp_path):
    lines = [stats(10, "(AsyncVLLMInferenceEngine pid=1, ip=10.1.2.3) "),
             stats(20, "(AsyncVLLMInferenceEngine pid=1, ip=10.1.2.3) ") + " [repeated 3x across cluster]"]
    f = facts(bundle(tmp_path, {"finelog.log": lines}))
    assert f["engines"][0].deduplicated_lines == 1 and f["engines"][0].seen == 1


def test_engines_of_an_earlier_slurm_chain_leg_are_not_in_the_current_attempt(tmp_path):
    root = tmp_path / "jobs" / "jsc-jupiter" / "slurm" / "48402"
    manifest = {"bundle_format": 1, "cluster": "jsc-jupiter", "job_id": "/slurm/48402", "synced_at": "2026-08-01T12:58:00Z",
                "job": {"state": "running", "job_id": "48402", "entrypoint": "generator.num_inference_engines=1"},
                "artifacts": {"errors": []}}
    write(root, "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).splitlines())
    write(root, "slurm_logs/grpo_48401.out", [stats(m, "(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3) ") for m in (0, 5)])
    write(root, "finelog.log", [stats(m, "(AsyncVLLMInferenceEngine pid=3001, ip=10.1.2.3) ") for m in (30, 40, 50)])
    f = facts(root)
    assert f["engines"][0].seen == 2 and f["engines"][0].present == 1
    current = {e.identity: e.in_current_attempt for e in f["engine"]}
    assert current == {"AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3": False, "AsyncVLLMInferenceEngine pid=3001, ip=10.1.2.3": True}
