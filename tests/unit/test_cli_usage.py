"""Usage errors are usage errors, in every command: exit 2, one clear line on stderr, and under
``--format json`` the command's own document with ``error.kind: "usage"``. The checks live in
``rlhealth.usage`` and ``rlhealth.checks`` (plain functions the MCP server calls too)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest

from rlhealth import checks as C
from rlhealth import usage as U
from rlhealth.report import load_schema

from corpus import REPO, incident_dirs, rlhealth_argv

SCHEMA = load_schema()
AUDIT_SCHEMA = json.loads((REPO / "rlhealth" / "schema" / "audit.schema.json").read_text())
EXAMPLE = REPO / "rlhealth" / "examples" / "colocated-wedge"


def run(*args, cwd="/"):
    import subprocess
    return subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, check=False, cwd=cwd)


def _bundle_with_captures(tmp_path):
    b = tmp_path / "job"
    for stamp in ("20260801T120000Z", "20260801T130000Z"):
        (b / "rlhealth" / "captures" / stamp).mkdir(parents=True)
    return b


@pytest.fixture()
def places(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    return {"missing": str(tmp_path / "missing"), "file": str(f), "dir": str(tmp_path),
            "captures": str(_bundle_with_captures(tmp_path))}


CASES = [
    # (command line with {placeholders}, message, documents shape)
    (["diagnose", "{missing}"], "BUNDLE does not exist: {missing}", "report"),
    (["diagnose", "{file}"], "BUNDLE is not a directory: {file}", "report"),
    (["diagnose", "{captures}", "--capture", "2099"],
     "--capture 2099: no such capture in {captures}/rlhealth/captures (captures there: 20260801T120000Z, 20260801T130000Z)",
     "report"),
    (["diagnose", "{dir}", "--capture", "20260801T120000Z"],
     "--capture 20260801T120000Z: no such capture in {dir}/rlhealth/captures (the bundle holds no capture)", "report"),
    (["diagnose", "{dir}", "--now", "yesterday"], "--now: not an ISO-8601 time: 'yesterday' (e.g. 2026-08-01T15:25:00Z)",
     "report"),
    (["diagnose", "{dir}", "--gpu", "banana"], "--gpu banana: not in the hardware table; known: H100-80GB-SXM, ", "report"),
    (["diagnose", "{dir}", "--max-age", "-5m"],
     "--max-age: duration must be positive and finite: '-5m' (use e.g. 30m, 2h, 90s)", "report"),
    (["diagnose", "{dir}", "--max-age=-5m"],
     "--max-age: duration must be positive and finite: '-5m' (use e.g. 30m, 2h, 90s)", "report"),
    (["probe", "--backend", "slurm", "--job", "1", "--host", "h", "--gpu", "banana"],
     "--gpu banana: not in the hardware table; known: ", "report"),
    (["probe", "--backend", "slurm", "--job", "1", "--host", "h", "--now", "soon"], "--now: not an ISO-8601 time: 'soon'",
     "report"),
    (["probe", "--backend", "slurm", "--job", "1", "--host", "h", "--deadline", "-1m"],
     "--deadline: duration must be positive and finite: '-1m'", "report"),
    (["audit", "{missing}"], "RUN does not exist: {missing}", "audit"),
    (["audit", "{file}"], "RUN is not a directory: {file}", "audit"),
    (["audit", "{dir}", "--now", "yesterday"], "--now: not an ISO-8601 time: 'yesterday'", "audit"),
    (["audit", "{dir}", "--bundle", "{missing}"], "--bundle does not exist: {missing}", "audit"),
    (["triage", "{missing}"], "ROOT does not exist: {missing}", "triage"),
    (["triage", "{file}"], "ROOT is not a directory: {file}", "triage"),
    (["triage", "{dir}", "--now", "yesterday"], "--now: not an ISO-8601 time: 'yesterday'", "triage"),
    (["triage", "{dir}", "--max-age", "-5m"], "--max-age: duration must be positive and finite: '-5m'", "triage"),
    (["history", "{missing}"], "BUNDLE does not exist: {missing}", "history"),
    (["history", "{file}"], "BUNDLE is not a directory: {file}", "history"),
]


@pytest.mark.parametrize("argv,message,shape", CASES, ids=[" ".join(c[0][:4]) for c in CASES])
def test_usage_errors_exit_2_with_one_line_and_a_json_document(places, argv, message, shape):
    argv = [a.format(**places) for a in argv]
    message = message.format(**places)
    text = run(*argv)
    assert text.returncode == 2 and text.stdout == ""
    assert text.stderr.count("\n") == 1 and text.stderr.startswith(f"rlhealth: usage error: {message}"), text.stderr
    out = run(*argv, "--format", "json")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    assert doc["error"]["kind"] == "usage" and doc["error"]["exit_code"] == 2
    assert doc["error"]["message"].startswith(message)
    if shape == "report":
        jsonschema.validate(doc, SCHEMA)
        assert doc["verdict"] == "ERROR"
    elif shape == "audit":
        jsonschema.validate(doc, AUDIT_SCHEMA)
        assert doc["status"] == "usage-error"
    else:
        assert doc["schema"] == f"rlhealth.{shape}/v1"


def test_gpu_names_come_from_the_hardware_table_in_any_case():
    table = (REPO / "rules" / "tables" / "gpu_hbm_bandwidth.csv").read_text().splitlines()[1:]
    names = [row.split(",")[0] for row in table if row.strip()]
    assert C.known_gpus() == names
    assert C.check_gpu("h100-80gb-sxm") == "H100-80GB-SXM" and C.check_gpu(None) is None
    assert C.check_gpu("H100") == "H100" and C.check_gpu("NVIDIA H200") == "NVIDIA H200"   # names the table maps
    with pytest.raises(U.UsageError, match="known: " + ", ".join(names)):
        C.check_gpu("banana")


def test_a_known_gpu_is_accepted_and_reported_as_the_table_spells_it():
    d = next(d for d in incident_dirs() if "colocated-wedge" in d.name)
    out = run("diagnose", str(d / "bundle"), "--now", "2026-08-01T15:25:00Z", "--gpu", "h200-141gb", "--format", "json")
    assert out.returncode == 10 and json.loads(out.stdout)["given"]["gpu"] == "H200-141GB"


def test_an_existing_capture_is_accepted(tmp_path):
    b = _bundle_with_captures(tmp_path)
    C.check_capture(b, "20260801T120000Z")
    C.check_capture(b, None)


def test_dash_values_reach_their_option():
    assert U.join_dash_values(["diagnose", "b", "--max-age", "-5m", "--now", "-1"]) == \
        ["diagnose", "b", "--max-age=-5m", "--now=-1"]
    assert U.join_dash_values(["diagnose", "b", "--max-age", "--format", "json"]) == \
        ["diagnose", "b", "--max-age", "--format", "json"]      # a real option after it stays an option
    assert U.join_dash_values(["triage", "--", "--max-age", "-5m"]) == ["triage", "--", "--max-age", "-5m"]


def test_check_command_takes_any_object_with_the_option_names(tmp_path):
    """The MCP server validates its tool arguments through the same function."""
    C.check_command("diagnose", SimpleNamespace(bundle=str(tmp_path), now="2026-08-01T00:00:00Z", max_age="30m"))
    with pytest.raises(U.UsageError, match="BUNDLE does not exist"):
        C.check_command("diagnose", SimpleNamespace(bundle=str(tmp_path / "nope")))
    args = SimpleNamespace(bundle=str(tmp_path), gpu="b200-180gb")
    C.check_command("diagnose", args)
    assert args.gpu == "B200-180GB"
    with pytest.raises(U.UsageError, match="--max-age: not a duration"):
        C.check_command("triage", SimpleNamespace(root=str(tmp_path), max_age="soon"))


def test_a_subcommand_typo_prints_the_subcommands_usage():
    out = run("diagnose", "x", "--frmat", "json")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: rlhealth diagnose ")
    assert out.stderr.strip().endswith("rlhealth: usage error: unrecognized arguments: --frmat json "
                                       "(see rlhealth diagnose --help)")
    out = run("rules", "list", "--bogus")
    assert out.returncode == 2 and out.stderr.startswith("usage: rlhealth rules list ")
    out = run("frobnicate")
    assert out.returncode == 2 and out.stderr.startswith("usage: rlhealth ")
