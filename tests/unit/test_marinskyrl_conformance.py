"""Behaviours MarinSkyRL's own test suite pins (infra/tests/, scripts/iris/ watcher) for inputs
rlhealth also reads, mirrored with our own fixtures: rlhealth reaches the same conclusion. The
mapping, row by row, is docs/marinskyrl-conformance.md."""
from __future__ import annotations

import json
from pathlib import Path

from rlhealth.catalog import load_catalog
from rlhealth.observers import observe
from rlhealth.probes import manifest as m
from rlhealth.probes.bundle import read_bundle
from rlhealth.probes.parse import trainer as tp

CATALOG = load_catalog()
NOW = 1785600000.0
WATCHER_JOB = {"cluster": {"name": "cw-us-east-02a", "kubeconfig": "/k", "context": "c"}, "job_id": "/bob/rl-math",
               "state": "running", "submitted_at_ms": 1785590000000, "entrypoint": "", "dataset": "\u2014",
               "finished_at_ms": None, "task_state": "running"}


def _bundle(tmp_path: Path, finelog: str, artifacts: dict | None = None, job: dict | None = None) -> Path:
    root = tmp_path / "jobs" / "cw-us-east-02a" / "bob" / "rl-math"
    root.mkdir(parents=True)
    (root / "finelog.log").write_text(finelog)
    manifest = {"bundle_format": 1, "cluster": "cw-us-east-02a", "job_id": "/bob/rl-math", "kind": "rl",
                "job": job or WATCHER_JOB, "synced_at": "2026-08-01T16:00:00+00:00",
                "artifacts": artifacts or {"finelog": "2 lines", "errors": []}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def _read(root: Path):
    return read_bundle(root, CATALOG, now_epoch=NOW)


# test_parse_skyrl_metrics.py::test_default_parser_reads_agentic_wandb_json
def test_wandb_mirror_json_is_read_with_its_step():
    kind, step, metrics = tp.parse_wandb_mirror('WANDB_MIRROR kind=train step=9 metrics={"async/staleness_max": 0, '
                                                '"reward/avg_raw_reward": 0.5, "trainer/global_step": 9}')
    assert (kind, step) == ("train", 9)
    assert metrics == {"async/staleness_max": 0.0, "reward/avg_raw_reward": 0.5, "trainer/global_step": 9.0}


# test_training_metrics.py::test_parse_training_metrics_extracts_standard_rl_status_fields
def test_a_malformed_mirror_line_before_an_ansi_actor_prefixed_one_leaves_one_record(tmp_path: Path):
    finelog = ('WANDB_MIRROR kind=train step=3 metrics={"broken": \n'
               '\x1b[36m(skyrl_entrypoint pid=901) WANDB_MIRROR kind=train step=4 metrics={"reward/avg_raw_reward": -0.25, '
               '"policy/policy_loss": 3.1e-08, "policy/raw_grad_norm": 0.042, "policy/policy_entropy": 0.97}\x1b[0m\n')
    read = _read(_bundle(tmp_path, finelog))
    assert [r.step for r in read.metric_records] == [4]
    got = read.metric_records[0].metrics
    assert (tp.metric(got, "reward"), tp.metric(got, "policy_loss"), tp.metric(got, "grad_norm"),
            tp.metric(got, "entropy")) == (-0.25, 3.1e-08, 0.042, 0.97)
    assert read.malformed_metric_lines == 1     # the watcher reports it as a Finelog parse error too


# test_training_metrics.py::test_watcher_uses_the_shared_latest_training_record
def test_the_latest_record_is_the_newest_step(tmp_path: Path):
    finelog = ('WANDB_MIRROR kind=train step=1 metrics={"reward/avg_raw_reward": 0.1}\n'
               'WANDB_MIRROR kind=train step=2 metrics={"reward/avg_raw_reward": 0.7, "policy/raw_grad_norm": 0.3}\n')
    records = _read(_bundle(tmp_path, finelog)).metric_records
    latest = max(records, key=lambda r: r.step)
    assert latest.step == 2 and tp.metric(latest.metrics, "reward") == 0.7
    assert latest.metrics["trainer/global_step"] == 2.0


# test_parse_skyrl_metrics.py::test_legacy_python_dict_log_is_auto_detected
def test_legacy_python_dict_records_are_detected():
    metrics = tp.parse_dict_block("{'async/staleness_max': 0, 'reward/avg_raw_reward': 0.6, 'trainer/global_step': 30}")
    assert metrics == {"async/staleness_max": 0.0, "reward/avg_raw_reward": 0.6, "trainer/global_step": 30.0}


# test_watch_coreweave_rl.py::test_status_row_surfaces_tis_alignment_and_token_probability_shift
def test_tis_alignment_and_log_ratio_tail_are_read_from_the_finelog(tmp_path: Path):
    finelog = ('WANDB_MIRROR kind=train step=5 metrics={"policy/policy_entropy": 1.05, "generate/tis/exact_match_fraction": 0.96, '
               '"policy/tis/log_ratio_abs_mean": 0.02, "policy/log_ratio_abs_mean": 0.03, "policy/log_ratio_abs_p99": 0.5, '
               '"policy/log_ratio_abs_max": 2.75}\n')
    (record,) = _read(_bundle(tmp_path, finelog)).metric_records
    got = record.metrics
    assert (tp.metric(got, "entropy"), tp.metric(got, "tis_exact_match"), tp.metric(got, "tis_log_ratio_abs_mean"),
            tp.metric(got, "log_ratio_abs_max")) == (1.05, 0.96, 0.02, 2.75)


# test_watch_coreweave_rl.py::test_jupiter_artifact_sync_uses_only_explicit_gpfs_subtrees
def test_a_jupiter_bundles_ray_logs_directories_are_read(tmp_path: Path):
    root = tmp_path / "jobs" / "jsc-jupiter" / "slurm" / "48300"
    (root / "ray_logs" / "worker").mkdir(parents=True)
    (root / "ray_logs" / "launcher").mkdir(parents=True)
    (root / "finelog.log").write_text("Training Step Progress: 2 / 10\n")
    (root / "ray_logs" / "worker" / "worker-aa-01000000-4242.out").write_text(
        "INFO 08-01 15:53:00 [loggers.py:111] Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: "
        "2310.7 tokens/s, Running: 48 reqs, Waiting: 0 reqs\n")
    (root / "manifest.json").write_text(json.dumps({
        "bundle_format": 1, "cluster": "jsc-jupiter", "job_id": "/slurm/48300", "kind": "rl",
        "job": dict(WATCHER_JOB, cluster={"name": "jsc-jupiter", "kubeconfig": ".", "context": None}, job_id="48300",
                    experiment_dir="/e/data1/experiments/x", launcher_job_name="x", task_state=None),
        "synced_at": "2026-08-01T16:00:00+00:00", "trials_uri": None,
        "artifacts": {"finelog": "synced", "pod_logs": "not applicable (Jupiter)", "ray_logs": "2 directories synced",
                      "traces": "newest 0 selected", "trace_started": None, "trace_completed": None, "errors": [],
                      "slurm_logs": "synced", "trace_selected": 0}}))
    read = _read(root)
    assert read.layout == "jupiter" and "ray_logs/worker/worker-aa-01000000-4242.out" in read.log_files
    assert read.stats_count == 1 and not [p for p in read.problems if p.gate != "none"]


# test_watch_coreweave_rl.py::test_jupiter_status_only_tails_finelog_without_recursive_transfer
def test_a_status_sweeps_finelog_tail_is_not_taken_for_the_complete_log():
    (note,) = m.artifact_problems({"artifacts": {"finelog": "current tail (1 line)", "errors": []}})
    assert note.gate == "none" and "not the complete log" in note.reason


# test_watch_coreweave_rl.py::test_jupiter_sync_reports_ssh_transport_failure_instead_of_missing_artifacts
def test_a_transport_failure_of_the_whole_sync_is_an_error_not_missing_artifacts():
    (p,) = m.artifact_problems({"artifacts": {"finelog": "unavailable", "pod_logs": "unavailable", "ray_logs": "unavailable",
                                              "traces": "unavailable",
                                              "errors": ["RuntimeError: Jupiter path check failed: ssh: connect to host "
                                                         "jupiter port 22: Connection refused"]}})
    assert p.gate == "all" and "Connection refused" in p.reason and "watcher's sync" in p.reason


# test_watch_coreweave_rl.py::test_jupiter_only_run_uses_the_shared_report_and_skips_iris_trace_inventory
def test_jupiter_nulls_and_not_applicable_statuses_are_no_problem(tmp_path: Path):
    artifacts = {"finelog": "synced", "pod_logs": "not applicable (Jupiter)", "ray_logs": "1 directory synced",
                 "traces": "newest 1 selected", "trace_started": None, "trace_completed": None, "errors": [],
                 "slurm_logs": "synced", "trace_selected": 1}
    assert m.artifact_problems({"artifacts": artifacts}) == []


# watch_coreweave_rl.py::sync_warning ("never raw proxy bodies"), coreweave_ops save_ray_logs
def test_a_ray_sync_error_is_never_quoted_raw(tmp_path: Path):
    root = _bundle(tmp_path, "Training Step Progress: 2 / 10\n",
                   {"finelog": "2 lines", "errors": ["iris-bob-rl-math-0-ab12-0 Ray/vLLM: <html><head><title>503 Service "
                                                     "Temporarily Unavailable</title></head><body>nginx</body></html>"]})
    (p,) = [p for p in _read(root).problems if p.artifact == "engine_logs"]
    assert '(HTTP 503: "503 Service Temporarily Unavailable")' in p.reason and "<" not in p.reason.split(": ", 1)[1]


# test_watch_coreweave_rl.py (manifest as written by write_job_manifest): an empty entrypoint decides no mode
def test_an_empty_entrypoint_is_no_launch_command(tmp_path: Path):
    obs = observe(_read(_bundle(tmp_path, "Training Step Progress: 40 / 100\n")), CATALOG, now=NOW, max_age_s=1800.0,
                  mode_override=None)
    (job,) = [f for f in obs.facts if f.kind == "job"]
    assert job.mode is None


# test_parse_skyrl_metrics.py::test_json_log_with_trace_directory_uses_trace_analysis
def test_one_result_with_reward_one_is_one_successful_trial(tmp_path: Path):
    from rlhealth.probes.parse.trials import summarize_trials

    trial = tmp_path / "trace_jobs" / "trial-7"
    trial.mkdir(parents=True)
    (trial / "result.json").write_text(json.dumps({"task_name": "task-7", "trial_name": "trial-7",
                                                   "agent_result": {"metadata": {"n_episodes": 2}},
                                                   "verifier_result": {"rewards": {"reward": 1.0}}}))
    summary = summarize_trials(tmp_path / "trace_jobs", {}, 0, workers=1)
    assert (summary.completed, list(summary.rewards)) == (1, [1.0])
