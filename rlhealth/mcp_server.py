"""``rlhealth mcp``: diagnose, probe, audit, triage and history as Model Context Protocol tools (stdio).

Needs the optional extra ``rlhealth[mcp]`` (the official ``mcp`` SDK, 2.x). Every tool runs the
command line it mirrors with ``--format json`` through the runner ``serve`` is given (the CLI's
``rlhealth.cli.run_captured``, handed over by ``rlhealth mcp``) and answers
with that very document, so a tool call and the CLI give the same JSON (a usage error included:
the document then carries an ``error`` object). Tools are read-only towards the cluster exactly
as the CLI is; ``probe`` (and ``diagnose`` with ``record``) write only into the job's bundle.
"""
from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from rlhealth import __version__
from rlhealth.commands import Runner
from rlhealth.probes.backends import BACKENDS

server = MCPServer(name="rlhealth", version=__version__,
                   instructions="Read-only KILL / NO-KILL / ERROR diagnosis of one LLM RL training job. "
                                "Every tool returns the rlhealth CLI's JSON document for the same inputs.")

_READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
_WRITES_BUNDLE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
_LIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)


def _opt(argv: list[str], flag: str, value: Any) -> None:
    if value is not None and value != "":
        argv += [flag, str(value)]


def _given(argv: list[str], gpu, model, total_params_b, active_params_b, focus) -> None:
    _opt(argv, "--gpu", gpu)
    _opt(argv, "--model", model)
    _opt(argv, "--total-params-b", total_params_b)
    _opt(argv, "--active-params-b", active_params_b)
    for item in focus or []:
        argv += ["--focus", item]


_runner: Runner | None = None
"""The command-line runner every tool calls; set by ``serve``."""


def _run(argv: list[str]) -> dict[str, Any]:
    if _runner is None:
        raise RuntimeError("rlhealth.mcp_server.serve(runner) was not called")
    text, code = _runner(argv)
    try:
        return json.loads(text)
    except ValueError:  # never expected: every --format json path prints a document
        return {"error": {"kind": "internal", "message": f"rlhealth printed no JSON (exit {code})", "exit_code": code}}


@server.tool(annotations=_WRITES_BUNDLE)
def diagnose(bundle: str, now: str | None = None, max_age: str = "30m", mode: str | None = None,
             capture: str | None = None, record: bool = False, gpu: str | None = None, model: str | None = None,
             total_params_b: float | None = None, active_params_b: float | None = None,
             focus: list[str] | None = None) -> dict[str, Any]:
    """Diagnose one evidence bundle offline: the rlhealth.report/v1 document (verdict KILL / NO-KILL / ERROR,
    per-gate PASS/FAIL/ERROR with quoted evidence, next_action_machine). `now` is ISO-8601 (default: wall
    clock); gpu/model/focus are the dispatcher's given evidence; record=true appends the verdict to the
    bundle's rlhealth/verdicts.jsonl."""
    argv = ["diagnose", bundle, "--format", "json", "--max-age", max_age]
    _opt(argv, "--now", now)
    _opt(argv, "--mode", mode)
    _opt(argv, "--capture", capture)
    if record:
        argv.append("--record")
    _given(argv, gpu, model, total_params_b, active_params_b, focus)
    return _run(argv)


def _names_backends(tool):
    """The tool's description with every registered backend (probes.backends) filled in."""
    tool.__doc__ = tool.__doc__.format(backends="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()))
    return tool


@server.tool(annotations=_LIVE)
@_names_backends
def probe(backend: str, job: str, cluster: str | None = None, host: str | None = None,
          experiment_dir: str | None = None, bundle_root: str | None = None, kubeconfig: str | None = None,
          context: str | None = None, namespace: str | None = None, polls: int | None = None,
          poll_interval: str | None = None, deadline: str | None = None, now: str | None = None,
          max_age: str = "30m", mode: str | None = None, gpu: str | None = None, model: str | None = None,
          total_params_b: float | None = None, active_params_b: float | None = None,
          focus: list[str] | None = None) -> dict[str, Any]:
    """Capture live evidence read-only into the job's bundle, record the verdict in its history, and
    return the diagnosis (rlhealth.report/v1). backend is one of: {backends}."""
    argv = ["probe", "--backend", backend, "--job", job, "--format", "json", "--max-age", max_age]
    for flag, value in (("--cluster", cluster), ("--host", host), ("--experiment-dir", experiment_dir),
                        ("--bundle-root", bundle_root), ("--kubeconfig", kubeconfig), ("--context", context),
                        ("--namespace", namespace), ("--polls", polls), ("--poll-interval", poll_interval),
                        ("--deadline", deadline), ("--now", now), ("--mode", mode)):
        _opt(argv, flag, value)
    _given(argv, gpu, model, total_params_b, active_params_b, focus)
    return _run(argv)


@server.tool(annotations=_READ_ONLY)
def audit(run: str, bundle: str | None = None, export_dir: str | None = None, published_dir: str | None = None,
          policy: str | None = None, now: str | None = None) -> dict[str, Any]:
    """Audit a terminal run and return its completion record (rlhealth.audit/v1)."""
    argv = ["audit", run, "--format", "json"]
    for flag, value in (("--bundle", bundle), ("--export-dir", export_dir), ("--published-dir", published_dir),
                        ("--policy", policy), ("--now", now)):
        _opt(argv, flag, value)
    return _run(argv)


@server.tool(annotations=_READ_ONLY)
def triage(root: str, now: str | None = None, max_age: str = "30m", jobs: int | None = None) -> dict[str, Any]:
    """Diagnose every job bundle under a syncdown root, most urgent first (rlhealth.triage/v1:
    jobs[] with path, job_id, verdict, confidence, gates)."""
    argv = ["triage", root, "--format", "json", "--max-age", max_age]
    _opt(argv, "--now", now)
    _opt(argv, "--jobs", jobs)
    return _run(argv)


@server.tool(annotations=_READ_ONLY)
def history(bundle: str) -> dict[str, Any]:
    """The verdict timeline of one job bundle (rlhealth.history/v1), each entry marked when its verdict flipped."""
    return _run(["history", bundle, "--format", "json"])


def serve(runner: Runner) -> None:
    """Serve the tools over stdio, each running its command line through ``runner``."""
    global _runner
    _runner = runner
    server.run("stdio")
