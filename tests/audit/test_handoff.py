"""The agentic hand-off: completion record (seed 002), trace rebuild checks, behavioral break,
Megatron distributed checkpoints, resume safety, campaign authority."""
from __future__ import annotations

import json
import os
import pickle
import shutil

import jsonschema
import pytest

# seed 002 "Completion record", in its words
SEED_002_FIELDS = ["terminal_state", "source_revision", "selected_checkpoint", "export_provenance",
                   "published_model_destination", "trace_destination", "registration_result", "preserved_metrics",
                   "verification_evidence", "storage_reclaimed", "remaining_work"]
# seed 000 "Completion record"
SEED_000_FIELDS = ["terminal_state", "source_revision", "resolved_configuration", "preserved_locations",
                   "validation_results", "selected_artifact", "first_failure_cause", "resume_safety", "remaining_work"]
FIELD_STATUSES = {"present", "absent", "not applicable", "could not check"}


def _codes(rec, severity=None):
    return {p["code"] for p in rec["problems"] if severity is None or p["severity"] == severity}


def _fields(rec):
    return {f["field"]: f for f in rec["completion_record"]}


def _steps(rec):
    return {s["step"]: s for s in rec["preservation_steps"]}


def _handoff_args(run, bundle, traces, pub, campaign):
    return [run, "--bundle", bundle, "--trace-root", traces, "--published-dir", pub, "--campaign", campaign]


def test_agentic_handoff_with_skipped_objects_and_low_coverage_is_blocked(tmp_path, B, cli, schema):
    paths = B.make_agentic_handoff(tmp_path / "rl-run", clean=False)
    code, rec, _ = cli(*_handoff_args(*paths))
    jsonschema.validate(rec, schema)
    assert code == 20 and rec["status"] == "blocked" and rec["mode"]["value"] == "agentic"
    fields = _fields(rec)
    assert set(SEED_002_FIELDS) <= set(fields)
    assert all(f["status"] in FIELD_STATUSES and f["evidence"] for f in rec["completion_record"])
    # the two trace problems are named, with where they were found
    blocking = {p["code"]: p["message"] for p in rec["problems"] if p["severity"] == "blocking"}
    assert "objects_skipped=3" in blocking["trace-objects-skipped"] and "evidence-only" in blocking["trace-objects-skipped"]
    assert "rl-run_trace_jobs.manifest.json" in blocking["trace-objects-skipped"]
    assert "0.75 < 0.95" in blocking["trace-coverage-below-gate"]
    assert rec["trace_rebuild"]["result_coverage"] == 0.75 and rec["trace_rebuild"]["coverage_gate"] == 0.95
    # independent steps: the model publication still completed although the trace step failed
    steps = _steps(rec)
    assert steps["publish_model"]["status"] == "completed" and steps["publish_traces"]["status"] == "failed"
    assert steps["register"]["status"] == "not applicable" and steps["reclaim_storage"]["status"] == "not applicable"
    assert fields["verification_evidence"]["status"] == "present" and fields["verification_evidence"]["value"] == "failed"
    assert fields["trace_destination"]["value"] == "https://huggingface.co/datasets/alice/rl-run-traces"
    # the monitor mirror is flagged as a sample, never the source of record
    assert rec["monitor_mirror"]["status"] == "sample" and "not the source of record" in rec["monitor_mirror"]["detail"]
    code, md, _ = cli(*_handoff_args(*paths), fmt="markdown")
    for head in ("## Completion record", "## Preservation steps", "## Trace preservation", "| trace_destination | present |",
                 "objects_skipped=3", "| publish_traces | failed |", "MONITOR MIRROR: sample"):
        assert head in md, head


def test_clean_agentic_handoff_is_complete(tmp_path, B, cli, schema):
    paths = B.make_agentic_handoff(tmp_path / "rl-run", clean=True)
    code, rec, _ = cli(*_handoff_args(*paths))
    jsonschema.validate(rec, schema)
    assert code == 0 and rec["status"] == "complete", rec["problems"]
    fields = _fields(rec)
    assert [f["field"] for f in rec["completion_record"]] == [f for f in SEED_002_FIELDS[:-1]] + ["resume_safety", "remaining_work"]
    assert {k: f["status"] for k, f in fields.items()} == {
        "terminal_state": "present", "source_revision": "present", "selected_checkpoint": "present",
        "export_provenance": "present", "published_model_destination": "present", "trace_destination": "present",
        "registration_result": "not applicable", "preserved_metrics": "present", "verification_evidence": "present",
        "storage_reclaimed": "not applicable", "resume_safety": "present", "remaining_work": "present"}
    assert fields["remaining_work"]["value"] == [] and fields["verification_evidence"]["value"] == "passed"
    # selection by the campaign's declared rule, with its metric window and chain coverage
    sel = rec["selection"]
    assert sel["policy"] == "ema-reward:alpha=1/3" and sel["selected"]["kind"] == "export"
    assert "logged" in sel["selected"]["metric_window"] and "attempt(s) [0, 1]" in sel["selected"]["chain_coverage"]
    prov = rec["export_provenance"]
    assert prov["export"] == sel["selected"]["id"] and prov["source_checkpoint"] == f"checkpoint@{sel['selected']['step']}"
    assert prov["source_format"].startswith("FSDP sharded checkpoint (world size 2")
    assert all(s["status"] in ("completed", "not applicable") for s in rec["preservation_steps"])
    assert {c["check"]: c["status"] for c in rec["trace_rebuild"]["checks"]} == {
        c: "pass" for c in ("trace_tar", "sync_manifest", "extracted_trace_jobs", "staged_rows", "result_coverage",
                            "result_count", "row_count", "shard_names", "stale_shards")}
    assert rec["trace_rebuild"]["secret_scan"]["status"] == "clean" and rec["trace_rebuild"]["complete"] is True


def test_each_preservation_step_reported_when_another_is_blocked(tmp_path, B, cli, schema):
    run, bundle, traces, pub, campaign = B.make_agentic_handoff(tmp_path / "rl-run", clean=True)
    (pub / "README.md").write_text("# Model\n")          # published card lost its Training Traces link
    shutil.rmtree(traces / "staging" / "data")             # staged shards not retained
    B.make_campaign(campaign, registration={"authorized": True, "result": "rl_models row 4411 (owner alice)"})
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces, "--published-dir", pub, "--campaign", campaign)
    jsonschema.validate(rec, schema)
    steps = _steps(rec)
    assert steps["publish_model"]["status"] == "failed" and "training_traces_link" in steps["publish_model"]["detail"]
    assert steps["capture_chain"]["status"] == "completed" and steps["export_model"]["status"] == "completed"
    assert steps["register"]["status"] == "completed" and "row 4411" in steps["register"]["detail"]
    assert steps["publish_traces"]["status"] == "failed"
    assert "trace-shards-not-staged" in _codes(rec, "warning")
    assert _fields(rec)["registration_result"]["status"] == "present"
    assert code == 20


def test_agentic_without_trace_root_or_campaign_says_could_not_check(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    f = _fields(rec)
    assert f["published_model_destination"]["status"] == f["trace_destination"]["status"] == "could not check"
    assert "never inferred" in f["trace_destination"]["evidence"]
    assert f["registration_result"]["status"] == "not applicable"
    assert "trace-rebuild-unchecked" in _codes(rec, "warning")
    assert any("--trace-root" in w for w in rec["remaining_work"]) and any("--campaign" in w for w in rec["remaining_work"])


def test_standard_record_has_seed_000_fields(std_run, cli, schema):
    run, bundle = std_run
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    assert [f["field"] for f in rec["completion_record"]] == SEED_000_FIELDS
    assert rec["preservation_steps"] == [] and rec["trace_rebuild"] is None and rec["monitor_mirror"] is None
    assert _fields(rec)["first_failure_cause"]["status"] == "not applicable"


# ------------------------------------------------------------------ trace rebuild details
@pytest.mark.parametrize("kw,code,needle", [
    ({"stale_shard": True}, "trace-stale-shards", "train-00002.parquet"),
    ({"sync_manifest": False}, "trace-sync-manifest-absent", "objects_skipped"),
])
def test_trace_rebuild_problems(tmp_path, B, cli, kw, code, needle):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", shards=2, **kw)
    c, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    assert code in _codes(rec, "blocking") and c == 20
    assert any(needle in p["message"] for p in rec["problems"] if p["code"] == code)


def test_trace_rebuild_result_count_and_names(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t", shards=2, list_shards=False)
    shutil.rmtree(traces / "trace_jobs" / "task-0__Zx0000")
    (traces / "staging" / "data" / "train-00000.parquet").rename(traces / "staging" / "data" / "train-0.parquet")
    c, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    checks = {k["check"]: k for k in rec["trace_rebuild"]["checks"]}
    assert checks["result_count"]["status"] == "fail" and "39 result.json" in checks["result_count"]["detail"]
    assert checks["shard_names"]["status"] == "fail" and "train-0.parquet" in checks["shard_names"]["detail"]
    assert checks["stale_shards"]["status"] == "could not check"
    assert {"trace-result-count-mismatch", "trace-shard-names"} <= _codes(rec, "blocking")


# ------------------------------------------------------------------ behavioral break
def test_break_step_lists_last_pre_break_checkpoint(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    code, rec, _ = cli(run, "--bundle", bundle, "--break-step", "61", "--policy", "last-valid")
    jsonschema.validate(rec, schema)
    brk = rec["behavioral_break"]
    assert brk["status"] == "placed" and brk["source"] == "--break-step" and brk["step"] == 61
    lc = brk["last_clean_checkpoint"]
    assert lc["selected"]["id"] == "checkpoint@60" and "60 < break step 61" in lc["rationale"]
    assert "steps 1..60" in lc["selected"]["metric_window"]
    # alongside the declared-policy selection (which does not know about the break)
    assert rec["selection"]["selected"]["id"] == "export@80"
    assert "last pre-break checkpoint checkpoint@60" in _fields(rec)["selected_checkpoint"]["evidence"]
    code, rec, _ = cli(run, "--bundle", bundle, "--break-step", "60")
    assert rec["behavioral_break"]["last_clean_checkpoint"]["selected"]["id"] == "checkpoint@40"


def test_break_time_uses_step_timestamps(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    t = B.step_time(41).isoformat().replace("+00:00", "Z")   # after step 40 was logged, before step 60
    code, rec, _ = cli(run, "--bundle", bundle, "--break-time", t)
    lc = rec["behavioral_break"]["last_clean_checkpoint"]
    assert lc["selected"]["id"] == "checkpoint@40" and "<= break time" in lc["rationale"]
    code, rec, _ = cli(run, "--bundle", bundle, "--break-time", "2026-08-01T09:00:00Z")
    assert rec["behavioral_break"]["last_clean_checkpoint"]["status"] == "absent"
    assert "no-pre-break-checkpoint" in _codes(rec, "warning")


def test_break_from_the_diagnosis_report(tmp_path, B, cli, capsys, schema):
    """The break comes from a real `rlhealth diagnose` of the same bundle (broken replay from step 55)."""
    from rlhealth.cli import main
    run, bundle = B.make_run(tmp_path / "r", mode="agentic", broken_from=55)
    main(["diagnose", str(bundle), "--format", "json", "--now", "2026-08-02T00:00:00Z"])
    diag = tmp_path / "diagnosis.json"
    diag.write_text(capsys.readouterr().out)
    code, rec, _ = cli(run, "--bundle", bundle, "--diagnosis", diag)
    jsonschema.validate(rec, schema)
    brk = rec["behavioral_break"]
    assert brk["status"] == "placed" and brk["step"] == 55 and brk["kind"] == "broken replay"
    assert "behavioral_break" in brk["source"] and "step 55" in brk["evidence"]
    assert brk["last_clean_checkpoint"]["selected"]["id"] == "checkpoint@40"


@pytest.mark.parametrize("argv", [["--break-step", "-1"], ["--break-time", "yesterday"], ["--break-time", "2026-08-01T10:00:00"],
                                  ["--trace-root", "/nonexistent/t"], ["--campaign", "/nonexistent/c.yaml"]])
def test_handoff_usage_errors(std_run, cli, argv):
    run, _ = std_run
    code, out, err = cli(run, *argv)
    assert code == 2 and "Traceback" not in err


# ------------------------------------------------------------------ Megatron distributed checkpoints
def _short_run(tmp_path, B, ckpt_steps):
    """A failed run that never reached its budget (100): one attempt to step 30."""
    run, bundle = B.make_run(tmp_path / "r", state="failed", budget=100, fail_at=30, ckpt_steps=ckpt_steps, export_steps=())
    lines = (bundle / "finelog.log").read_text().splitlines()
    cut = [i for i, line in enumerate(lines) if "[iris setup] step 1/2" in line][1]
    (bundle / "finelog.log").write_text("\n".join(lines[:cut]) + "\n")
    return run, bundle


def _distcp_run(tmp_path, B, **kw):
    run, bundle = _short_run(tmp_path, B, (20,))
    shutil.rmtree(run / "ckpts" / "global_step_20")
    B.write_distcp_checkpoint(run / "ckpts" / "global_step_20", **kw)
    return run, bundle


def test_distcp_complete_checkpoint_is_valid_and_resumable(tmp_path, B, cli, schema):
    run, bundle = _distcp_run(tmp_path, B)
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    c = {x["id"]: x for x in rec["candidates"]}["checkpoint@20"]
    assert c["valid"] and c["optimizer_state"] == "present" and c["format"].startswith("Megatron distributed checkpoint (4 .distcp")
    checks = {k["check"]: k for k in c["checks"]}
    assert checks["distcp_metadata"]["status"] == "pass" and checks["rank_shards"]["status"] == "pass"
    assert checks["distcp_metadata_json"]["status"] == "pass"
    rs = rec["resume_safety"]
    assert rs["status"] == "safe" and rs["optimizer_state"] == "present" and rs["step_consistent"] is True


def test_distcp_missing_rank_shard_is_incomplete(tmp_path, B, cli, schema):
    run, bundle = _distcp_run(tmp_path, B, drop=(1, 0))
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    c = {x["id"]: x for x in rec["candidates"]}["checkpoint@20"]
    assert not c["valid"]
    rank = next(k for k in c["checks"] if k["check"] == "rank_shards")
    assert rank["status"] == "fail" and "__1_0.distcp" in rank["detail"] and "rank(s) [1]" in rank["detail"]
    assert rec["resume_safety"]["status"] == "unsafe" and "invalid-latest-checkpoint" in _codes(rec, "blocking") and code == 20


def test_distcp_without_optimizer_state_is_not_resume_safe(tmp_path, B, cli):
    run, bundle = _distcp_run(tmp_path, B, optimizer=False)
    code, rec, _ = cli(run, "--bundle", bundle)
    rs = rec["resume_safety"]
    assert rs["status"] == "unsafe" and rs["optimizer_state"] == "absent" and "optimizer" in rs["detail"]


def test_distcp_metadata_missing_or_hostile(tmp_path, B, cli):
    run, bundle = _distcp_run(tmp_path, B)
    meta = run / "ckpts" / "global_step_20" / "policy" / ".metadata"
    os.remove(meta)
    code, rec, _ = cli(run, "--bundle", bundle)
    c = {x["id"]: x for x in rec["candidates"]}["checkpoint@20"]
    assert not c["valid"] and any(k["check"] == "distcp_metadata" and "absent" in k["detail"] for k in c["checks"])
    # a pickle that would run a command if loaded: it is decoded, never executed
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    meta.write_bytes(pickle.dumps(Evil()))
    code, rec, _ = cli(run, "--bundle", bundle)
    c = {x["id"]: x for x in rec["candidates"]}["checkpoint@20"]
    assert not marker.exists() and not c["valid"]
    assert any("not a torch.distributed.checkpoint.metadata.Metadata" in k["detail"] for k in c["checks"])
    meta.write_bytes(b"\x80\x04garbage")
    code, rec, _ = cli(run, "--bundle", bundle)
    c = {x["id"]: x for x in rec["candidates"]}["checkpoint@20"]
    assert any("does not decode" in k["detail"] for k in c["checks"])


def test_fsdp_missing_optimizer_rank_is_not_resume_safe(tmp_path, B, cli):
    run, bundle = _short_run(tmp_path, B, (10, 20))
    os.remove(run / "ckpts" / "global_step_20" / "policy" / "optim_world_size_2_rank_1.pt")
    code, rec, _ = cli(run, "--bundle", bundle)
    rs = rec["resume_safety"]
    assert rs["status"] == "unsafe" and rs["optimizer_state"] == "absent" and rs["resume_checkpoint"] == "checkpoint@20"
    assert rs["newest_complete_checkpoint"] == "checkpoint@10" and rs["step_consistent"] is False


# ------------------------------------------------------------------ campaign authority
def test_reclaim_reported_never_performed(tmp_path, B, cli):
    paths = list(B.make_agentic_handoff(tmp_path / "rl-run", clean=True))
    B.make_campaign(paths[4], reclaim={"authorized": True, "reclaimed": ["s3://bucket/rl-run/ckpts"]})
    code, rec, _ = cli(*_handoff_args(*paths))
    f = _fields(rec)["storage_reclaimed"]
    assert f["status"] == "present" and f["value"] == ["s3://bucket/rl-run/ckpts"] and "not performed by rlhealth" in f["evidence"]
    assert code == 0 and (paths[0] / "ckpts").exists()
    B.make_campaign(paths[4], reclaim={"authorized": False, "reclaimed": ["s3://bucket/rl-run/ckpts"]})
    code, rec, _ = cli(*_handoff_args(*paths))
    assert "reclaim-without-authority" in _codes(rec, "blocking") and code == 20
    # authorized, but the destinations do not verify (trace coverage below the gate)
    B.make_campaign(paths[4], reclaim={"authorized": True, "reclaimed": ["s3://bucket/rl-run/ckpts"]})
    (paths[2] / "staging" / "trace_export_manifest.json").write_text(json.dumps(
        {"result_count": 40, "row_count": 20, "result_coverage": 0.5, "shards": ["train-00000.parquet"]}))
    code, rec, _ = cli(*_handoff_args(*paths))
    assert "reclaim-before-verification" in _codes(rec, "blocking")


def test_campaign_trace_destination_must_match_the_card(tmp_path, B, cli):
    paths = list(B.make_agentic_handoff(tmp_path / "rl-run", clean=True))
    B.make_campaign(paths[4], trace_dataset="alice/other-traces")
    code, rec, _ = cli(*_handoff_args(*paths))
    assert "trace-destination-mismatch" in _codes(rec, "blocking") and code == 20


def test_card_link_to_a_longer_dataset_name_is_a_mismatch(tmp_path, B, cli):
    paths = list(B.make_agentic_handoff(tmp_path / "rl-run", clean=True))
    readme = paths[3] / "README.md"
    readme.write_text(readme.read_text().replace("alice/rl-run-traces", "alice/rl-run-traces-v2"))
    code, rec, _ = cli(*_handoff_args(*paths))
    assert "trace-destination-mismatch" in _codes(rec, "blocking")


def test_hostile_trace_root(tmp_path, B, cli, schema):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    traces = B.make_trace_root(tmp_path / "t")
    (traces / "rl-run_trace_jobs.manifest.json").write_text('{"objects_skipped": "many"}')
    outside = tmp_path / "elsewhere.tar"
    outside.write_bytes(b"x")
    (traces / "rl-run_trace_jobs.tar").unlink()
    os.symlink(outside, traces / "rl-run_trace_jobs.tar")
    (traces / "staging" / "trace_export_manifest.json").write_bytes(b"\xff\xfe{not json")
    code, rec, _ = cli(run, "--bundle", bundle, "--trace-root", traces)
    jsonschema.validate(rec, schema)
    checks = {k["check"]: k for k in rec["trace_rebuild"]["checks"]}
    assert checks["sync_manifest"]["status"] == "fail" and "not a count or list" in checks["sync_manifest"]["detail"]
    assert checks["trace_tar"]["status"] == "absent"
    assert checks["result_coverage"]["status"] == "fail" and "missing or not a number" in checks["result_coverage"]["detail"]
    assert "unsafe-path" in _codes(rec, "blocking") and code == 20


def test_handoff_audit_writes_nothing(tmp_path, B, cli):
    paths = B.make_agentic_handoff(tmp_path / "rl-run", clean=False)
    before = B.snapshot(tmp_path)
    for fmt in ("json", "markdown"):
        cli(*_handoff_args(*paths), "--break-step", "50", fmt=fmt)
    assert B.snapshot(tmp_path) == before


def test_bad_campaign_record_is_reported(tmp_path, B, cli):
    paths = list(B.make_agentic_handoff(tmp_path / "rl-run", clean=True))
    paths[4].write_text("model_repo: [not, a, repo]\nselection_policy: best-guess\nsurprise: 1\n")
    code, rec, _ = cli(*_handoff_args(*paths))
    msgs = " ".join(p["message"] for p in rec["problems"] if p["code"] == "campaign-record")
    assert "model_repo" in msgs and "best-guess" in msgs and "surprise" in msgs and code == 20
    assert _fields(rec)["published_model_destination"]["status"] == "could not check"


# ------------------------------------------------------------------ one judgement with the diagnosis
def test_legacy_python_dict_metrics_are_read(tmp_path, cli):
    run = tmp_path / "run"
    run.mkdir()
    (run / "resolved_config.yaml").write_text("trainer:\n  max_steps: 2\n")
    lines = []
    for s in (1, 2):
        lines += [f"2026-05-03 11:2{s}:41.118 | INFO     | skyrl.train.utils.tracking:log:189 - Step {s}: ",
                  "{'generate/avg_num_tokens': '1843.2500',", f" 'reward/avg_raw_reward': '0.{s}',",
                  " 'policy/policy_loss': '-0.0121',", f" 'trainer/global_step': {s}}}"]
    (run / "finelog.log").write_text("\n".join(lines) + "\n")
    code, rec, _ = cli(run)
    assert rec["metrics"]["steps"] == 2 and rec["metrics"]["serializations"] == {"python-dict": 2}
    assert (rec["metrics"]["first_step"], rec["metrics"]["last_step"]) == (1, 2)
