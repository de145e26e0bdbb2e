"""`rlhealth mcp`: the five tools over stdio, driven by the official MCP SDK's own client."""
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


def _doc(result) -> dict:
    assert not result.is_error, result
    text = next(c.text for c in result.content if getattr(c, "type", "") == "text")
    doc = json.loads(text)
    if result.structured_content is not None:
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
    assert names == {"diagnose", "probe", "audit", "triage", "history"}
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
    err = _doc(bad)
    assert err["error"]["kind"] == "usage" and "yesterday" in err["error"]["message"]


def test_mcp_probe_and_audit_tools_report_usage_errors_as_documents():
    tools, (probe, audit) = anyio.run(_session_calls, [
        ("probe", {"backend": "slurm", "job": "not-a-job-id", "host": "login"}),
        ("audit", {"run": "/nonexistent-run"}),
    ])
    p, a = _doc(probe), _doc(audit)
    assert p["schema"] == "rlhealth.report/v1" and p["error"]["kind"] == "usage"
    assert a["schema"] == "rlhealth.audit/v1" and a["status"] == "usage-error" and a["error"]["exit_code"] == 2
