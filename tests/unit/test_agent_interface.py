"""The typed interface for agents: --version, schema, JSON on usage errors, given dispatcher inputs,
the machine form of next_action, the verdict history."""
from __future__ import annotations

import json
import shutil
import subprocess
from importlib import resources

import jsonschema
import pytest

from rlhealth import __version__
from rlhealth.report import load_schema

from corpus import incident_dirs, load_expected, rlhealth_argv

SCHEMA = load_schema()
AUDIT_SCHEMA = json.loads(resources.files("rlhealth").joinpath("schema", "audit.schema.json").read_text())


def run(*args):
    return subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, check=False, cwd="/")


def incident(fragment):
    d = next(d for d in incident_dirs() if fragment in d.name)
    return d, load_expected(d)


def test_version_and_schema():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"rlhealth {__version__}"
    for name, schema in (("report", SCHEMA), ("audit", AUDIT_SCHEMA)):
        out = run("schema", name)
        assert out.returncode == 0 and json.loads(out.stdout) == schema
    assert json.loads(run("schema").stdout) == SCHEMA
    assert run("schema", "bogus").returncode == 2


@pytest.mark.parametrize("argv,command", [
    (["diagnose", "--format", "json"], "diagnose"),
    (["diagnose", "x", "--format=json", "--bogus"], "diagnose"),
    (["diagnose", "x", "--format", "json", "--now", "yesterday"], "diagnose"),
    (["diagnose", "x", "--format", "json", "--model", "m", "--total-params-b", "3", "--active-params-b", "30"], "diagnose"),
    (["diagnose", "x", "--format", "json", "--total-params-b", "3"], "diagnose"),
    (["--format", "json"], None),
    (["nonsense", "--format", "json"], None),
    (["probe", "--backend", "iris", "--format", "json"], "probe"),
    (["probe", "--backend", "slurm", "--job", "x;rm", "--host", "h", "--format", "json"], "probe"),
    (["audit", "/nonexistent", "--format", "json"], "audit"),
    (["audit", "--format", "json", "--policy"], "audit"),
    (["triage", "/nonexistent", "--format", "json"], "triage"),
    (["triage", "/", "--format", "json", "--jobs", "0"], "triage"),
    (["history", "--format", "json"], "history"),
])
def test_usage_errors_under_json_print_a_valid_document_and_exit_2(argv, command):
    out = run(*argv)
    assert out.returncode == 2, out.stderr
    assert "usage:" not in out.stdout and "usage:" not in out.stderr  # no plain argparse usage text
    doc = json.loads(out.stdout)
    assert doc["error"]["kind"] == "usage" and doc["error"]["exit_code"] == 2 and doc["error"]["message"]
    if command == "audit":
        jsonschema.validate(doc, AUDIT_SCHEMA)
        assert doc["status"] == "usage-error"
    elif command == "triage":
        assert doc["schema"] == "rlhealth.triage/v1" and doc["jobs"] == []
    elif command == "history":
        assert doc["schema"] == "rlhealth.history/v1" and doc["entries"] == []
    else:
        jsonschema.validate(doc, SCHEMA)
        assert doc["verdict"] == "ERROR"


def test_usage_errors_without_json_keep_argparse_usage_text():
    out = run("diagnose")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.startswith("usage: rlhealth diagnose")


def test_given_dispatcher_inputs_are_marked_given_and_printed():
    d, e = incident("colocated-wedge")
    args = ["diagnose", str(d / "bundle"), "--now", e["now"], "--gpu", "H200-141GB", "--model", "Qwen3-30B-A3B",
            "--total-params-b", "30.5", "--active-params-b", "3.3", "--focus", "TP=2+EP=2 first run", "--focus", "new verifier"]
    doc = json.loads(run(*args, "--format", "json").stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["given"] == {"source": "given", "gpu": "H200-141GB",
                            "model": {"name": "Qwen3-30B-A3B", "total_params_b": 30.5, "active_params_b": 3.3},
                            "focus": ["TP=2+EP=2 first run", "new verifier"]}
    md = run(*args).stdout
    assert "GIVEN (dispatcher inputs, not observed): gpu H200-141GB; model Qwen3-30B-A3B (30.5B total, 3.3B active)" in md
    assert "  - focus: TP=2+EP=2 first run\n  - focus: new verifier\n" in md
    plain = json.loads(run("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json").stdout)
    assert plain["given"] is None
    assert "GIVEN" not in run("diagnose", str(d / "bundle"), "--now", e["now"]).stdout
    # a dense model: active parameters default to the total
    dense = json.loads(run("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json", "--model", "Qwen3-8B",
                           "--total-params-b", "8.2").stdout)
    assert dense["given"]["model"] == {"name": "Qwen3-8B", "total_params_b": 8.2, "active_params_b": 8.2}


@pytest.mark.parametrize("fragment,kind", [
    ("colocated-wedge", "kill"), ("baseline-healthy-agentic", "leave"), ("terminal-failed-survivor-cascade", "fix_and_relaunch"),
    ("stall-without-live-evidence", "probe"), ("stale-evidence", "probe"), ("metrics-parse-failure", "investigate"),
])
def test_next_action_machine_form(fragment, kind):
    d, e = incident(fragment)
    doc = json.loads(run("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json").stdout)
    jsonschema.validate(doc, SCHEMA)
    machine = doc["next_action_machine"]
    assert machine["kind"] == kind, (machine, doc["reasoning"])
    if kind == "probe":
        assert machine["command"] == ["rlhealth", "probe", "--backend", "iris", "--cluster", doc["job"]["cluster"],
                                      "--job", doc["job"]["id"], "--format", "json"]
    else:
        assert machine["command"] is None


def test_probe_argv_for_a_syncdown_bundle_carries_bundle_root_and_slurm_host(tmp_path):
    """The probe argv targets the same bundle: --bundle-root from the layout; slurm --host from the
    last recorded probe (else the cluster name as the ssh alias) and --experiment-dir from the manifest."""
    from rlhealth.history import append
    from rlhealth.next_action import probe_argv
    from rlhealth.report import JobRef

    class R:
        job = JobRef(id="/slurm/48212", cluster="jsc-jupiter", backend="slurm")

    bundle = tmp_path / "root" / "jobs" / "jsc-jupiter" / "slurm" / "48212"
    bundle.mkdir(parents=True)
    manifest = {"job": {"experiment_dir": "/e/scratch/rl/exp7"}}
    argv = probe_argv(R, manifest, bundle)
    assert argv == ["rlhealth", "probe", "--backend", "slurm", "--host", "jsc-jupiter", "--cluster", "jsc-jupiter",
                    "--job", "48212", "--experiment-dir", "/e/scratch/rl/exp7", "--bundle-root",
                    str((tmp_path / "root").resolve()), "--format", "json"]
    append(bundle, {"verdict": "ERROR", "t": "2026-08-01T00:00:00Z",
                    "argv": ["rlhealth", "probe", "--backend", "slurm", "--host", "jupiter-login", "--job", "48212"]})
    assert probe_argv(R, manifest, bundle)[5] == "jupiter-login"
    R.job = JobRef(id="unknown", cluster="unknown", backend="unknown")
    assert probe_argv(R, None, bundle) is None


def test_diagnose_record_and_history(tmp_path):
    d, e = incident("colocated-wedge")
    bundle = tmp_path / "bundle"
    shutil.copytree(d / "bundle", bundle)
    assert run("history", str(bundle)).stdout.splitlines()[1].startswith("no entries")
    assert run("diagnose", str(bundle), "--now", e["now"], "--max-age", "1m", "--record").returncode == 20
    assert run("diagnose", str(bundle), "--now", e["now"], "--record", "--format", "json").returncode == 10
    run("diagnose", str(bundle), "--now", e["now"])  # not recorded without --record
    path = bundle / "rlhealth" / "verdicts.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert set(first) >= {"t", "verdict", "confidence", "gates", "capture", "rlhealth", "command"}
    assert first["verdict"] == "ERROR" and first["rlhealth"] == __version__ and first["command"] == "diagnose"
    from rlhealth.usage import parse_now
    assert first["t"] == parse_now(e["now"]).strftime("%Y-%m-%dT%H:%M:%SZ")
    with path.open("a") as fh:
        fh.write("{not json\n")
    out = run("history", str(bundle))
    text = out.stdout.splitlines()
    assert out.returncode == 0 and len(text) == 4
    assert " ERROR " in text[1] and " KILL " in text[2] and text[2].endswith("<- flipped")
    assert "LIV:FAIL RES:PASS ROL:PASS DYN:PASS" in text[2]
    assert text[3].startswith("problem: rlhealth/verdicts.jsonl:3: unreadable line skipped")
    doc = json.loads(run("history", str(bundle), "--format", "json").stdout)
    assert [x["flipped"] for x in doc["entries"]] == [False, True] and len(doc["problems"]) == 1


def test_record_on_an_unwritable_bundle_warns_and_keeps_the_verdict(tmp_path):
    d, e = incident("colocated-wedge")
    bundle = tmp_path / "bundle"
    shutil.copytree(d / "bundle", bundle)
    (bundle / "rlhealth").write_text("a file where the rlhealth/ directory would go\n")
    out = run("diagnose", str(bundle), "--now", e["now"], "--record")
    assert out.returncode == 10 and "verdict not recorded" in out.stderr


def test_given_inputs_fill_what_the_evidence_lacks_and_focus_items_are_answered():
    d, e = incident("unknown-gpu-throughput-floored")
    plain = json.loads(run("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json").stdout)
    assert "GPU type unknown" in plain["gates"]["resources"]["finding"]
    doc = json.loads(run("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json", "--gpu", "H100",
                         "--focus", "TP=2+EP=2 first run", "--focus", "something nobody wrote a topic for").stdout)
    resources = doc["gates"]["resources"]["finding"]
    assert "GPU type unknown" not in resources and "on H100-80GB-SXM" in resources, resources
    assert "Focus 'TP=2+EP=2 first run' (serving geometry): RESOURCES FAIL" in doc["reasoning"], doc["reasoning"]
    assert "Focus 'something nobody wrote a topic for' (no topic in rules/focus.yaml matches it: every gate): LIVENESS" \
        in doc["reasoning"]
