"""Command line (contract §5).

Exit status: 0 NO-KILL, 10 KILL, 20 ERROR verdict, 2 usage error, 1 internal failure.
A JSON run always prints a valid ``rlhealth.report/v1`` document, even on internal failure.
"""
from __future__ import annotations

import argparse
import atexit
import io
import json
import os
import sys
import threading
import traceback
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from rlhealth.durable_loader import EngineUnavailable
from rlhealth.usage import (EXIT_ERROR, EXIT_INTERNAL, EXIT_KILL, EXIT_NO_KILL, EXIT_USAGE,  # noqa: F401
                           VERDICT_EXIT, UsageError, parse_duration, parse_now)


class _Parser(argparse.ArgumentParser):
    json_errors = False
    """Set by ``main`` when ``--format json`` was asked for: a usage error then becomes a JSON document."""

    def error(self, message):  # argparse exits 2 on usage errors; keep that, with our prefix
        if _Parser.json_errors:
            raise UsageError(message)
        self.print_usage(sys.stderr)
        print(f"rlhealth: usage error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _wants_json(argv: list[str]) -> bool:
    """``--format json`` / ``--format=json`` anywhere on the command line (before it is parsed)."""
    for i, arg in enumerate(argv):
        if arg == "--format=json" or (arg == "--format" and i + 1 < len(argv) and argv[i + 1] == "json"):
            return True
    return False


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if a in COMMANDS), None)


COMMANDS = ("diagnose", "probe", "audit", "triage", "history", "schema", "rules", "examples", "mcp")
SCHEMAS = ("report", "audit")


def build_parser() -> argparse.ArgumentParser:
    from rlhealth import __version__

    parser = _Parser(prog="rlhealth", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rlhealth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def signatures_arg(p):
        p.add_argument("--signatures", action="append", default=[], metavar="DIR", type=Path,
                       help="a directory of the operator's own signature files (*.yaml, one signature each; a file "
                            "named like a packaged one replaces it); repeatable; also $RLHEALTH_SIGNATURES "
                            "and ~/.config/rlhealth/signatures")

    def output_args(p):
        signatures_arg(p)
        p.add_argument("--format", choices=["markdown", "json", "html"], default="markdown",
                       help="markdown (default), json (rlhealth.report/v1) or html (one self-contained file)")
        p.add_argument("--output", "-o", type=Path, help="write the report to this file instead of stdout")
        p.add_argument("--now", help="evaluation time, ISO-8601 (default: wall clock)")
        p.add_argument("--max-age", default="30m", help="freshness limit for a non-terminal job (default 30m)")
        p.add_argument("--mode", choices=["agentic", "standard"], help="override the mode read from the launch config")
        g = p.add_argument_group("dispatcher inputs (given evidence, not observed)")
        g.add_argument("--gpu", help="GPU type of the job, e.g. H100-80GB-SXM")
        g.add_argument("--model", help="model name, e.g. Qwen3-30B-A3B")
        g.add_argument("--total-params-b", type=float, help="total parameters of --model, in billions")
        g.add_argument("--active-params-b", type=float,
                       help="parameters active per token of --model, in billions (MoE; default: the total)")
        g.add_argument("--focus", action="append", default=[], metavar="TEXT",
                       help='what is new or untested in this run, e.g. "TP=2+EP=2 first run" (repeatable)')

    d = sub.add_parser("diagnose", help="offline diagnosis of one evidence bundle")
    d.add_argument("bundle", type=Path)
    d.add_argument("--capture", help="capture stamp to use (default: newest)")
    d.add_argument("--record", action="store_true",
                   help="append the verdict to <bundle>/rlhealth/verdicts.jsonl (as every probe does)")
    output_args(d)

    p = sub.add_parser("probe", help="live read-only capture into the bundle, then diagnose it")
    p.add_argument("--backend", choices=["iris", "slurm"], required=True)
    p.add_argument("--job", required=True, help="Iris /<user>/<job> or Slurm job id")
    p.add_argument("--bundle-root", type=Path, default=Path.home() / "Documents" / "iris-job-bundles")
    p.add_argument("--deadline", default="5m", help="overall probe deadline (default 5m)")
    p.add_argument("--command-timeout", default="60s", help="per command / API call timeout (default 60s)")
    p.add_argument("--cluster", help="Iris cluster name (iris) or bundle cluster name (slurm, default jsc-jupiter)")
    # slurm backend
    p.add_argument("--host", help="slurm: ssh alias or host of the login node")
    p.add_argument("--experiment-dir", help="slurm: absolute experiment directory")
    p.add_argument("--ssh-config", type=Path, default=Path.home() / ".ssh" / "config")
    p.add_argument("--known-hosts", type=Path, default=Path.home() / ".ssh" / "known_hosts")
    # iris backend
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--context")
    p.add_argument("--namespace", default="iris")
    p.add_argument("--polls", type=int, default=3, help="GPU polls per pod (iris) / node (slurm) (default 3)")
    p.add_argument("--poll-interval", default="10s", help="spacing of GPU polls (default 10s)")
    output_args(p)

    a = sub.add_parser("audit", help="read-only audit of a terminal run and its completion record")
    a.add_argument("run", type=Path)
    signatures_arg(a)
    a.add_argument("--bundle", type=Path)
    a.add_argument("--export-dir", type=Path)
    a.add_argument("--published-dir", type=Path)
    a.add_argument("--policy", help="declared checkpoint selection rule, e.g. ema-reward:alpha=1/3")
    a.add_argument("--trace-root", type=Path, help="the trace rebuild's root (<job>_trace_jobs.tar, its sync manifest, trace_jobs/, staged export)")
    a.add_argument("--campaign", type=Path, help="campaign record (YAML/JSON): destinations, selection policy, registration and reclaim authority")
    a.add_argument("--break-step", type=int, help="first step of a known behavioral break (token salad, reward collapse, broken replay)")
    a.add_argument("--break-time", help="time of a known behavioral break, ISO-8601")
    a.add_argument("--diagnosis", type=Path, help="a `rlhealth diagnose --format json` report of the run; places a behavioral break it found")
    a.add_argument("--format", choices=["markdown", "json", "html"], default="markdown")
    a.add_argument("--output", "-o", type=Path, help="write the record to this file instead of stdout")
    a.add_argument("--now", help="evaluation time, ISO-8601 (default: wall clock)")

    r = sub.add_parser("rules", help="the rule base: list the rules or run the rule tests")
    rsub = r.add_subparsers(dest="rules_command", required=True, parser_class=_Parser)
    rl = rsub.add_parser("list", help="print every rule with its description")
    rl.add_argument("--format", choices=["markdown", "json"], default="markdown")
    rt = rsub.add_parser("test", help="run the rule tests (default: the packaged ones, with coverage)")
    rt.add_argument("path", nargs="?", type=Path, help="a rule-test YAML file or a directory of them")
    signatures_arg(rl)
    signatures_arg(rt)

    t = sub.add_parser("triage", help="diagnose every job bundle under a syncdown root, most urgent first")
    t.add_argument("root", type=Path)
    signatures_arg(t)
    t.add_argument("--format", choices=["markdown", "json"], default="markdown")
    t.add_argument("--now", help="evaluation time, ISO-8601 (default: wall clock)")
    t.add_argument("--max-age", default="30m", help="freshness limit for a non-terminal job (default 30m)")
    t.add_argument("--jobs", type=int, help="worker processes (default: the usable cores)")

    h = sub.add_parser("history", help="the verdict timeline of one job bundle (rlhealth/verdicts.jsonl)")
    h.add_argument("bundle", type=Path)
    h.add_argument("--format", choices=["markdown", "json"], default="markdown")

    s = sub.add_parser("schema", help="print a shipped JSON Schema")
    s.add_argument("name", nargs="?", choices=SCHEMAS, default="report")

    e = sub.add_parser("examples", help="list the example incidents shipped with the package")
    e.add_argument("--path", metavar="NAME", help="print the bundle path of one example")

    sub.add_parser("mcp", help="serve diagnose, probe, audit, triage and history as MCP tools over stdio "
                               "(needs the optional extra rlhealth[mcp])")
    return parser


_OUT = None
"""Where ``_emit`` writes: stdout, or a buffer while ``run_captured`` runs a command."""
_RUN_LOCK = threading.Lock()


def _emit(text: str) -> None:
    out = _OUT if _OUT is not None else sys.stdout
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def run_captured(argv: list[str]) -> tuple[str, int]:
    """Run one command line exactly as ``main`` does and return (what it printed, exit status).

    Used by the MCP server so a tool answers with the CLI's own document; calls are serialized.
    """
    global _OUT
    with _RUN_LOCK:
        _OUT = io.StringIO()
        try:
            try:
                code = main(list(argv))
            except SystemExit as exc:  # --help / --version
                code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
            return _OUT.getvalue(), code
        finally:
            _OUT = None


def _write_output(args, text: str) -> None:
    """The report to ``--output`` (when given) or stdout."""
    target = getattr(args, "output", None)
    if target is None:
        _emit(text)
        return
    try:
        Path(target).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--output: cannot write {target}: {exc.strerror or exc}") from exc


def _given(args):
    from rlhealth.given import given_from_args

    try:
        return given_from_args(args)
    except ValueError as exc:
        raise UsageError(f"dispatcher inputs: {exc}") from exc


def _cmd_diagnose(args, bundle: Path, now: datetime, *, record_as: str | None = None, argv: list[str] | None = None) -> int:
    max_age_s = parse_duration(args.max_age)
    given = _given(args)
    from rlhealth.probes.patterns import prepare_packaged

    prepare_packaged()      # compiles on another core while the diagnosis imports and loads its rules
    from rlhealth.diagnose import diagnose

    report = diagnose(bundle, now=now, max_age_s=max_age_s, mode_override=args.mode,
                      capture=getattr(args, "capture", None), given=given, with_plots=args.format == "html")
    history = []
    if record_as is None and getattr(args, "record", False):
        record_as = "diagnose"
    if record_as is not None:
        history = _record(report, bundle, record_as, getattr(args, "capture", None), argv)
    if args.format == "html":
        from rlhealth.html import render_report_html
        from rlhealth.history import read_history, timeline

        _write_output(args, render_report_html(report, history=timeline(history or read_history(bundle))))
    else:
        from rlhealth.render import render
        _write_output(args, render(report, args.format))
    return VERDICT_EXIT[report.verdict]


def _record(report, bundle: Path, command: str, capture: str | None, argv: list[str] | None) -> list[dict]:
    """Append the verdict to the bundle's history; a bundle that cannot be written is a warning."""
    from rlhealth import history as H

    if not Path(bundle).is_dir():
        print(f"rlhealth: warning: verdict not recorded: {bundle} is not a directory", file=sys.stderr)
        return []
    entry = H.entry_for(report, command=command, capture=capture or H.newest_capture_stamp(bundle), argv=argv)
    try:
        H.append(bundle, entry)
    except OSError as exc:
        print(f"rlhealth: warning: verdict not recorded in {H.history_path(bundle)}: {exc.strerror or exc}", file=sys.stderr)
    return H.read_history(bundle)


def probe_options(args):
    """The typed options a probe takes, from the parsed ``probe`` command line."""
    from rlhealth.probes.options import ProbeOptions

    return ProbeOptions.from_flags(
        backend=args.backend, job=args.job, bundle_root=args.bundle_root, deadline=args.deadline,
        command_timeout=args.command_timeout, poll_interval=args.poll_interval, polls=args.polls,
        cluster=args.cluster, host=args.host, experiment_dir=args.experiment_dir, ssh_config=args.ssh_config,
        known_hosts=args.known_hosts, kubeconfig=args.kubeconfig, context=args.context,
        namespace=args.namespace or "iris")


def _cmd_probe(args, now: datetime, argv: list[str]) -> int:
    _given(args)  # refuse bad dispatcher inputs before touching the cluster
    options = probe_options(args)
    if args.backend == "slurm":
        from rlhealth.probes import slurm as backend
    else:
        from rlhealth.probes import kubernetes as backend
    from rlhealth.progress import Progress, set_current

    with Progress(f"probe {args.backend} {args.job}") as progress:
        set_current(progress)
        try:
            bundle = backend.capture(options, now=now)
        finally:
            set_current(None)
    return _cmd_diagnose(args, bundle, now, record_as="probe", argv=["rlhealth", *argv])


def _cmd_audit(args, now: datetime) -> int:
    from rlhealth.audit import run_audit

    if args.format != "html":
        text, code = run_audit(args, now=now)
        _write_output(args, text)
        return code
    args.format = "json"
    text, code = run_audit(args, now=now)
    args.format = "html"
    from rlhealth.html import render_audit_html

    _write_output(args, render_audit_html(json.loads(text)))
    return code


def _cmd_rules(args) -> int:
    from rlhealth.catalog import load_catalog
    if args.rules_command == "list":
        from rlhealth.rulebook import rules_json, rules_markdown
        _emit(rules_json(load_catalog()) if args.format == "json" else rules_markdown(load_catalog()))
        return 0
    from rlhealth.ruletest import run_all
    if args.path is not None and not args.path.exists():
        raise UsageError(f"no such rule-test file or directory: {args.path}")
    results, gaps = run_all(args.path)
    failed = [r for r in results if r.failures]
    for r in failed:
        for failure in r.failures:
            print(f"FAIL {r.file}: {r.name}: {failure}")
    for gap in gaps:
        print(f"GAP  {gap}")
    print(f"{len(results) - len(failed)}/{len(results)} rule test case(s) passed; {len(gaps)} coverage gap(s)")
    return 0 if not failed and not gaps and results else 1


def _cmd_triage(args, now: datetime) -> int:
    from rlhealth import triage as T
    from rlhealth.progress import Progress

    if not args.root.is_dir():
        raise UsageError(f"ROOT is not a directory: {args.root}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    with Progress("triage") as progress:
        rows = T.triage(args.root, now=now, max_age_s=parse_duration(args.max_age), workers=args.jobs, progress=progress)
    _emit(T.render_json(args.root, rows, now) if args.format == "json" else T.render_text(args.root, rows))
    return T.exit_code(rows)


def _cmd_history(args) -> int:
    from rlhealth import history as H

    if not args.bundle.is_dir():
        raise UsageError(f"BUNDLE is not a directory: {args.bundle}")
    problems: list[str] = []
    entries = H.timeline(H.read_history(args.bundle, problems))
    _emit(H.render_json(args.bundle, entries, problems) if args.format == "json" else H.render_text(args.bundle, entries, problems))
    return 0


def _cmd_schema(args) -> int:
    _emit(resources.files("rlhealth").joinpath("schema", f"{args.name}.schema.json").read_text())
    return 0


def _cmd_mcp() -> int:
    try:
        from rlhealth.mcp_server import serve
    except ImportError as exc:
        raise UsageError(f"rlhealth mcp needs the optional extra: pip install 'rlhealth[mcp]' ({exc})") from exc
    serve()
    return 0


def error_document(command: str | None, message: str, *, kind: str = "usage", now: datetime | None = None) -> dict:
    """The JSON printed for a usage error (or an internal failure of triage/history) under
    ``--format json``: the command's own document shape (report, audit record, triage, history)
    with an ``error`` object ``{"kind": "usage"|"internal", "message", "exit_code"}``."""
    now = now or datetime.now(timezone.utc)
    error = {"kind": kind, "message": message, "exit_code": EXIT_USAGE if kind == "usage" else EXIT_INTERNAL}
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if command == "audit":
        from rlhealth.audit.core import SCHEMA
        return {"schema": SCHEMA, "evaluated_at": stamp, "status": "usage-error", "exit_code": EXIT_USAGE, "error": error,
                "run": {"path": "", "bundle": None, "export_dir": None, "published_dir": None, "job_id": None}}
    if command == "triage":
        from rlhealth.triage import SCHEMA_ID
        return {"schema": SCHEMA_ID, "root": None, "evaluated_at": stamp, "jobs": [], "error": error}
    if command == "history":
        from rlhealth.history import SCHEMA_ID
        return {"schema": SCHEMA_ID, "bundle": None, "entries": [], "problems": [], "error": error}
    from rlhealth.report import internal_failure_report
    doc = internal_failure_report("", f"{kind} error: {message}", now=now)
    doc.update(error=error, next_action_machine={"kind": "investigate", "command": None, "deciding_rule": None})
    if kind == "usage":
        doc.update(reasoning=f"usage error: {message}", next_action="Fix the command line (see rlhealth --help) and run again.",
                   flip_signal="A valid command line.")
        for gate in doc["gates"].values():
            gate["finding"] = f"not evaluated: usage error: {message}"
    return doc


def _cmd_examples(args) -> int:
    root = resources.files("rlhealth.examples")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if args.path:
        if args.path not in names:
            raise UsageError(f"unknown example {args.path!r}; known: {', '.join(names)}")
        _emit(str(root.joinpath(args.path)))
    else:
        _emit("\n".join(names))
    return 0


def _emit_failure_report(args, reason: str, gate_finding: str | None = None, **overrides: str) -> None:
    """Print the v1 JSON report of a run that could not diagnose: verdict ERROR with the reason;
    ``overrides`` replace top-level text fields, ``gate_finding`` every gate's finding."""
    from rlhealth.report import internal_failure_report
    bundle = getattr(args, "bundle", None) or getattr(args, "bundle_root", None)
    doc = internal_failure_report(str(bundle), reason)
    doc.update(overrides)
    for gate in doc["gates"].values():
        gate["finding"] = gate_finding or gate["finding"]
    _emit(json.dumps(doc, indent=2, sort_keys=True))


def run() -> None:
    """The ``rlhealth`` command (console script and ``python -m rlhealth``): ``main()``, the exit
    handlers, the standard streams flushed, then ``os._exit``: the interpreter is not torn down.
    Freeing every module and object one by one took about a tenth of a small bundle's diagnosis,
    and nothing rlhealth writes waits for it (files are closed where they are written)."""
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):     # a closed pipe or stream: what was written is all there is
            pass
    os._exit(code)


def _use_operator_signatures(dirs: list[Path]) -> None:
    """``--signatures DIR``: each must be a directory; they apply after $RLHEALTH_SIGNATURES."""
    if not dirs:
        return
    from rlhealth.packaged import SIGNATURES_ENV
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"--signatures {d}: not a directory")
    present = [p for p in os.environ.get(SIGNATURES_ENV, "").split(os.pathsep) if p]
    os.environ[SIGNATURES_ENV] = os.pathsep.join(present + [str(d.resolve()) for d in dirs])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_json = _wants_json(argv)
    _Parser.json_errors = wants_json
    parser = build_parser()
    args = None
    fmt = "json" if wants_json else "markdown"
    try:
        args = parser.parse_args(argv)
        fmt = getattr(args, "format", fmt)
        _use_operator_signatures(getattr(args, "signatures", None) or [])
        now = parse_now(getattr(args, "now", None))
        if args.command == "diagnose":
            return _cmd_diagnose(args, args.bundle, now)
        if args.command == "probe":
            return _cmd_probe(args, now, argv)
        if args.command == "audit":
            return _cmd_audit(args, now)
        if args.command == "triage":
            return _cmd_triage(args, now)
        if args.command == "history":
            return _cmd_history(args)
        if args.command == "schema":
            return _cmd_schema(args)
        if args.command == "examples":
            return _cmd_examples(args)
        if args.command == "rules":
            return _cmd_rules(args)
        if args.command == "mcp":
            return _cmd_mcp()
    except UsageError as exc:
        print(f"rlhealth: usage error: {exc}", file=sys.stderr)
        if fmt == "json":
            command = getattr(args, "command", None) or _command_of(argv)
            _emit(json.dumps(error_document(command, str(exc)), indent=2, sort_keys=True, ensure_ascii=False))
        return EXIT_USAGE
    except KeyboardInterrupt:
        raise
    except EngineUnavailable as exc:  # an installation problem, not a bug: the message is the fix
        print(f"rlhealth: {exc}", file=sys.stderr)
        if fmt == "json" and args.command in ("diagnose", "probe"):
            _emit_failure_report(args, exc.cause, reasoning=f"Not diagnosed: {exc.cause}.",
                                 next_action=f"Fix: {exc.fix}.",
                                 flip_signal="rlhealth rerun after the fix loads its rule engine.",
                                 gate_finding="not evaluated: the rule engine cannot load")
        return EXIT_INTERNAL
    except Exception as exc:  # internal failure: still a valid report for JSON consumers
        if args is None:
            raise
        print(f"rlhealth: internal failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        if fmt == "json" and args.command in ("triage", "history"):
            _emit(json.dumps(error_document(args.command, f"{type(exc).__name__}: {exc}", kind="internal"),
                             indent=2, sort_keys=True, ensure_ascii=False))
        if fmt == "json" and args.command in ("diagnose", "probe"):
            _emit_failure_report(args, f"{type(exc).__name__}: {exc}")
        return EXIT_INTERNAL
    return EXIT_USAGE
