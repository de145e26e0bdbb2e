"""The watcher's manifest and sync files read as scripts/iris/watch_coreweave_rl.py writes them
(facts from MarinSkyRL's watcher and its tests; our own fixtures)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhealth.probes import manifest as m
from rlhealth.probes.bundle import BundleRead

PROXY = ('<!doctype html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1>'
         '<script>alert(1)</script>token=hf_abcdefghijklmnopqrstuvwxyz</body></html>')


def _problems(errors, finelog="12,345 lines"):
    return m.artifact_problems({"artifacts": {"finelog": finelog, "errors": errors}})


@pytest.mark.parametrize("entry,gate,what,artifact", [
    ("finelog: iris job logs exited 1", "liveness", "the finelog", None),
    ("pod discovery: Unauthorized", "liveness", "the pod logs", None),
    ("iris-alice-x-0-1a2b-0 stdout: container task not found", "liveness", "the pod logs", None),
    ("iris-alice-x-0-1a2b-0 Ray/vLLM: Could not archive Ray/vLLM logs (exit=1)", "liveness", "the Ray/vLLM logs", "engine_logs"),
    ("Ray logs: rsync error: some files could not be transferred (code 23)", "liveness", "the Ray/vLLM logs", "engine_logs"),
    ("Slurm logs: rsync: connection unexpectedly closed", "liveness", "the Slurm logs", None),
    ("trace sync: An error occurred (AccessDenied) when calling ListObjectsV2", "rollouts", "the trial traces", None),
    ("trace task-1__Ab3: rsync: [sender] write error: Broken pipe", "rollouts", "the trial traces", None),
    ("TimeoutExpired: Command '['iris', 'job', 'logs']' timed out after 900 seconds", "all", "the watcher's sync", None),
])
def test_each_watcher_error_form_names_its_artifact_and_gate(entry, gate, what, artifact):
    (p,) = _problems([entry])
    assert (p.gate, p.artifact) == (gate, artifact) and what in p.reason and p.source == "manifest.json"


def test_an_unknown_artifact_is_listed_without_a_gate():
    (p,) = _problems(["budget: no budget set"])
    assert p.gate == "none"


def test_the_legacy_dict_form_still_reads():
    (p,) = _problems([{"artifact": "trace_jobs", "error": "R2 list failed: 403 AccessDenied"}])
    assert p.gate == "rollouts" and "403 AccessDenied" in p.reason


def test_an_html_error_body_is_summarised_never_quoted():
    (p,) = _problems([f"iris-alice-x-0-1a2b-0 stdout: {PROXY}"])
    assert 'HTML error page (HTTP 502: "502 Bad Gateway")' in p.reason
    for raw in ("<html", "<title>", "<script", "alert(1)", "hf_abc"):
        assert raw not in p.reason


def test_credentials_in_a_sync_error_are_redacted():
    (p,) = _problems(["finelog: GET https://iris.oa.dev/proxy/t/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJydW4ifQ.signature failed"])
    assert "eyJhbGci" not in p.reason and "<redacted:" in p.reason


@pytest.mark.parametrize("finelog,noted", [("current tail (600,000 lines)", True), ("current tail (1 line)", True),
                                           ("12,345 lines", False), ("synced", False), ("unavailable", False)])
def test_a_finelog_tail_is_noted_as_incomplete(finelog, noted):
    problems = _problems([], finelog)
    assert bool(problems) is noted and all(p.gate == "none" for p in problems)


def test_ray_sync_error_file_replaces_the_manifest_pointer(tmp_path: Path):
    pod = "iris-alice-x-0-1a2b-0"
    (tmp_path / "ray_vllm_logs" / pod).mkdir(parents=True)
    (tmp_path / "ray_vllm_logs" / pod / "ray-vllm-sync-error.txt").write_text(PROXY)
    read = BundleRead(root=tmp_path)
    m.read_manifest(read, {"artifacts": {"errors": [f"{pod} Ray/vLLM: Could not archive Ray/vLLM logs (exit=1; "
                                                    f"diagnostics saved to /a/b/c/d/ray_vllm_logs/{pod}/ray-vllm-sync-error.txt)"]}})
    (p,) = read.problems
    assert p.source == f"ray_vllm_logs/{pod}/ray-vllm-sync-error.txt" and p.artifact == "engine_logs"
    assert 'HTTP 502: "502 Bad Gateway"' in p.reason and "<html" not in p.reason


def test_skipped_objects_name_their_reasons_and_a_skipped_result_is_a_rollouts_problem(tmp_path: Path):
    (tmp_path / "trace_jobs").mkdir()
    (tmp_path / "trace_jobs" / "skipped_objects.json").write_text(json.dumps([
        {"key": "task-1__A/agent/rollout.bin", "size": 200 * 2**20, "reason": "non_log_size_limit"},
        {"key": "task-2__B/result.json", "size": 812, "reason": "missing_after_listing"}]))
    problems = m.sync_file_problems(tmp_path)
    listed = next(p for p in problems if p.gate == "none")
    assert "1 missing_after_listing, 1 non_log_size_limit" in listed.reason
    assert any(p.gate == "rollouts" and "task-2__B/result.json" in p.reason for p in problems)


def test_an_empty_skip_list_says_nothing(tmp_path: Path):
    (tmp_path / "trace_jobs").mkdir()
    (tmp_path / "trace_jobs" / "skipped_objects.json").write_text("[]\n")
    assert m.sync_file_problems(tmp_path) == []


def test_launch_material_is_the_scripts_and_configs_the_bundle_carries(tmp_path: Path):
    (tmp_path / "slurm_logs").mkdir()
    (tmp_path / "slurm_logs" / "run.sbatch").write_text("#!/bin/bash\nsrun python -m skyrl_train.entrypoints.main_base\n")
    (tmp_path / "slurm_logs" / "run_48211.out").write_text("log\n")
    (tmp_path / "resolved_config.yaml").write_text("trainer: {epochs: 1}\n")
    assert [rel for rel, _ in m.launch_material(tmp_path)] == ["resolved_config.yaml", "slurm_logs/run.sbatch"]


@pytest.mark.parametrize("files,expected", [
    ({"slurm_logs/run.sbatch": "srun python -m skyrl_train.entrypoints.main_base trainer.epochs=1\n"}, "standard"),
    ({"slurm_logs/run.sbatch": "srun python -m skyrl_agent.main terminal_bench_config.trials_dir=/e/t\n"}, "agentic"),
    ({"slurm_logs/cleanup.sh": "rm -rf /tmp/ray\n"}, None),     # no trainer launch in it: decides nothing
    ({"resolved_config.yaml": "generator:\n  harbor: {agent: terminus}\n"}, "agentic"),
    ({"resolved_config.yaml": "trainer: {epochs: 1}\n",
      "slurm_logs/run.sbatch": "python -m skyrl_agent.main daytona.snapshot=x\n"}, "agentic"),
])
def test_mode_from_the_launch_material_of_an_entrypoint_less_bundle(tmp_path: Path, files, expected):
    from rlhealth.observers.job import _mode_from_launch_material

    read = BundleRead(root=tmp_path)
    read.launch_material = sorted(files.items())
    found = _mode_from_launch_material(read)
    assert (found[0] if found else None) == expected


def test_remote_trace_counts_are_read_and_nulls_are_not_zero():
    counted = m.artifact_problems({"artifacts": {"finelog": "9 lines", "errors": [], "trace_started": 412, "trace_completed": 398,
                                                 "traces": "fleet newest 37/412 selected (500/1,903 total); 120 copied, 3 skipped"}})
    (note,) = counted
    assert note.gate == "none" and "412 remote trial dir(s)" in note.reason and "398 with a result.json" in note.reason
    assert m.artifact_problems({"artifacts": {"finelog": "synced", "errors": [], "trace_started": None,
                                              "trace_completed": None}}) == []
