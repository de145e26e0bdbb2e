"""GPU type from every source (names -> classes through rules/tables/gpu_names.csv, precedence,
disagreement) and agent stop reasons from trial artifacts (field aliases, exception fallback)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhealth.catalog import load_catalog
from rlhealth.observers import observe
from rlhealth.observers.trials import stop_reasons
from rlhealth.probes.bundle import read_bundle
from rlhealth.probes.parse.kubernetes import gpu_label_sightings
from rlhealth.probes.parse.nvidia_smi import gpu_class, gpu_class_or_none, gpu_name_from_line, parse_gpu_inventory
from rlhealth.probes.parse.trials import summarize_trials

LABEL_KEYS = ["nvidia.com/gpu.product", "gpu.nvidia.com/class", "gpu.nvidia.com/model"]


@pytest.mark.parametrize("name, cls", [
    ("NVIDIA H100 80GB HBM3", "H100-80GB-SXM"), ("NVIDIA-H100-80GB-HBM3", "H100-80GB-SXM"),
    ("H100_NVLINK_80GB", "H100-80GB-SXM"), ("NVIDIA H100 PCIe", "H100-80GB-PCIE"), ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    ("NVIDIA GH200 480GB", "GH200-96GB"), ("NVIDIA GH200 144G HBM3e", "GH200-144GB"), ("NVIDIA-H200", "H200-141GB"),
    ("H200_NVLINK_141GB", "H200-141GB"), ("NVIDIA B200", "B200-180GB"), ("NVIDIA GB200", "GB200-186GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("h100", "H100-80GB-SXM")])
def test_gpu_names_map_to_bandwidth_table_classes(name, cls):
    assert gpu_class(name) == cls
    assert cls in {row["gpu"] for row in load_catalog().hbm_bandwidth}


def test_unknown_gpu_name_is_kept_as_written():
    assert gpu_class_or_none("NVIDIA L40S") is None
    assert gpu_class("NVIDIA L40S") == "NVIDIA L40S"


@pytest.mark.parametrize("line, name", [
    ("|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |", "NVIDIA H100 80GB HBM3"),
    ("(task pid=7) GPU 3: NVIDIA A100-SXM4-80GB (UUID: GPU-5c1b7e2a-0000)", "NVIDIA A100-SXM4-80GB"),
    ("| N/A   31C    P0             70W /  700W |       1MiB /  81559MiB |      0%      Default |", None),
    ("GPU 0 has a total capacity of 79.19 GiB", None)])
def test_gpu_name_from_nvidia_smi_lines(line, name):
    assert gpu_name_from_line(line) == name


def test_inventory_rows_carry_their_line():
    rows = parse_gpu_inventory("garbage\n0, GPU-a, NVIDIA H200\n1, GPU-b, NVIDIA H200\n")
    assert [(r["line"], r["name"]) for r in rows] == [(2, "NVIDIA H200"), (3, "NVIDIA H200")]


def test_gpu_labels_from_node_selector_affinity_and_nodes_pretty_and_compact():
    doc = {"items": [{"kind": "Pod", "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "kubernetes.io/arch": "amd64"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu.nvidia.com/class", "operator": "In", "values": ["H100_NVLINK_80GB"]},
                                  {"key": "gpu.nvidia.com/class", "operator": "NotIn", "values": ["A100_NVLINK"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [
                {"key": "gpu.nvidia.com/class", "operator": "In", "values": ["B200"]}]}}]}}}},
        {"kind": "Node", "metadata": {"labels": {"gpu.nvidia.com/model": "H100"}}}]}
    pretty = json.dumps(doc, indent=2, sort_keys=True)
    found = gpu_label_sightings(pretty, LABEL_KEYS)
    assert [(k, v) for _, k, v in found] == [("gpu.nvidia.com/class", "H100_NVLINK_80GB"),
                                            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
                                            ("gpu.nvidia.com/model", "H100")]
    lines = pretty.splitlines()
    assert all(v in lines[line - 1] for line, _, v in found)
    assert sorted(v for _, _, v in gpu_label_sightings(json.dumps(doc), LABEL_KEYS)) == sorted(v for _, _, v in found)
    assert gpu_label_sightings(pretty, []) == []
    assert gpu_label_sightings("{not json", LABEL_KEYS) == []


def _standard_bundle(root: Path, *, selector: str | None, inventory: str | None, log: str | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"job_id": "/a/b", "cluster": "c", "synced_at": "2026-08-01T12:00:00Z",
                                                    "job": {"state": "running", "entrypoint": "python train.py"}}))
    cap = root / "rlhealth" / "captures" / "20260801T120100Z"
    cap.mkdir(parents=True)
    (cap / "capture.json").write_text(json.dumps({"format": 1, "captured_at": "2026-08-01T12:01:00Z", "probes": []}))
    pods = {"items": [{"metadata": {"name": "p-0"}, "spec": {"nodeSelector": {"nvidia.com/gpu.product": selector}}}]} \
        if selector else {"items": []}
    (cap / "pods.json").write_text(json.dumps(pods, indent=2, sort_keys=True))
    if inventory:
        (cap / "raw" / "exec" / "p-0").mkdir(parents=True)
        (cap / "raw" / "exec" / "p-0" / "nvidia-smi.inventory.csv").write_text(f"0, GPU-a, {inventory}\n")
    if log:
        (root / "finelog.log").write_text(log)
    return root


def _gpu_type(root: Path):
    read = read_bundle(root, load_catalog())
    obs = observe(read, load_catalog(), now=1785585700.0, max_age_s=1800)
    return next((f for f in obs.facts if f.kind == "gpu_type"), None), obs.job


def test_gpu_from_node_label_only(tmp_path):
    fact, job = _gpu_type(_standard_bundle(tmp_path / "b", selector="NVIDIA-H200", inventory=None))
    assert (fact.gpu, fact.source_kind, fact.device_classes, fact.disagreement) == ("H200-141GB", "node_label", 1, None)
    assert fact.evidence[0].source.endswith("pods.json") and "NVIDIA-H200" in fact.evidence[0].text
    assert job["gpu"] == "H200-141GB" and "pods.json:" in job["gpu_source"]


def test_gpu_from_nvidia_smi_log_line_only(tmp_path):
    log = "|   0  NVIDIA B200                    On  |   00000000:18:00.0 Off |                    0 |\n"
    fact, job = _gpu_type(_standard_bundle(tmp_path / "b", selector=None, inventory=None, log=log))
    assert (fact.gpu, fact.source_kind) == ("B200-180GB", "nvidia_smi")
    assert (fact.evidence[0].source, fact.evidence[0].line) == ("finelog.log", 1)


def test_nvidia_smi_wins_and_a_disagreement_is_measured(tmp_path):
    fact, job = _gpu_type(_standard_bundle(tmp_path / "b", selector="NVIDIA-H100-80GB-HBM3", inventory="NVIDIA A100-SXM4-80GB"))
    assert (fact.gpu, fact.source_kind, fact.device_classes) == ("A100-80GB", "nvidia_smi", 2)
    assert "names A100-80GB" in fact.disagreement and "names H100-80GB-SXM" in fact.disagreement
    assert job["gpu_classes"] == "A100-80GB,H100-80GB-SXM"


def test_agreeing_sources_are_no_disagreement(tmp_path):
    fact, job = _gpu_type(_standard_bundle(tmp_path / "b", selector="NVIDIA-H100-80GB-HBM3", inventory="NVIDIA H100 80GB HBM3"))
    assert (fact.gpu, fact.kinds_named, fact.device_classes, fact.disagreement) == ("H100-80GB-SXM", 2, 1, None)
    assert job["gpu_classes"] is None


def test_no_gpu_anywhere_adds_no_gpu_type(tmp_path):
    fact, job = _gpu_type(_standard_bundle(tmp_path / "b", selector=None, inventory=None))
    assert fact is None and job["gpu"] is None


# ---------------------------------------------------------------- agent stop reasons
def _trial(root: Path, name: str, result: dict | str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "result.json").write_text(result if isinstance(result, str) else json.dumps(result, indent=2))


def test_stop_reason_fields_exception_fallback_and_mapping(tmp_path):
    root = tmp_path / "trace_jobs"
    _trial(root, "t1", {"agent_result": {"metadata": {"stop_reason": "max_turns"}}, "exception_info": None})
    _trial(root, "t2", {"agent_result": {"metadata": {"finish_reason": "Max Turns Exceeded"}}})
    _trial(root, "t3", {"failure_mode": "agent_timeout"})
    _trial(root, "t4", {"exception_info": {"exception_type": "AgentTimeoutError"}})
    _trial(root, "t5", {"exception_info": {"exception_type": "DaytonaValidationError"}})
    _trial(root, "t6", {"verifier_result": {"rewards": {"reward": 1.0}}})
    _trial(root, "t7", {"agent_result": {"metadata": {"exit_reason": "something_new"}}})
    summary = summarize_trials(root, {}, 0, workers=1)
    assert sum(summary.stop_reasons.values()) == 7
    fact = stop_reasons(summary, load_catalog().trial_exceptions["stop_reasons"])
    assert (fact.finished, fact.recorded, fact.top, fact.top_count) == (7, 4, "max_turns", 2)
    assert fact.mix == ("max_turns 2 (29%), timeout 2 (29%), ended_without_exception 1 (14%), "
                        "exception:DaytonaValidationError 1 (14%), something_new 1 (14%)")
    assert fact.fix and "max turns" in fact.fix
    assert fact.evidence[0].source == "trace_jobs/t2/result.json" and fact.evidence[0].summary   # first by field value


def test_stop_reason_from_a_huge_result_read_by_its_edges(tmp_path, monkeypatch):
    import rlhealth.probes.parse.trials as trials
    monkeypatch.setattr(trials, "RESULT_FULL_READ_BYTES", 64)
    root = tmp_path / "trace_jobs"
    _trial(root, "t1", '{"agent_result": {"metadata": {"stop_reason": "context_length_exceeded"}}, "pad": "' + "x" * 200 + '"}')
    summary = summarize_trials(root, {}, 0, workers=1)
    assert summary.stop_reasons == {("context_length_exceeded", None): 1}


def test_no_finished_trial_has_no_stop_reasons(tmp_path):
    root = tmp_path / "trace_jobs"
    (root / "t1").mkdir(parents=True)
    (root / "t1" / "config.json").write_text("{}")
    assert stop_reasons(summarize_trials(root, {}, 0, workers=1), {}) is None


@pytest.mark.parametrize("text", [
    "", "not json", "[1, 2]", '{"items": {"a": 1}}', '{"items": [1, "x", null]}',
    '{"items": [{"kind": "Node", "metadata": ["labels"]}]}',
    '{"items": [{"spec": {"nodeSelector": ["x"], "affinity": ["nodeAffinity"]}}]}',
    '{"items": [{"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":'
    ' {"nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",'
    ' "values": {"0": "H100"}}]}]}}}}}]}',
    "[" * 100_000 + "]" * 100_000,
])
def test_hostile_pod_and_node_lists_yield_no_gpu_label(text):
    assert gpu_label_sightings(text, LABEL_KEYS) == []


def test_gpu_label_line_is_counted_by_newlines_as_quotes_are_read():
    text = ('{"items": [{"kind": "Node",\r"metadata": {"labels": {\r"nvidia.com/gpu.product":\n'
            '"NVIDIA-H100-80GB-HBM3"}}}]}')
    assert gpu_label_sightings(text, LABEL_KEYS) == [(2, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")]
