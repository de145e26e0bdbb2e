"""``rlhealth mcp``: diagnose, probe, audit, triage, history, schema and examples as Model Context
Protocol tools (stdio).

Needs the optional extra ``rlhealth[mcp]`` (the official ``mcp`` SDK, 2.x). Every command tool runs
the command line it mirrors with ``--format json`` through the runner ``serve`` is given (the CLI's
``rlhealth.cli.run_captured``, handed over by ``rlhealth mcp``) and answers with that very document, so a tool call and the CLI give the same JSON. Every input property is
described, properties with CLI choices are enums, and unknown arguments are refused. A failure (a
usage error: a bundle that does not exist, a ``now`` that is no time, a bad ``max_age``, an unknown
GPU or argument; or an internal failure) answers ``isError: true`` with the error document (the
command's document shape with an ``error`` object) as its content. Every tool is read-only towards
the cluster, as the CLI is (``readOnlyHint``); ``probe`` (and ``diagnose`` with ``record``) write only
the job's own bundle and its verdict history.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from rlhealth import __version__
from rlhealth.checks import check_gpu
from rlhealth.commands import SCHEMAS, Runner, error_document
from rlhealth.probes.backends import BACKEND_NAMES, BACKENDS
from rlhealth.usage import (EXIT_INTERNAL, EXIT_USAGE, UsageError, parse_duration, parse_now_or_usage,
                            require_directory)


class _Server(MCPServer):
    """An MCPServer that refuses unknown or invalid arguments with the tool's error document."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            problem = _argument_problem(tool, arguments or {})
            if problem is not None:
                return _failure(name, problem)
        return await super().call_tool(name, arguments, context)


def _argument_problem(tool, arguments: dict[str, Any]) -> str | None:
    known = set(tool.parameters.get("properties", {}))
    unknown = sorted(set(arguments) - known)
    if unknown:
        return f"unknown argument(s) {', '.join(unknown)}; {tool.name} takes: {', '.join(sorted(known))}"
    try:
        tool.fn_metadata.validate_arguments(arguments)
    except ValidationError as exc:
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return None


server = _Server(name="rlhealth", version=__version__,
                 instructions="Read-only KILL / NO-KILL / ERROR diagnosis of one LLM RL training job. "
                              "Every command tool returns the rlhealth CLI's JSON document for the same inputs; "
                              "a failure answers isError with the error document. `examples` lists packaged "
                              "bundles to try, `schema` the JSON Schemas of the documents.")

_READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
_READ_ONLY_RECORDS = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=False, openWorldHint=False)
_READ_ONLY_LIVE = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=False, openWorldHint=True)

Now = Annotated[str | None, Field(description="Evaluation time, ISO-8601 (naive is UTC), e.g. 2026-08-01T15:25:00Z. "
                                              "Default: the wall clock. Packaged examples need the --now their "
                                              "listing gives (tool `examples`).")]
MaxAge = Annotated[str, Field(description="Freshness limit for a job that is not terminal: a positive duration "
                                          "such as 30m, 2h, 90s, 1d or plain seconds (default 30m).")]
Mode = Annotated[Literal["agentic", "standard"] | None,
                 Field(description="Override the mode read from the launch configuration (default: read from the bundle).")]
Gpu = Annotated[str | None, Field(description="Dispatcher input (given, not observed): the job's GPU type, one of the "
                                              "hardware table's names, e.g. H100-80GB-SXM.")]
Model = Annotated[str | None, Field(description="Dispatcher input: the model name, e.g. Qwen3-30B-A3B.")]
TotalParams = Annotated[float | None, Field(gt=0, description="Dispatcher input: total parameters of `model`, in billions (needs `model`).")]
ActiveParams = Annotated[float | None, Field(gt=0, description="Dispatcher input: parameters active per token of `model` "
                                                               "(MoE), in billions (default: the total; needs `model`).")]
Focus = Annotated[list[str] | None, Field(description="Dispatcher input: what is new or untested in this run, one "
                                                      "item per entry; the report evaluates each.")]


Signatures = Annotated[list[str] | None, Field(description="Directories of the operator's own signature files (*.yaml, "
                                                           "one signature each; a file named like a packaged one "
                                                           "replaces it), as --signatures DIR (repeatable).")]
ReportFormat = Annotated[Literal["json", "markdown", "html"],
                         Field(description="json (default: the document, also as structured content), markdown (the "
                                           "plain-text report) or html (one self-contained page) as the text content.")]
TextFormat = Annotated[Literal["json", "markdown"],
                       Field(description="json (default: the document, also as structured content) or markdown (the "
                                         "plain-text listing) as the text content.")]


def _opt(argv: list[str], flag: str, value: Any) -> None:
    """``--flag=value`` (one token: a value starting with ``-`` is still the flag's value)."""
    if value is not None and value != "":
        argv.append(f"{flag}={value}")


def _given(argv: list[str], gpu, model, total_params_b, active_params_b, focus) -> None:
    _opt(argv, "--gpu", gpu)
    _opt(argv, "--model", model)
    _opt(argv, "--total-params-b", total_params_b)
    _opt(argv, "--active-params-b", active_params_b)
    for item in focus or []:
        argv.append(f"--focus={item}")


_runner: Runner | None = None
"""The command-line runner every tool calls; set by ``serve``."""


def run_captured(argv: list[str]) -> tuple[str, int]:
    if _runner is None:
        raise RuntimeError("rlhealth.mcp_server.serve(runner) was not called")
    return _runner(argv)


def _result(command: str, doc: dict[str, Any], failed: bool) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))],
                          structured_content=doc, is_error=failed)


def _failure(command: str, message: str, kind: str = "usage") -> CallToolResult:
    return _result(command, error_document(command, message, kind=kind), True)


def _run(command: str, argv: list[str], fmt: str = "json", signatures: list[str] | None = None) -> CallToolResult:
    """Run the command line with ``--format fmt``; a json run answers its document (structured too), another
    format its text; a failure (exit 2 or 1) answers ``isError`` with the JSON error document."""
    argv = list(argv) + [f"--signatures={d}" for d in signatures or []]
    if fmt != "json":
        text, code = run_captured(argv + ["--format", fmt])
        if code not in (EXIT_USAGE, EXIT_INTERNAL):
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=False)
    text, code = run_captured(argv + ["--format", "json"])
    try:
        doc = json.loads(text)
    except ValueError:  # never expected: every --format json path prints a document
        return _failure(command, f"rlhealth printed no JSON (exit {code})", kind="internal")
    failed = code in (EXIT_USAGE, EXIT_INTERNAL) or isinstance(doc, dict) and doc.get("error") is not None
    return _result(command, doc, failed)


def _checked(command: str, checks) -> CallToolResult | None:
    """Run the usage checks; the error result of the first that fails, else None."""
    try:
        for check in checks:
            check()
    except UsageError as exc:
        return _failure(command, str(exc))
    return None


def _exists(value, what: str):
    def check():
        if value is not None:
            from pathlib import Path
            if not Path(value).exists():
                raise UsageError(f"{what} does not exist: {value}")
    return check


@server.tool(annotations=_READ_ONLY_RECORDS, structured_output=False)
def diagnose(bundle: Annotated[str, Field(description="Path of the job's evidence bundle (a directory), e.g. a "
                                                      "syncdown job directory or a packaged example's path.")],
             now: Now = None, max_age: MaxAge = "30m", mode: Mode = None,
             capture: Annotated[str | None, Field(description="Capture stamp under the bundle's rlhealth/captures/ "
                                                              "to use (default: the newest).")] = None,
             record: Annotated[bool, Field(description="Append the verdict to the bundle's rlhealth/verdicts.jsonl "
                                                       "(the only write; default false).")] = False,
             gpu: Gpu = None, model: Model = None, total_params_b: TotalParams = None,
             active_params_b: ActiveParams = None, focus: Focus = None, signatures: Signatures = None,
             format: ReportFormat = "json") -> CallToolResult:
    """Diagnose one evidence bundle offline: the rlhealth.report/v1 document (verdict KILL / NO-KILL / ERROR,
    per-gate PASS/FAIL/ERROR with quoted evidence, next_action_machine)."""
    failed = _checked("diagnose", [lambda: require_directory(bundle, "BUNDLE"), lambda: parse_now_or_usage(now),
                                   lambda: parse_duration(max_age), lambda: check_gpu(gpu)])
    if failed is not None:
        return failed
    argv = ["diagnose", bundle, f"--max-age={max_age}"]
    _opt(argv, "--now", now)
    _opt(argv, "--mode", mode)
    _opt(argv, "--capture", capture)
    if record:
        argv.append("--record")
    _given(argv, gpu, model, total_params_b, active_params_b, focus)
    return _run("diagnose", argv, format, signatures)


@server.tool(annotations=_READ_ONLY_LIVE, structured_output=False)
def probe(backend: Annotated[Literal[BACKEND_NAMES], Field(description="Where the job runs: " + "; ".join(
              f"{b.name} ({b.summary})" for b in BACKENDS.values()) + ".")],
          job: Annotated[str, Field(description="The job: Iris /<user>/<job> or a Slurm job id.")],
          cluster: Annotated[str | None, Field(description="Iris cluster name (iris), or the bundle's cluster name (slurm, default jsc-jupiter).")] = None,
          host: Annotated[str | None, Field(description="slurm: ssh alias or host of the login node.")] = None,
          experiment_dir: Annotated[str | None, Field(description="slurm: absolute experiment directory on the cluster.")] = None,
          bundle_root: Annotated[str | None, Field(description="Directory the job's bundle is written under (default ~/Documents/iris-job-bundles).")] = None,
          kubeconfig: Annotated[str | None, Field(description="iris: kubeconfig file (default: the standard lookup).")] = None,
          context: Annotated[str | None, Field(description="iris: kubeconfig context.")] = None,
          namespace: Annotated[str | None, Field(description="iris: Kubernetes namespace (default iris).")] = None,
          polls: Annotated[int | None, Field(ge=1, description="GPU polls per pod (iris) or node (slurm) (default 3).")] = None,
          poll_interval: Annotated[str | None, Field(description="Spacing of the GPU polls, a duration (default 10s).")] = None,
          deadline: Annotated[str | None, Field(description="Overall probe deadline, a duration (default 5m).")] = None,
          command_timeout: Annotated[str | None, Field(description="Timeout of each remote command or API call, a duration (default 60s).")] = None,
          ssh_config: Annotated[str | None, Field(description="slurm: ssh config file (default ~/.ssh/config).")] = None,
          known_hosts: Annotated[str | None, Field(description="slurm: known_hosts file (default ~/.ssh/known_hosts).")] = None,
          now: Now = None, max_age: MaxAge = "30m", mode: Mode = None, gpu: Gpu = None, model: Model = None,
          total_params_b: TotalParams = None, active_params_b: ActiveParams = None, focus: Focus = None,
          signatures: Signatures = None, format: ReportFormat = "json") -> CallToolResult:
    """Capture live evidence read-only (nothing on the cluster is changed) into the job's bundle, record the
    verdict in its history, and return the diagnosis (rlhealth.report/v1)."""
    failed = _checked("probe", [lambda: parse_now_or_usage(now), lambda: parse_duration(max_age),
                                lambda: check_gpu(gpu)]
                      + [(lambda v=v: parse_duration(v)) for v in (poll_interval, deadline, command_timeout) if v is not None])
    if failed is not None:
        return failed
    argv = ["probe", f"--backend={backend}", f"--job={job}", f"--max-age={max_age}"]
    for flag, value in (("--cluster", cluster), ("--host", host), ("--experiment-dir", experiment_dir),
                        ("--bundle-root", bundle_root), ("--kubeconfig", kubeconfig), ("--context", context),
                        ("--namespace", namespace), ("--polls", polls), ("--poll-interval", poll_interval),
                        ("--deadline", deadline), ("--command-timeout", command_timeout), ("--ssh-config", ssh_config),
                        ("--known-hosts", known_hosts), ("--now", now), ("--mode", mode)):
        _opt(argv, flag, value)
    _given(argv, gpu, model, total_params_b, active_params_b, focus)
    return _run("probe", argv, format, signatures)


@server.tool(annotations=_READ_ONLY, structured_output=False)
def audit(run: Annotated[str, Field(description="The terminal run to audit: its experiment or bundle directory.")],
          bundle: Annotated[str | None, Field(description="The job's evidence bundle, when it is not RUN itself.")] = None,
          export_dir: Annotated[str | None, Field(description="Directory of the exported checkpoints (HF export).")] = None,
          published_dir: Annotated[str | None, Field(description="Directory of the published (registered) checkpoints.")] = None,
          policy: Annotated[str | None, Field(description="Declared checkpoint selection rule, e.g. ema-reward:alpha=1/3.")] = None,
          trace_root: Annotated[str | None, Field(description="The trace rebuild's root (<job>_trace_jobs.tar, its sync manifest, trace_jobs/, staged export).")] = None,
          campaign: Annotated[str | None, Field(description="Campaign record (YAML/JSON): destinations, selection policy, registration and reclaim authority.")] = None,
          break_step: Annotated[int | None, Field(ge=0, description="First step of a known behavioral break (token salad, reward collapse, broken replay).")] = None,
          break_time: Annotated[str | None, Field(description="Time of a known behavioral break, ISO-8601.")] = None,
          diagnosis: Annotated[str | None, Field(description="A `rlhealth diagnose --format json` report of the run (a file); places a behavioral break it found.")] = None,
          now: Now = None, signatures: Signatures = None, format: ReportFormat = "json") -> CallToolResult:
    """Audit a terminal run and return its completion record (rlhealth.audit/v1)."""
    failed = _checked("audit", [lambda: require_directory(run, "RUN"), lambda: parse_now_or_usage(now),
                                lambda: parse_now_or_usage(break_time, "--break-time") if break_time is not None else None,
                                _exists(bundle, "--bundle"), _exists(export_dir, "--export-dir"),
                                _exists(published_dir, "--published-dir"), _exists(trace_root, "--trace-root"),
                                _exists(campaign, "--campaign"), _exists(diagnosis, "--diagnosis")])
    if failed is not None:
        return failed
    argv = ["audit", run]
    for flag, value in (("--bundle", bundle), ("--export-dir", export_dir), ("--published-dir", published_dir),
                        ("--policy", policy), ("--trace-root", trace_root), ("--campaign", campaign),
                        ("--break-step", break_step), ("--break-time", break_time), ("--diagnosis", diagnosis),
                        ("--now", now)):
        _opt(argv, flag, value)
    return _run("audit", argv, format, signatures)


@server.tool(annotations=_READ_ONLY, structured_output=False)
def triage(root: Annotated[str, Field(description="A syncdown root (or any directory): every job bundle below it is diagnosed.")],
           now: Now = None, max_age: MaxAge = "30m",
           jobs: Annotated[int | None, Field(ge=1, description="Worker processes (default: the usable cores).")] = None,
           signatures: Signatures = None, format: TextFormat = "json") -> CallToolResult:
    """Diagnose every job bundle under a syncdown root, most urgent first (rlhealth.triage/v1:
    jobs[] with path, job_id, verdict, confidence, gates)."""
    failed = _checked("triage", [lambda: require_directory(root, "ROOT"), lambda: parse_now_or_usage(now),
                                 lambda: parse_duration(max_age)])
    if failed is not None:
        return failed
    argv = ["triage", root, f"--max-age={max_age}"]
    _opt(argv, "--now", now)
    _opt(argv, "--jobs", jobs)
    return _run("triage", argv, format, signatures)


@server.tool(annotations=_READ_ONLY, structured_output=False)
def history(bundle: Annotated[str, Field(description="Path of the job's evidence bundle (a directory).")],
            format: TextFormat = "json") -> CallToolResult:
    """The verdict timeline of one job bundle (rlhealth.history/v1), each entry marked when its verdict flipped."""
    failed = _checked("history", [lambda: require_directory(bundle, "BUNDLE")])
    if failed is not None:
        return failed
    return _run("history", ["history", bundle], format)


@server.tool(annotations=_READ_ONLY, structured_output=False)
def schema(name: Annotated[Literal[SCHEMAS], Field(description="Which document's JSON Schema: report "
                                                                "(rlhealth.report/v1, of diagnose and probe) or audit "
                                                                "(rlhealth.audit/v1).")] = "report") -> CallToolResult:
    """The JSON Schema of a document the tools return (as `rlhealth schema NAME` prints it)."""
    text, code = run_captured(["schema", name])
    try:
        return _result("schema", json.loads(text), code != 0)
    except ValueError:
        return _failure("schema", f"no schema printed (exit {code})", kind="internal")


@server.tool(annotations=_READ_ONLY, structured_output=False)
def examples() -> CallToolResult:
    """The example bundles shipped with the package, to try `diagnose` on: each name with its bundle path,
    and `listing`, what `rlhealth examples` prints (the command line of each, with the --now it needs)."""
    listed, code = run_captured(["examples", "--format", "json"])
    text, _ = run_captured(["examples"])
    try:
        doc = {"examples": json.loads(listed), "listing": text.rstrip("\n")}
    except ValueError:
        return _failure("examples", f"no example list printed (exit {code})", kind="internal")
    return _result("examples", doc, code != 0)


for _tool in server._tool_manager.list_tools():
    _tool.parameters["additionalProperties"] = False    # unknown arguments are refused (``_Server.call_tool``)


def serve(runner: Runner) -> None:
    """Serve the tools over stdio, each running its command line through ``runner``."""
    global _runner
    _runner = runner
    server.run("stdio")
