"""rlhealth.mode.classify_mode: agentic iff the configuration STRUCTURE has an agent-harness section."""
from __future__ import annotations

import json

import pytest

from rlhealth.mode import classify_mode, harness_evidence


@pytest.mark.parametrize("config", [
    {"terminal_bench_config": {"agent_api_base": "http://x"}},
    {"generator": {"harbor": {"n_concurrent_trials": 8}}},
    {"generator": {"sandbox_config": {}}},          # an empty section is still a section
    {"environment": {"Daytona": {"snapshot": "s"}}},  # case and - / _ do not matter
    {"trainer": {"trials_dir": "s3://b/x"}},
])
def test_harness_sections_are_agentic(config):
    mode, source = classify_mode(config, None)
    assert mode == "agentic" and "resolved configuration" in source


@pytest.mark.parametrize("config", [
    {"trainer": {"run_name": "harbor-terminal_bench-daytona-sandbox-agentic", "max_steps": 10}},
    {"trainer": {"policy": {"model": {"path": "org/TerminalBench-harbor-8B"}}}, "notes": ["sandbox", "harbor"]},
    {"generator": {"backend": "vllm", "name": "TerminalBenchGenerator"}},   # a value, not a section
    {"trials_dir_note": "a leaf key that merely starts with trials_dir"},
])
def test_values_never_classify(config):
    assert classify_mode(config, None)[0] == "standard"


def test_launch_text_flags_and_overrides():
    argv = ["python", "-m", "cloud.iris.training_driver", "trainer.run_name=harbor-agentic", "trainer.max_steps=5"]
    assert classify_mode(None, json.dumps({"argv": argv}))[0] == "standard"
    assert classify_mode(None, json.dumps({"argv": argv + ["--trials-dir", "s3://x"]})) == (
        "agentic", "agent-harness key(s) in the launch command: --trials-dir")
    assert classify_mode(None, "python train.py +generator.harbor.n_concurrent_trials=4")[0] == "agentic"
    assert classify_mode(None, "python train.py --run-name harbor")[0] == "standard"


def test_unknown_and_evidence_is_the_section():
    assert classify_mode(None, None)[0] == "unknown"
    assert classify_mode(None, "")[0] == "unknown"
    assert harness_evidence({"generator": {"harbor": {"a": 1, "b": {"c": 2}}}}, None) == ["generator.harbor"]
    assert classify_mode({}, None)[0] == "standard"
