"""The audit refuses bad data and scans the trace data for credentials (MarinSkyRL's pinned
behaviours, mirrored with our own fixtures; rows of docs/marinskyrl-conformance.md):

* a non-numeric, null or missing reward and a malformed training-metric line are blocking problems
  naming the file, the line and the value; the audit exits 20;
* the trace export's ``result_coverage`` is recomputed from the staged parquet rows and the
  extracted ``result.json`` files, never trusted as written;
* the secret scan covers ``--trace-root``: text files, the trace tar's members and the staged
  parquet rows (by row and field), and never echoes a secret.
"""
from __future__ import annotations

import json
import shutil
import tarfile

import jsonschema
import pytest

from rlhealth.audit.publication import coverage_of, trace_manifest_check
from rlhealth.audit.safefs import Root


def _codes(rec, severity=None):
    return {p["code"] for p in rec["problems"] if severity is None or p["severity"] == severity}


def _problem(rec, code):
    [p] = [p for p in rec["problems"] if p["code"] == code]
    return p


def _finelog_line(bundle, step):
    """(1-based line number, text) of the WANDB_MIRROR line of ``step`` in the bundle's finelog."""
    lines = (bundle / "finelog.log").read_text().split("\n")
    [n] = [i for i, ln in enumerate(lines) if f"WANDB_MIRROR kind=train step={step} " in ln]
    return n + 1, lines


def _replace_metric_line(bundle, step, new):
    n, lines = _finelog_line(bundle, step)
    lines[n - 1] = new
    (bundle / "finelog.log").write_text("\n".join(lines))
    return n


# ---------------------------------------------------------------- rewards (test_parse_skyrl_metrics.py)
def test_a_non_numeric_reward_is_refused_naming_file_line_and_value(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r")
    ok, _, _ = cli(run, "--bundle", bundle, "--policy", "ema-reward:alpha=1/3")
    assert ok == 0
    n, lines = _finelog_line(bundle, 40)
    _replace_metric_line(bundle, 40, lines[n - 1].replace('"reward/avg_raw_reward": ', '"reward/avg_raw_reward": "not-a-reward", "x": '))
    code, rec, _ = cli(run, "--bundle", bundle, "--policy", "ema-reward:alpha=1/3")
    jsonschema.validate(rec, schema)
    assert code == 20 and rec["status"] == "blocked" and rec["exit_code"] == 20
    p = _problem(rec, "reward-not-numeric")
    assert p["severity"] == "blocking"
    assert f"bundle:finelog.log:{n}" in p["message"] and "reward/avg_raw_reward='not-a-reward'" in p["message"]
    assert "step 40" in p["message"]
    [f] = rec["metric_data"]["findings"]
    assert (f["kind"], f["source"], f["line"], f["value"]) == (
        "reward_not_numeric", "bundle:finelog.log", n, "reward/avg_raw_reward='not-a-reward'")
    assert rec["metric_data"]["counts"] == {"reward_not_numeric": 1}
    code, md, _ = cli(run, "--bundle", bundle, "--policy", "ema-reward:alpha=1/3", fmt="markdown")
    assert code == 20 and f"REFUSED reward_not_numeric at bundle:finelog.log:{n}" in md


def test_a_null_reward_and_a_record_without_one_are_missing_rewards(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r")
    n1, lines = _finelog_line(bundle, 30)
    _replace_metric_line(bundle, 30, lines[n1 - 1].replace('"reward/avg_raw_reward": ', '"reward/avg_raw_reward": null, "x": '))
    n2, lines = _finelog_line(bundle, 31)
    _replace_metric_line(bundle, 31, lines[n2 - 1].replace('"reward/avg_raw_reward": ', '"not/a_reward": '))
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    assert code == 20
    p = _problem(rec, "reward-missing")
    assert p["message"].startswith("2 missing reward(s)")
    assert f"bundle:finelog.log:{n1}: step 30: reward/avg_raw_reward is null" in p["message"]
    assert f"bundle:finelog.log:{n2}: step 31: no reward/avg_raw_reward / loss/avg_final_rewards" in p["message"]
    assert {(f["line"], f["value"]) for f in rec["metric_data"]["findings"]} == {
        (n1, "reward/avg_raw_reward=null"), (n2, "absent")}


def test_a_run_that_never_logs_a_reward_is_not_missing_one(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    text = (bundle / "finelog.log").read_text().replace('"reward/avg_raw_reward"', '"policy/other"')
    (bundle / "finelog.log").write_text(text)
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["metric_data"] == {"findings": [], "counts": {}}
    assert code == 0, rec["problems"]


def test_a_non_numeric_reward_in_a_python_dict_block_is_named_at_the_block_end(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    text = (bundle / "finelog.log").read_text()
    block = ["(skyrl_entrypoint pid=7) {'async/staleness_max': 0,",
             "(skyrl_entrypoint pid=7)  'reward/avg_raw_reward': 'n/a',",
             "(skyrl_entrypoint pid=7)  'trainer/global_step': 81}"]
    (bundle / "finelog.log").write_text(text + "\n".join(block) + "\n")
    end = len((text + "\n".join(block)).split("\n"))
    code, rec, _ = cli(run, "--bundle", bundle)
    assert code == 20
    assert f"bundle:finelog.log:{end}: step 81: reward/avg_raw_reward='n/a' is not a number" in _problem(rec, "reward-not-numeric")["message"]


def test_quoted_numeric_rewards_of_legacy_blocks_are_numbers(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    text = (bundle / "finelog.log").read_text()
    (bundle / "finelog.log").write_text(text + "{'async/staleness_max': 0, 'reward/avg_raw_reward': '0.5000', 'trainer/global_step': 81}\n")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["metric_data"]["counts"] == {} and code == 0, rec["problems"]


# ---------------------------------------------------------------- malformed lines (test_training_metrics.py)
def test_a_malformed_metric_line_after_valid_ones_is_refused_with_its_line(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r")
    n = _replace_metric_line(bundle, 55, 'WANDB_MIRROR kind=train step=55 metrics={"broken": ' + B.FAKE_HF)
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    assert code == 20
    p = _problem(rec, "metrics-malformed")
    assert p["severity"] == "blocking" and p["message"].startswith("1 malformed training-metric line(s)")
    assert f"bundle:finelog.log:{n}: WANDB_MIRROR kind=train step=55" in p["message"]
    assert '{"broken": <redacted:huggingface_token>' in p["message"]       # the value, redacted
    assert rec["metrics"]["malformed_lines"] == 1                            # the diagnosis's count agrees
    code, md, _ = cli(run, "--bundle", bundle, fmt="markdown")
    assert B.FAKE_HF not in json.dumps(rec) + md


def test_an_eval_record_and_a_clean_run_are_not_refused(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    with open(bundle / "finelog.log", "a") as f:
        f.write('WANDB_MIRROR kind=eval step=80 metrics={"eval/x": "n/a"}\n')
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["metric_data"] == {"findings": [], "counts": {}} and code == 0, rec["problems"]


def test_the_listed_cases_are_capped_and_the_rest_counted(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    with open(bundle / "finelog.log", "a") as f:
        for s in range(25):
            f.write(f'WANDB_MIRROR kind=train step={100 + s} metrics={{"cut\n')
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["metric_data"]["counts"] == {"malformed_metric_line": 25}
    assert len(rec["metric_data"]["findings"]) == 20
    assert _problem(rec, "metrics-malformed")["message"].endswith("(and 5 more)")


# ---------------------------------------------------------------- the checkpoint cap and the trace directory
def test_an_invalid_latest_marker_names_the_file_and_its_value(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    (run / "ckpts" / "latest_ckpt_global_step.txt").write_text("not-a-step")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert code == 20
    assert _problem(rec, "latest-marker-invalid")["message"] == "run:ckpts/latest_ckpt_global_step.txt:1: 'not-a-step' is not an integer step"


def test_a_missing_explicit_trace_root_is_a_usage_error_naming_it(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    missing = tmp_path / "missing-trace-jobs"
    code, out, err = cli(run, "--bundle", bundle, "--trace-root", missing)
    assert code == 2 and str(missing) in err


# ---------------------------------------------------------------- coverage (test_trace_export_coverage.py)
def _manifest(tmp_path, doc):
    d = tmp_path / "m"
    d.mkdir()
    (d / "trace_export_manifest.json").write_text(json.dumps(doc))
    root = Root("export", d)
    return root, d / "trace_export_manifest.json"


def test_coverage_is_rows_over_results_and_an_empty_source_is_complete():
    assert coverage_of(97, 100) == 0.97
    assert coverage_of(0, 0) == 1.0
    assert coverage_of(3, 0) is None


def test_a_manifest_recording_partial_coverage_is_recomputed_from_its_counts(tmp_path):
    found = _manifest(tmp_path, {"result_count": 100, "row_count": 97, "result_coverage": 0.97, "shards": ["train-00000.parquet"]})
    mc = trace_manifest_check(found, True)
    assert mc["result_coverage"] == 0.97 and mc["passed"] is True
    assert "97 row(s) (manifest row_count) / 100 result.json (manifest result_count)" in mc["detail"]


def test_an_empty_source_manifest_is_complete(tmp_path):
    mc = trace_manifest_check(_manifest(tmp_path, {"result_count": 0, "row_count": 0, "result_coverage": 1.0, "shards": []}), True)
    assert mc["result_coverage"] == 1.0 and mc["passed"] is True


def test_a_written_coverage_that_its_counts_contradict_fails(tmp_path):
    mc = trace_manifest_check(_manifest(tmp_path, {"result_count": 100, "row_count": 60, "result_coverage": 0.97}), True)
    assert mc["passed"] is False and mc["result_coverage"] == 0.6
    assert "result_coverage=0.97 written in export:trace_export_manifest.json" in mc["detail"] and "= 0.6" in mc["detail"]


def test_coverage_is_recomputed_from_the_staged_rows_not_the_manifest(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=40, rows=30)
    # the manifest claims full coverage; the staged shard holds 30 rows for 40 result.json files
    (traces / "staging" / "trace_export_manifest.json").write_text(json.dumps(
        {"result_count": 40, "row_count": 40, "result_coverage": 1.0, "shards": ["train-00000.parquet"]}))
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    jsonschema.validate(rec, schema)
    checks = {c["check"]: c for c in rec["trace_rebuild"]["checks"]}
    assert checks["staged_rows"]["status"] == "pass" and "hold 30 row(s)" in checks["staged_rows"]["detail"]
    assert checks["result_coverage"]["status"] == "fail"
    assert "result_coverage=1 written in traces:staging/trace_export_manifest.json" in checks["result_coverage"]["detail"]
    assert "30 row(s) (staged shards) / 40 result.json (extracted trace_jobs/) = 0.75" in checks["result_coverage"]["detail"]
    assert checks["row_count"]["status"] == "fail" and "row_count=40" in checks["row_count"]["detail"]
    assert rec["trace_rebuild"]["result_coverage"] == 0.75 and rec["trace_export"]["passed"] is False
    assert {"trace-coverage-below-gate", "trace-row-count-mismatch"} <= _codes(rec, "blocking") and code == 20


def test_a_recomputed_coverage_below_the_gate_is_refused(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=40, rows=30)      # the manifest says 0.75 too
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    msg = _problem(rec, "trace-coverage-below-gate")["message"]
    assert "recomputed result_coverage 0.75 < 0.95 gate" in msg and "(traces:staging/trace_export_manifest.json)" in msg
    assert code == 20


def test_an_unreadable_staged_shard_is_refused_not_counted(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t")
    (traces / "staging" / "data" / "train-00000.parquet").write_bytes(b"PAR1 truncated")
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    jsonschema.validate(rec, schema)
    assert "train-00000.parquet: not a readable parquet file" in _problem(rec, "trace-shard-unreadable")["message"]
    assert "trace-secret-scan-incomplete" in _codes(rec, "blocking") and code == 20
    assert rec["trace_rebuild"]["secret_scan"]["status"] == "incomplete"


# ---------------------------------------------------------------- secrets in trace data (test_secret_redaction.py)
def test_a_credential_in_a_staged_parquet_row_is_named_by_row_and_field(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=4)
    rows = [B.trace_row(i) for i in range(4)]
    rows[2] = B.trace_row(2, content=f"export token={B.FAKE_JWT} and run")
    B.write_rows(traces / "staging" / "data" / "train-00000.parquet", rows)
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    jsonschema.validate(rec, schema)
    [f] = rec["trace_rebuild"]["secret_scan"]["findings"]
    assert f == {"file": "staging/data/train-00000.parquet", "line": 3, "location": "conversations[1].content",
                 "shape": "jwt", "redacted": "export token=<redacted:jwt> and run"}
    msg = _problem(rec, "trace-secrets-found")["message"]
    assert "staging/data/train-00000.parquet:3 [conversations[1].content] jwt" in msg and code == 20
    code, md, _ = cli(run, "--bundle", bundle, "--trace-root", traces, fmt="markdown")
    assert "staging/data/train-00000.parquet:3 [conversations[1].content] jwt" in md
    assert B.FAKE_JWT not in json.dumps(rec) + md


def test_a_credential_in_a_trajectory_and_a_staged_training_log_is_found(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=4)
    traj = traces / "trace_jobs" / "task-1__Zx0001" / "agent" / "trajectory.json"
    traj.write_text(json.dumps({"steps": [{"source": "agent", "message": "ok"},
                                          {"source": "agent", "message": f"curl -H 'Authorization: {B.FAKE_OPENAI}'"}]}, indent=1))
    (traces / "staging" / "training_logs").mkdir()
    (traces / "staging" / "training_logs" / "trainer.out").write_text(f"step 1\ncalling {B.FAKE_IRIS_URL}/v1\n")
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    found = {(f["file"], f["line"], f["shape"]) for f in rec["trace_rebuild"]["secret_scan"]["findings"]}
    assert ("trace_jobs/task-1__Zx0001/agent/trajectory.json", 9, "openai_key") in found
    assert ("staging/training_logs/trainer.out", 2, "iris_proxy_url") in found
    assert code == 20 and B.FAKE_OPENAI not in json.dumps(rec) and B.FAKE_JWT not in json.dumps(rec)


def test_a_credential_only_inside_the_trace_tar_is_found_by_member(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=4)
    (traces / "trace_jobs" / "task-3__Zx0003" / "agent" / "episode.txt").write_text(f"a\nb\ntoken {B.FAKE_HF}\n")
    with tarfile.open(traces / "rl-run_trace_jobs.tar", "w") as tar:
        tar.add(traces / "trace_jobs", arcname=".")
    shutil.rmtree(traces / "trace_jobs")
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    [f] = rec["trace_rebuild"]["secret_scan"]["findings"]
    assert (f["file"], f["location"], f["line"], f["shape"]) == (
        "rl-run_trace_jobs.tar", "./task-3__Zx0003/agent/episode.txt", 3, "huggingface_token")
    assert B.FAKE_HF not in json.dumps(rec) and code == 20


def test_a_clean_trace_root_scans_every_file(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=4)
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    scan = rec["trace_rebuild"]["secret_scan"]
    # 4 result.json, the tar, the sync manifest, the export manifest, one parquet shard
    assert scan == {"status": "clean", "files_scanned": 8, "findings": [], "skipped": []}
    assert not {"trace-secrets-found", "trace-secret-scan-incomplete"} & _codes(rec)


@pytest.mark.parametrize("shape,secret", [
    ("huggingface_token", "hf_" + "FAKEfakeFAKEfakeFAKE42"),
    ("github_token", "ghp_" + "FAKEfakeFAKEfakeFAKE42"),
    ("aws_access_key", "AKIA" + "FAKE0000FAKE0000"),
])
def test_each_shape_in_a_parquet_row_is_found_and_never_echoed(tmp_path, B, shape, secret):
    from rlhealth.audit.publication import secret_scan
    d = tmp_path / "stage"
    d.mkdir()
    B.write_rows(d / "train-00000.parquet", [B.trace_row(0, content=f"key {secret}")])
    scan = secret_scan(Root("traces", d))
    assert [(f["line"], f["location"], f["shape"]) for f in scan["findings"]] == [(1, "conversations[1].content", shape)]
    assert secret not in json.dumps(scan)


def test_a_tree_deeper_than_the_scan_walks_leaves_the_scan_incomplete(tmp_path, B):
    from rlhealth.audit.publication import secret_scan
    deep = tmp_path / "t"
    leaf = deep.joinpath(*[f"d{i}" for i in range(5)])
    leaf.mkdir(parents=True)
    (leaf / "x.txt").write_text(f"token {B.FAKE_HF}\n")
    scan = secret_scan(Root("traces", deep), max_depth=3)
    assert scan["status"] == "incomplete" and scan["findings"] == []
    assert scan["skipped"] == [{"file": "d0/d1/d2/d3/", "reason": "more than 3 directory levels deep; not scanned"}]
    assert secret_scan(Root("traces", deep), max_depth=8)["status"] == "findings"


def test_an_unreadable_trace_tar_leaves_the_scan_incomplete(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", trials=4)
    (traces / "rl-run_trace_jobs.tar").write_bytes(b"not an archive at all" * 40)
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    scan = rec["trace_rebuild"]["secret_scan"]
    assert scan["status"] == "incomplete" and scan["files_scanned"] == 7
    assert scan["skipped"] == [{"file": "rl-run_trace_jobs.tar", "reason": "archive read failed (ReadError)"}]
    assert "rl-run_trace_jobs.tar (archive read failed (ReadError))" in _problem(rec, "trace-secret-scan-incomplete")["message"]
    assert code == 20
