"""Operator signature directories: ``--signatures DIR`` / ``$RLHEALTH_SIGNATURES`` add or replace
signature files without forking; the merged set is what the diagnosis, the rule tests and the
catalog checks use."""
from __future__ import annotations

import json
import os
import subprocess

from corpus import INCIDENTS_DIR, load_expected, rlhealth_argv

INCIDENT = INCIDENTS_DIR / "2026-08-01_cw-us-east-02a_unnamed-exception-policy-rank"
SIGNATURE = """id: flashinfer_jit_failed
title: FlashInfer JIT kernel build failed
family: kernel_build
severity: fatal
gate: liveness
pattern: JITCompilationFailed
caseless: false
transient: false
status: experimental
description: A FlashInfer kernel could not be JIT-compiled.
remediation: Pre-build the FlashInfer kernels in the image, then relaunch.
references:
- an operator's runbook
"""


def _diagnose(*extra, env=None):
    now = load_expected(INCIDENT)["now"]
    run_env = {k: v for k, v in os.environ.items() if k != "RLHEALTH_SIGNATURES"}
    run_env["XDG_CONFIG_HOME"] = "/nonexistent-config-home"
    run_env.update(env or {})
    return subprocess.run(rlhealth_argv("diagnose", str(INCIDENT / "bundle"), "--now", now, "--format", "json", *extra),
                          capture_output=True, text=True, env=run_env, timeout=120)


def test_an_operator_signature_names_an_unnamed_failure(tmp_path):
    (tmp_path / "flashinfer_jit_failed.yaml").write_text(SIGNATURE)
    before = json.loads(_diagnose().stdout)
    assert "no known signature names it" in before["gates"]["liveness"]["finding"]
    for extra, env in (((f"--signatures={tmp_path}",), None), ((), {"RLHEALTH_SIGNATURES": str(tmp_path)}),
                       ((), {"XDG_CONFIG_HOME": str(tmp_path.parent / "cfg")})):
        if env and "XDG_CONFIG_HOME" in env:
            (tmp_path.parent / "cfg" / "rlhealth").mkdir(parents=True, exist_ok=True)
            os.symlink(tmp_path, tmp_path.parent / "cfg" / "rlhealth" / "signatures")
        doc = json.loads(_diagnose(*extra, env=env).stdout)
        assert doc["verdict"] == "KILL"
        assert doc["gates"]["liveness"]["finding"].startswith("FlashInfer JIT kernel build failed"), doc["gates"]["liveness"]
        assert "Pre-build the FlashInfer kernels" in doc["next_action"]
        assert "JITCompilationFailed" in doc["first_error"]["text"]


def test_an_operator_file_replaces_the_packaged_one_of_the_same_name(tmp_path):
    from rlhealth.packaged import _signature_directory
    packaged = (_signature_directory() / "python_traceback.yaml").read_text()
    (tmp_path / "python_traceback.yaml").write_text(packaged.replace("title: Python traceback", "title: Site traceback"))
    doc = json.loads(_diagnose("--signatures", str(tmp_path)).stdout)
    titles = [f["finding"] for f in doc["gates"]["liveness"]["findings"]]
    assert any(t.startswith("Site traceback") for t in titles), titles


def test_a_missing_directory_is_a_usage_error(tmp_path):
    got = _diagnose("--signatures", str(tmp_path / "absent"))
    assert got.returncode == 2
    assert json.loads(got.stdout)["error"]["kind"] == "usage"


def test_an_invalid_operator_signature_fails_the_catalog_checks(tmp_path):
    (tmp_path / "broken.yaml").write_text("id: broken\ntitle: x\n")
    got = subprocess.run(rlhealth_argv("rules", "test", "--signatures", str(tmp_path)), capture_output=True, text=True,
                         timeout=120)
    assert got.returncode != 0
    assert "broken" in got.stdout + got.stderr


def test_rule_tests_run_on_the_merged_set(tmp_path):
    (tmp_path / "flashinfer_jit_failed.yaml").write_text(SIGNATURE)
    got = subprocess.run(rlhealth_argv("rules", "test", "--signatures", str(tmp_path)), capture_output=True, text=True,
                         timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
