"""End-to-end `rlhealth audit` on generated runs: classification, terminal state, inventory,
candidates, selection, publication, record schema, read-only guarantee, exit codes."""
from __future__ import annotations

import json
import os
import shutil

import jsonschema
import pytest


def _inv(rec):
    return {i["artifact"]: i["status"] for i in rec["inventory"]}


def _codes(rec, severity=None):
    return {p["code"] for p in rec["problems"] if severity is None or p["severity"] == severity}


def test_standard_run_no_policy_lists_candidates_unresolved(std_run, cli, schema):
    run, bundle = std_run
    code, rec, err = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    assert code == 0 and rec["status"] == "complete" and rec["exit_code"] == 0, rec["problems"]
    # the directory name says "harbor-tb-agentic"; the configuration says standard
    assert "agentic" in str(run) and rec["mode"]["value"] == "standard"
    inv = _inv(rec)
    assert inv["trials (trace_jobs)"] == "not applicable" and inv["verifier artifacts"] == "not applicable"
    assert inv["trace export manifest"] == "not applicable"
    assert inv["checkpoints"] == inv["training metrics"] == inv["attempt logs"] == "present"
    sel = rec["selection"]
    assert sel["status"] == "unresolved" and sel["selected"] is None
    assert sel["valid_candidates"] == [f"{k}@{s}" for k in ("checkpoint", "export") for s in (20, 40, 60, 80)]
    assert rec["terminal_state"]["outcome"] == "succeeded" and rec["terminal_state"]["budget_complete"]
    assert rec["source_revision"]["value"] == "0123abcd4567" and rec["source_revision"]["consistent"]
    assert rec["resume_safety"]["status"] == "not needed"
    assert any("declare a selection policy" in w for w in rec["remaining_work"])


def test_agentic_run_classified_from_entrypoint_not_name(agentic_run, cli, schema):
    run, bundle = agentic_run
    assert not (run / "resolved_config.json").exists()
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    assert "standard" in str(run) and rec["mode"]["value"] == "agentic"
    assert "--trials_dir" in rec["mode"]["evidence"]
    inv = _inv(rec)
    assert inv["trials (trace_jobs)"] == "present" and inv["verifier artifacts"] == "present"
    assert inv["trace export manifest"] == "absent"
    assert any("trace dataset export not verified" in w for w in rec["remaining_work"])
    # the JWT in the entrypoint URL never reaches the record
    assert "eyJGQUtF" not in json.dumps(rec)


def test_standard_run_without_trials_is_not_missing_evidence(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="standard")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert not any("trace" in p["message"] or "trial" in p["message"] for p in rec["problems"])
    run2, bundle2 = B.make_run(tmp_path / "a", mode="agentic")
    shutil.rmtree(bundle2 / "trace_jobs")
    code, rec2, _ = cli(run2, "--bundle", bundle2)
    assert _inv(rec2)["trials (trace_jobs)"] == "absent"
    assert "evidence-absent" in _codes(rec2, "warning")


def test_ema_policy_selects_by_declared_rule(std_run, cli, schema, B):
    run, bundle = std_run
    code, rec, _ = cli(run, "--bundle", bundle, "--policy", "ema-reward:alpha=1/3")
    jsonschema.validate(rec, schema)
    ema, prev = {}, None
    for s in range(1, 81):
        r = B.REWARDS[s]
        prev = r if prev is None else r / 3 + 2 * prev / 3
        ema[s] = prev
    expected = max((40, 60, 80), key=lambda s: ema[s])  # >= 2*save_every
    sel = rec["selection"]
    assert sel["status"] == "selected" and sel["selected"]["step"] == expected
    assert sel["selected"]["kind"] == "export"  # exports exist: the export at that step
    assert sel["metric_window"].startswith("steps 1..80") and "1 attempt(s)" in sel["chain_coverage"]
    rows = {t["step"]: t for t in sel["table"]}
    assert rows[20]["eligible"] is False and "min_step" in rows[20]["reason"]
    assert abs(rows[expected]["ema"] - round(ema[expected], 6)) < 1e-9
    assert code == 0


def test_policy_skips_invalid_candidates(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    for s in (40, 60, 80):  # break every export but 20 -> nothing eligible for ema (min_step 40)
        (run / "exports" / f"global_step_{s}" / "policy" / "model-00001-of-00002.safetensors").unlink()
    code, rec, _ = cli(run, "--bundle", bundle, "--policy", "ema-reward")
    assert rec["selection"]["status"] == "no-eligible-step"
    assert {"invalid-export", "policy-no-step"} <= _codes(rec, "blocking") and code == 20
    code, rec, _ = cli(run, "--bundle", bundle, "--policy", "last-valid")
    assert rec["selection"]["selected"]["id"] == "export@20"


def test_failed_attempt_first_cause_and_redundant_tail(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", state="failed", fail_at=50, tail_attempt_error=True)
    code, rec, _ = cli(run, "--bundle", bundle)
    ts = rec["terminal_state"]
    assert ts["terminal"] is True and ts["budget_complete"] and ts["outcome"].startswith("completed (step budget reached")
    assert [a["after_budget_complete"] for a in rec["attempts"]] == [False, False, True]
    cause = rec["first_failure_cause"]
    assert cause["attempt"] == 0 and "RuntimeError: primary failure in step 51" in cause["text"]
    assert "Watchdog" not in cause["text"]  # the first error, not the loudest
    assert B.FAKE_HF not in json.dumps(rec) and "<redacted:huggingface_token>" in cause["text"]
    assert "AssertionError" in rec["attempts"][2]["first_error"]["text"]
    # the judgement is the diagnosis's: a catalog signature, earliest primary error of the attempt
    assert cause["signature"] == rec["attempts"][0]["first_error"]["signature"] == "python_traceback"
    assert rec["attempts"][1]["resumed_from"] == 40
    assert rec["metrics"]["repeated_steps"] == 10 and rec["metrics"]["missing_count"] == 0
    assert code == 0, rec["problems"]


def test_failed_run_short_of_budget_is_not_complete(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", state="failed", budget=100, fail_at=50,
                             ckpt_steps=(20, 40), export_steps=(20,))
    # drop the resumed attempt: budget 100 never reached
    lines = (bundle / "finelog.log").read_text().splitlines()
    cut = [i for i, l in enumerate(lines) if "[iris setup] step 1/2" in l][1]
    (bundle / "finelog.log").write_text("\n".join(lines[:cut]) + "\n")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["terminal_state"]["outcome"] == "failed" and not rec["terminal_state"]["budget_complete"]
    assert rec["resume_safety"]["status"] == "safe" and "60 step(s)" in rec["resume_safety"]["detail"]
    # latest checkpoint broken -> resume unsafe and blocking
    os.remove(run / "ckpts" / "global_step_40" / "policy" / "model_world_size_2_rank_1.pt")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["resume_safety"]["status"] == "unsafe" and "invalid-latest-checkpoint" in _codes(rec, "blocking")
    assert code == 20


def test_running_job_is_not_terminal(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", state="running")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert code == 20 and rec["terminal_state"]["terminal"] is False and "not-terminal" in _codes(rec, "blocking")


def test_capture_state_newer_than_manifest_wins(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", state="running")
    cap = bundle / "rlhealth" / "captures" / "20260801T130000Z"
    cap.mkdir(parents=True)
    (cap / "capture.json").write_text(json.dumps({"format": 1, "captured_at": "2026-08-01T13:00:00+00:00"}))
    (cap / "state.json").write_text(json.dumps({"source": "iris", "state": "succeeded", "failure_count": 0,
                                                "preemption_count": 0, "max_retries": 1, "attempts": []}))
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["terminal_state"]["controller_state"] == "succeeded" and code == 0


def test_no_controller_state_and_incomplete_budget_is_blocking(tmp_path, B, cli):
    run, _ = B.make_run(tmp_path / "r")
    code, rec, _ = cli(run)
    assert rec["inventory"][1]["status"] == "absent"  # attempt logs live in the bundle only
    assert {"terminal-unknown", "evidence-absent"} <= _codes(rec, "blocking") and code == 20


def test_latest_marker_and_step_consistency(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r")
    (run / "ckpts" / "latest_ckpt_global_step.txt").write_text("60")
    code, rec, _ = cli(run, "--bundle", bundle)
    c = {x["id"]: x for x in rec["candidates"]}
    assert not c["export@80"]["valid"] and not c["checkpoint@80"]["valid"]
    assert any(k["check"] == "step_consistency" and k["status"] == "fail" for k in c["export@80"]["checks"])
    assert "newer-than-latest" in _codes(rec)
    (run / "ckpts" / "latest_ckpt_global_step.txt").write_text("oops")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert "latest-marker-invalid" in _codes(rec, "blocking")


def test_published_dir_clean(std_run, tmp_path, B, cli, schema):
    run, bundle = std_run
    pub = B.make_published(tmp_path / "pub")
    code, rec, _ = cli(run, "--bundle", bundle, "--published-dir", pub)
    jsonschema.validate(rec, schema)
    p = rec["publication"]
    assert {a["artifact"]: a["status"] for a in p["artifacts"]} == {
        "weights": "present", "tokenizer_configuration": "present", "training_logs": "present", "training_traces_link": "present"}
    assert p["secret_scan"]["status"] == "clean" and p["secret_scan"]["files_scanned"] >= 4
    assert code == 0, rec["problems"]


def test_published_dir_with_planted_secrets(std_run, tmp_path, B, cli, schema):
    run, bundle = std_run
    pub = B.make_published(tmp_path / "pub", secrets=True)
    code, rec, _ = cli(run, "--bundle", bundle, "--published-dir", pub)
    jsonschema.validate(rec, schema)
    found = {(f["file"], f["line"], f["shape"]) for f in rec["publication"]["secret_scan"]["findings"]}
    assert ("README.md", 9, "huggingface_token") in found
    assert ("training_logs/trainer.log", 3, "iris_proxy_url") in found
    assert ("training_logs/metrics.json", 5, "openai_key") in found
    assert "secrets-found" in _codes(rec, "blocking") and code == 20
    code, md, _ = cli(run, "--bundle", bundle, "--published-dir", pub, fmt="markdown")
    blob = json.dumps(rec) + md
    for s in (B.FAKE_HF, B.FAKE_OPENAI, B.FAKE_JWT):
        assert s not in blob
    assert "<redacted:huggingface_token>" in md and "README.md:9 huggingface_token" in md


def test_published_dir_incomplete(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic")
    pub = B.make_published(tmp_path / "pub", traces_link=False, logs=False, coverage=0.90)
    (pub / "model-00001-of-00001.safetensors").rename(pub / "nested.bin")
    code, rec, _ = cli(run, "--bundle", bundle, "--published-dir", pub)
    arts = {a["artifact"]: a["status"] for a in rec["publication"]["artifacts"]}
    assert arts == {"weights": "absent", "tokenizer_configuration": "present", "training_logs": "absent",
                    "training_traces_link": "absent"}
    assert rec["publication"]["message"] == "Incomplete RL model publication: missing weights, training_logs, training_traces_link"
    assert rec["trace_export"]["passed"] is False and rec["trace_export"]["result_coverage"] == 0.9
    assert {"publication-incomplete", "trace-export"} <= _codes(rec, "blocking") and code == 20


def test_trace_link_not_applicable_for_standard(std_run, tmp_path, B, cli):
    run, bundle = std_run
    pub = B.make_published(tmp_path / "pub", traces_link=False, coverage=None)
    code, rec, _ = cli(run, "--bundle", bundle, "--published-dir", pub)
    arts = {a["artifact"]: a["status"] for a in rec["publication"]["artifacts"]}
    assert arts["training_traces_link"] == "not applicable" and code == 0


def test_bad_inputs_reported_not_crashing(tmp_path, B, cli, schema):
    import struct
    run, bundle = B.make_run(tmp_path / "r")
    ex = run / "exports"
    (ex / "global_step_20" / "policy" / "model-00001-of-00002.safetensors").write_bytes(struct.pack("<Q", 1 << 60) + b"x")
    p2 = ex / "global_step_40" / "policy" / "model-00002-of-00002.safetensors"
    p2.write_bytes(struct.pack("<Q", 5) + b"nojsn")
    secret_file = tmp_path / "outside.txt"
    secret_file.write_text("outside the run\n")
    os.symlink(secret_file, run / "ckpts" / "global_step_60" / "policy" / "huggingface" / "tokenizer_config.json")
    (run / "exports" / "global_step_60" / "policy" / "config.json").write_bytes(b"\xff\xfe not json")
    os.mkfifo(run / "exports" / "global_step_80" / "policy" / "tokenizer.fifo")
    code, rec, _ = cli(run, "--bundle", bundle)
    jsonschema.validate(rec, schema)
    c = {x["id"]: x for x in rec["candidates"]}
    assert "exceeds" in json.dumps(c["export@20"]["checks"]) and not c["export@20"]["valid"]
    assert "not JSON" in json.dumps(c["export@40"]["checks"]) and not c["export@40"]["valid"]
    assert not c["export@60"]["valid"]
    assert "unsafe-path" in _codes(rec, "blocking") and code == 20
    assert any("outside the run tree" in p["message"] for p in rec["problems"])
    assert any("not a regular file" in p["message"] for p in rec["problems"])


def test_audit_writes_nothing(tmp_path, B, cli):
    root = tmp_path / "tree"
    run, bundle = B.make_run(root, mode="agentic", fail_at=30, tail_attempt_error=True)
    pub = B.make_published(root / "pub", secrets=True)
    before = B.snapshot(tmp_path)
    for fmt in ("json", "markdown"):
        for pol in ([], ["--policy", "ema-reward:alpha=1/3"]):
            cli(run, "--bundle", bundle, "--published-dir", pub, "--export-dir", run / "exports", *pol, fmt=fmt)
    assert B.snapshot(tmp_path) == before


def test_deterministic_output(std_run, cli):
    run, bundle = std_run
    a = cli(run, "--bundle", bundle, "--policy", "ema-reward", fmt="markdown")[1]
    b = cli(run, "--bundle", bundle, "--policy", "ema-reward", fmt="markdown")[1]
    assert a == b and "evaluated 2026-08-02T00:00:00Z" in a


@pytest.mark.parametrize("argv", [["--policy", "best-guess"], ["--policy", "ema-reward:alpha=2"],
                                  ["--policy", "ema-reward:beta=1"], ["--bundle", "/nonexistent/x"]])
def test_usage_errors_exit_2(std_run, cli, argv):
    run, _ = std_run
    code, out, err = cli(run, *argv)
    assert code == 2 and "usage error" in err and "Traceback" not in err


def test_run_not_a_directory_exit_2(tmp_path, cli):
    code, out, err = cli(tmp_path / "missing")
    assert code == 2


def test_internal_failure_exit_1_without_traceback(std_run, cli, schema, monkeypatch):
    import rlhealth.audit.core as core

    def boom(*a, **k):
        raise RuntimeError("synthetic failure " + "hf_" + "FAKEFAKEFAKEFAKEFAKEFAKE11")
    monkeypatch.setattr(core, "build_record", boom)
    run, bundle = std_run
    code, rec, err = cli(run, "--bundle", bundle)
    assert code == 1 and rec["status"] == "internal-failure" and "Traceback" not in err
    assert "synthetic failure <redacted:huggingface_token>" in rec["error"]
    jsonschema.validate(rec, schema)
    code, md, err = cli(run, "--bundle", bundle, fmt="markdown")
    assert code == 1 and "STATUS: internal-failure" in md and "Traceback" not in md + err


def test_markdown_renders_all_sections(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", mode="agentic", state="failed", fail_at=50, tail_attempt_error=True)
    pub = B.make_published(tmp_path / "pub", secrets=True)
    code, md, err = cli(run, "--bundle", bundle, "--published-dir", pub, "--policy", "ema-reward", fmt="markdown")
    for head in ("STATUS: BLOCKED", "TERMINAL STATE:", "SOURCE REVISION: 0123abcd4567", "SELECTED ARTIFACT: export@",
                 "FIRST FAILURE CAUSE: attempt 0", "RESUME SAFETY:", "## Required artifacts", "## Resolved configuration",
                 "## Candidates", "## Selection", "| Step | Reward | EMA | Eligible |", "## Publication",
                 "## Preserved locations", "## Remaining work", "| published: weights | present |"):
        assert head in md, head


def test_agentic_from_resolved_config_file_alone(tmp_path, cli):
    run = tmp_path / "plain-name"
    run.mkdir()
    (run / "resolved_config.yaml").write_text("trainer:\n  max_steps: 2\ngenerator:\n  harbor:\n    n_concurrent_trials: 8\n")
    (run / "finelog.log").write_text('WANDB_MIRROR kind=train step=2 metrics={"reward/avg_raw_reward": 1}\n')
    code, rec, _ = cli(run)
    assert rec["mode"]["value"] == "agentic" and rec["mode"]["evidence"] == ["generator.harbor"]
    (run / "resolved_config.yaml").write_text("trainer:\n  max_steps: 2\n  run_name: harbor-terminal_bench-daytona\n")
    code, rec, _ = cli(run)
    assert rec["mode"]["value"] == "standard"  # values (the run name) never classify


def test_empty_training_logs_dir_is_absent(std_run, tmp_path, B, cli):
    run, bundle = std_run
    pub = B.make_published(tmp_path / "pub", logs=False)
    (pub / "training_logs").mkdir()
    code, rec, _ = cli(run, "--bundle", bundle, "--published-dir", pub)
    assert {a["artifact"]: a["status"] for a in rec["publication"]["artifacts"]}["training_logs"] == "absent"


def test_failed_without_error_line_is_flagged(tmp_path, B, cli):
    run, bundle = B.make_run(tmp_path / "r", state="failed", budget=100, ckpt_steps=(20,), export_steps=())
    lines = (bundle / "finelog.log").read_text().splitlines()
    (bundle / "finelog.log").write_text("\n".join(lines[:60]) + "\n")
    code, rec, _ = cli(run, "--bundle", bundle)
    assert rec["terminal_state"]["outcome"] == "failed"
    assert rec["first_failure_cause"] is None and "no-first-error" in _codes(rec, "warning")
