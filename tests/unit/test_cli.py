"""Command line: exit codes, JSON always valid, usage errors, bad bundles."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from rlhealth import cli
from rlhealth.report import load_schema

from corpus import incident_dirs, load_expected, rlhealth_argv

SCHEMA = load_schema()


def run(*args):
    return subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, check=False, cwd="/")


def incident(fragment):
    d = next(d for d in incident_dirs() if fragment in d.name)
    return d, load_expected(d)


def test_exit_codes_follow_the_verdict():
    for fragment, code in (("baseline-healthy-agentic", 0), ("colocated-wedge", 10), ("stale-evidence", 20)):
        d, e = incident(fragment)
        out = run("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json")
        assert out.returncode == code, (fragment, out.stderr)
        doc = json.loads(out.stdout)
        jsonschema.validate(doc, SCHEMA)
        assert doc["verdict"] == e["verdict"]


def test_markdown_is_the_default_and_matches_the_seed_format():
    d, e = incident("colocated-wedge")
    out = run("diagnose", str(d / "bundle"), "--now", e["now"])
    lines = out.stdout.splitlines()
    assert lines[0].startswith("RL-JOB-HEALTH — /alice/rl-qwen8b-tb — captured ")
    for head in ("VERDICT: KILL", "CONFIDENCE: ", "MODE: agentic", "RESTARTS: ", "LIVENESS:  FAIL — ", "RESOURCES: ",
                 "ROLLOUTS:  ", "DYNAMICS:  ", "DUTY CYCLE: ", "REASONING: ", "NEXT ACTION: ", "FLIP SIGNAL: "):
        assert any(line.startswith(head) for line in lines), head


def test_nonexistent_bundle_is_a_usage_error_not_a_traceback(tmp_path):
    out = run("diagnose", str(tmp_path / "nope"), "--now", "2026-08-01T12:00:00Z", "--format", "json")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["error"] == {"kind": "usage", "exit_code": 2, "message": f"BUNDLE does not exist: {tmp_path / 'nope'}"}


def test_an_empty_bundle_directory_is_an_error_verdict(tmp_path):
    out = run("diagnose", str(tmp_path), "--now", "2026-08-01T12:00:00Z", "--format", "json")
    assert out.returncode == 20 and "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] == "ERROR" and "no manifest.json and no rlhealth capture" in json.dumps(doc)


def test_usage_errors_exit_2():
    assert run("diagnose").returncode == 2
    assert run("diagnose", "x", "--now", "yesterday").returncode == 2
    assert run("diagnose", "x", "--max-age", "soon").returncode == 2
    assert run("frobnicate").returncode == 2


def test_internal_failure_still_prints_a_valid_report(monkeypatch, capsys):
    import rlhealth.diagnose as diag

    def boom(*a, **k):
        raise RuntimeError("simulated internal bug")
    monkeypatch.setattr(diag, "diagnose", boom)
    code = cli.main(["diagnose", "/", "--format", "json", "--now", "2026-08-01T12:00:00Z"])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] == "ERROR" and "simulated internal bug" in doc["reasoning"]


def test_max_age_and_capture_flags(tmp_path):
    d, e = incident("baseline-healthy-agentic")
    out = run("diagnose", str(d / "bundle"), "--now", e["now"], "--max-age", "1s", "--format", "json")
    assert json.loads(out.stdout)["verdict"] == "ERROR"   # 10 minutes old > 1 s
    out = run("diagnose", str(d / "bundle"), "--now", e["now"], "--capture", "20990101T000000Z", "--format", "json")
    assert out.returncode == 2
    assert json.loads(out.stdout)["error"]["message"].startswith("--capture 20990101T000000Z: no such capture in ")


def test_examples_ship_with_the_package():
    out = run("examples")
    assert "colocated-wedge: " in out.stdout and "--now 2026-08-01T15:25:00Z" in out.stdout
    path = run("examples", "--path", "colocated-wedge").stdout.strip()
    assert (Path(path) / "manifest.json").is_file()
    res = run("diagnose", path, "--now", "2026-08-01T15:25:00Z", "--format", "json")
    assert res.returncode == 10 and json.loads(res.stdout)["verdict"] == "KILL"
    assert run("examples", "--path", "nope").returncode == 2
