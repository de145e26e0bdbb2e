"""`rlhealth mcp`: the tools over stdio, driven by the official MCP SDK's own client."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from corpus import incident_dirs, load_expected, rlhealth_argv

mcp = pytest.importorskip("mcp", reason="the optional extra rlhealth[mcp] (scripts/test installs it)")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


def incident(fragment):
    d = next(d for d in incident_dirs() if fragment in d.name)
    return d, load_expected(d)


async def _session_calls(calls):
    argv = rlhealth_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd="/")
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            results = [await session.call_tool(name, args) for name, args in calls]
            return tools, results


def _doc(result, error: bool = False) -> dict:
    assert result.is_error is error, result
    text = next(c.text for c in result.content if getattr(c, "type", "") == "text")
    doc = json.loads(text)
    assert result.structured_content == doc
    return doc


def test_mcp_lists_the_five_tools_and_answers_like_the_cli(tmp_path):
    import shutil

    d, e = incident("colocated-wedge")
    bundle = str(d / "bundle")
    fleet = tmp_path / "jobs" / "cw-us-east-02a" / "alice"
    for name in ("colocated-wedge", "baseline-healthy-agentic", "stale-evidence"):
        shutil.copytree(incident(name)[0] / "bundle", fleet / name)
    tools, (diag, tri, fleet_tri, hist, bad) = anyio.run(_session_calls, [
        ("diagnose", {"bundle": bundle, "now": e["now"]}),
        ("triage", {"root": str(d), "now": e["now"]}),
        ("triage", {"root": str(tmp_path), "now": e["now"]}),
        ("history", {"bundle": bundle}),
        ("diagnose", {"bundle": bundle, "now": "yesterday"}),
    ])
    names = {t.name for t in tools.tools}
    assert names == {"diagnose", "probe", "audit", "triage", "history", "schema", "examples"}
    schema = next(t for t in tools.tools if t.name == "diagnose").input_schema
    assert schema["required"] == ["bundle"] and "focus" in schema["properties"]

    cli = subprocess.run(rlhealth_argv("diagnose", bundle, "--now", e["now"], "--format", "json"),
                         capture_output=True, text=True, check=False, cwd="/")
    assert cli.returncode == 10
    assert _doc(diag) == json.loads(cli.stdout)
    assert _doc(diag)["verdict"] == "KILL"
    jobs = _doc(tri)["jobs"]
    assert [(j["path"], j["verdict"]) for j in jobs] == [(bundle, "KILL")]
    cli_fleet = subprocess.run(rlhealth_argv("triage", str(tmp_path), "--now", e["now"], "--format", "json"),
                               capture_output=True, text=True, check=False, cwd="/")
    assert _doc(fleet_tri) == json.loads(cli_fleet.stdout) and len(_doc(fleet_tri)["jobs"]) == 3
    assert _doc(hist)["entries"] == []
    err = _doc(bad, error=True)
    assert err["error"]["kind"] == "usage" and "yesterday" in err["error"]["message"]


def test_mcp_probe_and_audit_tools_report_usage_errors_as_documents():
    tools, (probe, audit) = anyio.run(_session_calls, [
        ("probe", {"backend": "slurm", "job": "not-a-job-id", "host": "login"}),
        ("audit", {"run": "/nonexistent-run"}),
    ])
    p, a = _doc(probe, error=True), _doc(audit, error=True)
    assert p["schema"] == "rlhealth.report/v1" and p["error"]["kind"] == "usage"
    assert a["schema"] == "rlhealth.audit/v1" and a["status"] == "usage-error" and a["error"]["exit_code"] == 2


def _cli_options(command: str) -> set[str]:
    """The option names (dests) of one CLI command, from the parser itself (less ``--output``, a
    file the tool's answer replaces, and ``--quiet``, the terminal's progress line a tool never draws)."""
    from rlhealth.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices[command]
    return {a.dest for a in sub._actions if a.dest not in ("help", "output", "quiet")}


def test_mcp_tool_schemas_describe_every_property_with_enums_and_read_only_hints():
    tools, _ = anyio.run(_session_calls, [])
    by_name = {t.name: t for t in tools.tools}
    for tool in tools.tools:
        assert tool.annotations is not None and tool.annotations.read_only_hint is True, tool.name
        assert tool.annotations.destructive_hint is False, tool.name
        assert tool.description, tool.name
        schema = tool.input_schema
        assert schema.get("additionalProperties") is False, tool.name
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), (tool.name, name)

    def enum(tool, prop):
        p = by_name[tool].input_schema["properties"][prop]
        return set(p.get("enum") or next(x["enum"] for x in p["anyOf"] if "enum" in x))
    assert enum("diagnose", "mode") == enum("probe", "mode") == {"agentic", "standard"}
    assert enum("probe", "backend") == {"iris", "slurm"}
    assert enum("diagnose", "format") == enum("audit", "format") == {"json", "markdown", "html"}
    assert enum("triage", "format") == enum("history", "format") == {"json", "markdown"}
    assert enum("schema", "name") == {"report", "audit"}
    # every CLI option of a command is an input of its tool
    for command in ("diagnose", "probe", "audit", "triage", "history"):
        missing = _cli_options(command) - set(by_name[command].input_schema["properties"])
        assert not missing, (command, missing)
    assert {"trace_root", "campaign", "break_step", "break_time", "diagnosis"} <= set(by_name["audit"].input_schema["properties"])


def test_mcp_failures_are_errors_with_the_error_document(tmp_path):
    d, e = incident("colocated-wedge")
    bundle = str(d / "bundle")
    calls = [
        ("diagnose", {"bundle": str(tmp_path / "nonexistent"), "now": e["now"]}),
        ("diagnose", {"bundle": bundle, "now": "not-a-time"}),
        ("diagnose", {"bundle": bundle, "now": e["now"], "max_age": "-5m"}),
        ("diagnose", {"bundle": bundle, "now": e["now"], "max_age": "soon"}),
        ("diagnose", {"bundle": bundle, "now": e["now"], "gpu": "banana"}),
        ("diagnose", {"bundle": bundle, "now": e["now"], "colour": "always"}),
        ("diagnose", {"bundle": bundle, "now": e["now"], "mode": "sideways"}),
        ("history", {"bundle": str(tmp_path / "nonexistent")}),
        ("triage", {"root": str(tmp_path / "nonexistent")}),
        ("triage", {"root": str(tmp_path), "jobs": 0}),
        ("audit", {"run": bundle, "break_time": "tuesday"}),
        ("audit", {"run": bundle, "diagnosis": str(tmp_path / "missing.json")}),
        ("probe", {"backend": "slurm", "job": "1", "now": "yesterday"}),
        ("probe", {"backend": "lsf", "job": "1"}),
        ("schema", {"name": "nope"}),
        ("examples", {"verbose": True}),
    ]
    _, results = anyio.run(_session_calls, calls)
    for (name, args), result in zip(calls, results):
        doc = _doc(result, error=True)
        assert doc["error"]["kind"] == "usage" and doc["error"]["exit_code"] == 2, (name, args, doc["error"])
    messages = [_doc(r, error=True)["error"]["message"] for r in results]
    assert "does not exist" in messages[0] and "not-a-time" in messages[1]
    assert "-5m" in messages[2] and "soon" in messages[3]
    assert "banana" in messages[4] and "H100-80GB-SXM" in messages[4]        # the known GPUs are listed
    assert "colour" in messages[5] and "mode" in messages[6] and "--break-time" in messages[10]
    assert _doc(results[0], error=True)["schema"] == "rlhealth.report/v1"
    assert _doc(results[7], error=True)["schema"] == "rlhealth.history/v1"
    assert _doc(results[10], error=True)["schema"] == "rlhealth.audit/v1"


def test_mcp_schema_examples_and_other_formats(tmp_path):
    d, e = incident("colocated-wedge")
    bundle = str(d / "bundle")
    _, (schema, audit_schema, examples, md, audit) = anyio.run(_session_calls, [
        ("schema", {}), ("schema", {"name": "audit"}), ("examples", {}),
        ("diagnose", {"bundle": bundle, "now": e["now"], "format": "markdown"}),
        ("audit", {"run": bundle, "now": e["now"], "break_step": 3}),
    ])
    cli = subprocess.run(rlhealth_argv("schema", "report"), capture_output=True, text=True, check=False, cwd="/")
    assert _doc(schema) == json.loads(cli.stdout)
    assert _doc(audit_schema) != _doc(schema) and "audit" in json.dumps(_doc(audit_schema))
    listed = _doc(examples)
    names = {x["name"] for x in listed["examples"]}
    assert {"colocated-wedge", "healthy-agentic"} <= names
    assert all(Path(x["path"]).is_dir() for x in listed["examples"]) and listed["listing"]
    assert not md.is_error and md.structured_content is None
    text = md.content[0].text
    cli_md = subprocess.run(rlhealth_argv("diagnose", bundle, "--now", e["now"]), capture_output=True, text=True,
                            check=False, cwd="/")
    assert text.rstrip("\n") == cli_md.stdout.rstrip("\n") and text.startswith("RL-JOB-HEALTH")
    cli_audit = subprocess.run(rlhealth_argv("audit", bundle, "--now", e["now"], "--break-step", "3", "--format", "json"),
                               capture_output=True, text=True, check=False, cwd="/")
    assert _doc(audit, error=cli_audit.returncode in (1, 2)) == json.loads(cli_audit.stdout)
