"""The ``rlhealth`` command line (contract §5): the parser, its help, and one function per command.

Exit status: 0 NO-KILL, 10 KILL, 20 ERROR verdict, 2 usage error, 1 internal failure, 130/143
interrupted by SIGINT/SIGTERM. A JSON run always prints one valid document of the command's own
shape, on a usage error, an internal failure and an interrupt too (``error.kind``).
"""
from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import re
import signal
import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path

from rlhealth.checks import check_command
from rlhealth.commands import SCHEMAS, capturing, emit as _emit, error_document, run_captured as _run_captured  # noqa: F401
from rlhealth.durable_loader import EngineUnavailable
from rlhealth.probes.backends import BACKEND_NAMES, BACKENDS, get_backend
from rlhealth.usage import (EXIT_ERROR, EXIT_INTERNAL, EXIT_KILL, EXIT_NO_KILL, EXIT_USAGE,  # noqa: F401
                           VERDICT_EXIT, UsageError, interrupted_exit, join_dash_values,
                           parse_duration, parse_now, signal_name)

DESCRIPTION = """\
rlhealth: is this LLM reinforcement-learning training job healthy, or should it be killed?

It reads one job's evidence bundle (logs, trial directories, controller state: a syncdown on
disk, or a live read-only capture by `rlhealth probe`) and answers KILL, NO-KILL or ERROR, with
PASS / FAIL / ERROR for each gate (LIVENESS, RESOURCES, ROLLOUTS, DYNAMICS), the quoted log line
behind every claim, and the next action. It never changes anything on a cluster."""

EXIT_REPORT = """\
Exit status:
  0 NO-KILL   10 KILL   20 ERROR verdict   2 usage error (nothing diagnosed)   1 internal failure
  130 interrupted (SIGINT, Ctrl-C)   143 terminated (SIGTERM)
  With --format json stdout always holds one rlhealth.report/v1 document (an error carries "error")."""

TOP_EPILOG = f"""\
Start here:
  rlhealth examples            the packaged example bundles, each with the exact command line that
                               diagnoses it (its --now) and what the diagnosis shows
  rlhealth diagnose --help     diagnose a bundle of your own
  rlhealth COMMAND --help      every command's options, defaults, exit status and examples

{EXIT_REPORT}
  audit: 0 complete, 20 blocked; triage: the most urgent verdict's status.

Examples:
  # List the packaged example bundles with their exact command lines
  rlhealth examples

  # Diagnose the packaged wedged-job example at the time it was captured ({{verdict:colocated-wedge}})
  rlhealth diagnose {{example:colocated-wedge}}
"""

DIAGNOSE_DESCRIPTION = """\
Diagnose one job's evidence bundle offline: VERDICT KILL / NO-KILL / ERROR, PASS / FAIL / ERROR per
gate, each claim with the log line it rests on, and the next action. Reads only; writes nothing
unless --record or -o.

A bundle is judged at a time: --now for a replay (e.g. a packaged example: `rlhealth examples`
prints each one's --now), else the wall clock. A job that is not terminal and whose newest evidence
is older than --max-age is ERROR (stale evidence)."""

DIAGNOSE_EPILOG = f"""\
{EXIT_REPORT}

Examples:
  # Diagnose the packaged wedged-job example at the time it was captured ({{verdict:colocated-wedge}})
  rlhealth diagnose {{example:colocated-wedge}}

  # The packaged healthy example as JSON, written to report.json ({{verdict:healthy-agentic}})
  rlhealth diagnose {{example:healthy-agentic}} --format json -o report.json
"""

PROBE_DESCRIPTION = """\
Capture one job's live evidence read-only (Iris over the Kubernetes API, Slurm over ssh) into
BUNDLE-ROOT/jobs/<cluster>/.../rlhealth/captures/<UTC stamp>/, then diagnose that bundle exactly
as `rlhealth diagnose` would (same report, same exit status) and record the verdict in the
bundle's history. A probe that observes nothing (every step failed, e.g. no connection) still
prints its ERROR report with the fix, and leaves nothing on disk."""

PROBE_EPILOG = f"""\
{EXIT_REPORT}

Examples:
  # A Slurm job on JUPITER through the ssh alias "jupiter"
  rlhealth probe --backend slurm --host jupiter --job 13472231 --experiment-dir /p/scratch/proj/me/run1

  # An Iris job on CoreWeave, as JSON, with what the dispatcher knows about it
  rlhealth probe --backend iris --cluster cw-us-east-02a --job /alice/rl-qwen8b-tb --gpu H100-80GB-SXM --format json
"""

AUDIT_DESCRIPTION = """\
Audit a terminal run before hand-off and print its completion record: mode, terminal state,
evidence chain, every checkpoint and export validated, the selected artifact under a declared
policy, the published model verified. Reads only.

RUN is the run directory (resolved configuration, logs, checkpoints, exports). Controller state
and the launch command come from a bundle (manifest.json job.state and job.entrypoint,
rlhealth/captures/<stamp>/state.json): --bundle, or RUN itself when RUN is a bundle (holds
manifest.json or rlhealth/captures/), as `rlhealth diagnose` reads it."""

AUDIT_EPILOG = """\
Exit status:
  0 complete (no blocking problem)   20 blocked (or the audit could not complete)   2 usage error
  1 internal failure   130 interrupted (SIGINT)   143 terminated (SIGTERM)
  With --format json stdout always holds one rlhealth.audit/v1 document.

Examples:
  # A finished run with its synced bundle and a declared checkpoint selection rule
  rlhealth audit /data/runs/rl-qwen8b-tb --bundle ~/Documents/iris-job-bundles/jobs/cw-us-east-02a/alice/rl-qwen8b-tb --policy ema-reward:alpha=1/3

  # A bundle read as the run: the packaged wedged example is not terminal, so the audit is blocked (exit 20)
  rlhealth audit {example:colocated-wedge}
"""

TRIAGE_EPILOG = """\
Exit status:
  the most urgent verdict's status: 10 if any job is KILL, else 20 if any is ERROR (or no bundle
  was found), else 0;  2 usage error;  1 internal failure;  130 / 143 interrupted.

Examples:
  # Every job synced under the default bundle root, most urgent first
  rlhealth triage ~/Documents/iris-job-bundles

  # The packaged examples as a fleet, judged at the wedged example's time, as JSON (exit 10: one KILL)
  rlhealth triage "$(dirname "$(rlhealth examples --path colocated-wedge)")" --now {now:colocated-wedge} --format json
"""

HISTORY_EPILOG = """\
Exit status: 0 printed (an empty history too), 2 usage error, 1 internal failure.

Examples:
  # The verdicts recorded for one job (by every probe and by diagnose --record)
  rlhealth history ~/Documents/iris-job-bundles/jobs/cw-us-east-02a/alice/rl-qwen8b-tb

  # The same as JSON (rlhealth.history/v1)
  rlhealth history ~/Documents/iris-job-bundles/jobs/cw-us-east-02a/alice/rl-qwen8b-tb --format json
"""

SCHEMA_EPILOG = """\
Exit status: 0, or 2 for an unknown schema name.

Examples:
  # The JSON Schema of `diagnose --format json`
  rlhealth schema

  # The audit record's schema, into a file
  rlhealth schema audit > audit.schema.json
"""

RULES_EPILOG = """\
Exit status: list 0; test 0 when every rule test passes and every rule is covered, else 1; 2 usage error.

Examples:
  # Every rule with its description
  rlhealth rules list

  # Run the packaged rule tests, then your own
  rlhealth rules test && rlhealth rules test my-rule-tests/
"""

EXAMPLES_EPILOG = """\
Exit status: 0, or 2 for an unknown example name.

Examples:
  # Each example with the exact command line that diagnoses it and what it shows
  rlhealth examples

  # Diagnose one by name: --path prints only its bundle directory ({verdict:healthy-agentic})
  rlhealth diagnose "$(rlhealth examples --path healthy-agentic)" --now {now:healthy-agentic}
"""

RULES_LIST_EPILOG = """\
Exit status: 0, 2 usage error.

Examples:
  # Every rule with its description, as Markdown
  rlhealth rules list

  # The same as JSON, for a program
  rlhealth rules list --format json
"""

RULES_TEST_EPILOG = """\
Exit status: 0 when every rule test passes (and, for the packaged tests, every rule is covered), else 1; 2 usage error.

Examples:
  # The packaged rule tests with rule coverage
  rlhealth rules test

  # Your own rule tests, with your own signatures
  rlhealth rules test my-rule-tests/ --signatures my-signatures/
"""

MCP_EPILOG = """\
Exit status: 0 when the client closes the session, 2 when the optional extra is missing.

Examples:
  # Serve the tools on stdin/stdout (an MCP client starts this)
  rlhealth mcp

  # An MCP client configuration entry (e.g. Claude Desktop's mcpServers)
  {"mcpServers": {"rlhealth": {"command": "rlhealth", "args": ["mcp"]}}}
"""

_PLACEHOLDER = re.compile(r"\{(example|verdict|now|gpus):?([\w-]*)\}")


def _expand(text: str | None) -> str | None:
    """Fill the help's placeholders from the packaged data: ``{example:NAME}`` (the bundle and its
    ``--now`` as a shell command line), ``{verdict:NAME}``, ``{now:NAME}``, ``{gpus}`` (the
    hardware table's names). Read only when help is printed."""
    if not text or "{" not in text:
        return text
    examples = None

    def one(m: re.Match) -> str:
        nonlocal examples
        kind, name = m.group(1), m.group(2)
        if kind == "gpus":
            from rlhealth.checks import known_gpus
            return ", ".join(known_gpus())
        if examples is None:
            from rlhealth.examples import load_examples
            examples = {e["name"]: e for e in load_examples()}
        e = examples.get(name)
        if e is None:
            return m.group(0)
        if kind == "example":
            return f'"$(rlhealth examples --path {name})" --now {e["now"]}'
        if kind == "now":
            return str(e["now"])
        return f"{e['verdict']}, exit {e['exit_code']}"
    return _PLACEHOLDER.sub(one, text)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (their examples keep their lines); wider option column."""

    def __init__(self, prog, **kw):
        kw.setdefault("max_help_position", 32)
        super().__init__(prog, **kw)


class _Parser(argparse.ArgumentParser):
    json_errors = False
    """Set by ``main`` when ``--format json`` was asked for: a usage error then becomes a JSON document."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", _Formatter)
        super().__init__(*a, **kw)
        self.commands: dict[str, _Parser] = {}
        """The subcommand parsers by name (a typo is answered with the subcommand's usage)."""

    def error(self, message):  # argparse exits 2 on usage errors; keep that, with our prefix
        if _Parser.json_errors:
            raise UsageError(message)
        self.print_usage(sys.stderr)
        print(f"rlhealth: usage error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def format_help(self):
        self.epilog = _expand(self.epilog)
        for action in self._actions:
            action.help = _expand(action.help)
        return super().format_help()

    def add_command(self, sub, name: str, **kw) -> "_Parser":
        p = sub.add_parser(name, **kw)
        self.commands[name] = p
        return p


def _wants_json(argv: list[str]) -> bool:
    """``--format json`` / ``--format=json`` anywhere on the command line (before it is parsed)."""
    for i, arg in enumerate(argv):
        if arg == "--format=json" or (arg == "--format" and i + 1 < len(argv) and argv[i + 1] == "json"):
            return True
    return False


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if a in COMMANDS), None)


COMMANDS = ("diagnose", "probe", "audit", "triage", "history", "schema", "rules", "examples", "mcp")
NOW_HELP = "evaluation time, ISO-8601, e.g. 2026-08-01T12:00:00Z; no zone means UTC (default: the wall clock)"
MAX_AGE_HELP = ("freshness limit for a job that is not terminal: older newest evidence is ERROR (stale); "
                "90s, 30m, 2h, 1d (default: %(default)s)")
QUIET_HELP = "no progress line on stderr (default: a progress line when stderr is a terminal, none otherwise)"


def build_parser() -> argparse.ArgumentParser:
    from rlhealth import __version__

    parser = _Parser(prog="rlhealth", description=DESCRIPTION, epilog=TOP_EPILOG)
    parser.add_argument("--version", action="version", version=f"rlhealth {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
                                title="commands")

    def signatures_arg(p):
        p.add_argument("--signatures", action="append", default=[], metavar="DIR", type=Path,
                       help="a directory of the operator's own signature files (*.yaml, one signature each; a file "
                            "named like a packaged one replaces it); repeatable; also $RLHEALTH_SIGNATURES "
                            "and ~/.config/rlhealth/signatures (default: none)")

    def output_args(p):
        signatures_arg(p)
        p.add_argument("--format", choices=["markdown", "json", "html"], default="markdown",
                       help="markdown: the text report; json: one rlhealth.report/v1 document (`rlhealth schema`); "
                            "html: one self-contained page (default: %(default)s)")
        p.add_argument("--output", "-o", type=Path, metavar="FILE",
                       help="write the report to FILE (whole or not at all: a temporary file renamed) "
                            "(default: stdout)")
        p.add_argument("--now", metavar="TIME", help=NOW_HELP)
        p.add_argument("--max-age", default="30m", metavar="DURATION", help=MAX_AGE_HELP)
        p.add_argument("--mode", choices=["agentic", "standard"],
                       help="override the mode (default: read from the launch configuration in the bundle)")
        p.add_argument("--quiet", "-q", action="store_true", help=QUIET_HELP)
        g = p.add_argument_group("dispatcher inputs (given evidence, not observed; each default: not given)")
        g.add_argument("--gpu", help="GPU type of the job, a class of the hardware table ({gpus}) or a product "
                                     "name rules/tables/gpu_names.csv maps to one, e.g. H100")
        g.add_argument("--model", metavar="NAME", help="model name, e.g. Qwen3-30B-A3B")
        g.add_argument("--total-params-b", type=float, metavar="B", help="total parameters of --model, in billions")
        g.add_argument("--active-params-b", type=float, metavar="B",
                       help="parameters active per token of --model, in billions (MoE; default: the total)")
        g.add_argument("--focus", action="append", default=[], metavar="TEXT",
                       help='what is new or untested in this run, e.g. "TP=2+EP=2 first run" (repeatable)')

    d = parser.add_command(sub, "diagnose", help="offline diagnosis of one evidence bundle",
                           description=DIAGNOSE_DESCRIPTION, epilog=DIAGNOSE_EPILOG)
    d.add_argument("bundle", type=Path, metavar="BUNDLE",
                   help="the job's evidence bundle: a directory holding manifest.json (a syncdown) and/or "
                        "rlhealth/captures/ (live probes), e.g. ~/Documents/iris-job-bundles/jobs/<cluster>/<user>/<job>; "
                        "`rlhealth examples` lists packaged ones")
    d.add_argument("--capture", metavar="STAMP",
                   help="which live capture under BUNDLE/rlhealth/captures/ to read, e.g. 20260801T152000Z "
                        "(default: the newest)")
    d.add_argument("--record", action="store_true",
                   help="append the verdict to BUNDLE/rlhealth/verdicts.jsonl, as every probe does "
                        "(default: off; refused inside the installed package)")
    output_args(d)

    p = parser.add_command(sub, "probe", help="live read-only capture into the bundle, then diagnose it",
                           description=PROBE_DESCRIPTION, epilog=PROBE_EPILOG)
    p.add_argument("--backend", choices=BACKEND_NAMES, required=True,
                   help="; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values()) + " (required)")
    p.add_argument("--job", required=True, help="the job: Iris /<user>/<job> or Slurm job id (required)")
    p.add_argument("--bundle-root", type=Path, default=Path.home() / "Documents" / "iris-job-bundles", metavar="DIR",
                   help="where bundles live; the capture goes to DIR/jobs/<cluster>/... (default: %(default)s)")
    p.add_argument("--deadline", default="5m", metavar="DURATION", help="overall probe deadline (default: %(default)s)")
    p.add_argument("--command-timeout", default="60s", metavar="DURATION",
                   help="timeout of each remote command / API call (default: %(default)s)")
    p.add_argument("--cluster", metavar="NAME",
                   help="iris: the Iris cluster name (required), e.g. cw-us-east-02a; slurm: the bundle's cluster "
                        "name (default: jsc-jupiter)")
    p.add_argument("--polls", type=int, default=3, metavar="N",
                   help="GPU polls per pod (iris) / node (slurm) (default: %(default)s)")
    p.add_argument("--poll-interval", default="10s", metavar="DURATION",
                   help="spacing of the GPU polls (default: %(default)s)")
    s_opts = p.add_argument_group("slurm backend")
    s_opts.add_argument("--host", help="ssh alias or host of the login node (required for slurm)")
    s_opts.add_argument("--experiment-dir", metavar="DIR",
                        help="absolute experiment directory on the cluster (default: the job's WorkDir from sacct)")
    s_opts.add_argument("--ssh-config", type=Path, default=Path.home() / ".ssh" / "config", metavar="FILE",
                        help="ssh client configuration (default: %(default)s)")
    s_opts.add_argument("--known-hosts", type=Path, default=Path.home() / ".ssh" / "known_hosts", metavar="FILE",
                        help="known host keys; an unknown host key is refused (default: %(default)s)")
    i_opts = p.add_argument_group("iris backend")
    i_opts.add_argument("--kubeconfig", type=Path, metavar="FILE", help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
    i_opts.add_argument("--context", help="kubeconfig context (default: the kubeconfig's current context)")
    i_opts.add_argument("--namespace", default="iris", help="Kubernetes namespace of the job's pods (default: %(default)s)")
    output_args(p)

    a = parser.add_command(sub, "audit", help="read-only audit of a terminal run and its completion record",
                           description=AUDIT_DESCRIPTION, epilog=AUDIT_EPILOG)
    a.add_argument("run", type=Path, metavar="RUN",
                   help="the run directory (resolved configuration, logs, checkpoints, exports), or a job bundle")
    signatures_arg(a)
    a.add_argument("--bundle", type=Path, metavar="DIR",
                   help="the job's evidence bundle, for controller state and the launch command "
                        "(default: RUN itself when it holds manifest.json or rlhealth/captures/, else none)")
    a.add_argument("--export-dir", type=Path, metavar="DIR",
                   help="the exported models (default: RUN/exports or RUN/export)")
    a.add_argument("--published-dir", type=Path, metavar="DIR",
                   help="a fresh download of the published model, to verify against the export (default: not verified)")
    a.add_argument("--policy", metavar="RULE",
                   help="declared checkpoint selection rule, e.g. ema-reward:alpha=1/3 "
                        "(default: none; the valid candidates are listed, the choice left to the operator)")
    a.add_argument("--trace-root", type=Path, metavar="DIR",
                   help="the trace rebuild's root (<job>_trace_jobs.tar, its sync manifest, trace_jobs/, staged export) "
                        "(default: none)")
    a.add_argument("--campaign", type=Path, metavar="FILE",
                   help="campaign record (YAML/JSON): destinations, selection policy, registration and reclaim "
                        "authority (default: none)")
    a.add_argument("--break-step", type=int, metavar="N",
                   help="first step of a known behavioral break (token salad, reward collapse, broken replay) "
                        "(default: none)")
    a.add_argument("--break-time", metavar="TIME", help="time of a known behavioral break, ISO-8601 (default: none)")
    a.add_argument("--diagnosis", type=Path, metavar="REPORT.json",
                   help="a `rlhealth diagnose --format json` report of the run; places a behavioral break it found "
                        "(default: none)")
    a.add_argument("--format", choices=["markdown", "json", "html"], default="markdown",
                   help="markdown: the text record; json: one rlhealth.audit/v1 document (`rlhealth schema audit`); "
                        "html: one self-contained page (default: %(default)s)")
    a.add_argument("--output", "-o", type=Path, metavar="FILE",
                   help="write the record to FILE (whole or not at all) (default: stdout)")
    a.add_argument("--now", metavar="TIME", help=NOW_HELP)

    t = parser.add_command(sub, "triage", help="diagnose every job bundle under a syncdown root, most urgent first",
                           description="Diagnose every job bundle under ROOT (in parallel) and list them most "
                                       "urgent first: KILL, ERROR, NO-KILL.", epilog=TRIAGE_EPILOG)
    t.add_argument("root", type=Path, metavar="ROOT",
                   help="a syncdown root: every directory under it holding manifest.json or rlhealth/captures/ is "
                        "one job bundle, e.g. ~/Documents/iris-job-bundles")
    signatures_arg(t)
    t.add_argument("--format", choices=["markdown", "json"], default="markdown",
                   help="markdown: one line per job; json: rlhealth.triage/v1 (default: %(default)s)")
    t.add_argument("--now", metavar="TIME", help=NOW_HELP)
    t.add_argument("--max-age", default="30m", metavar="DURATION", help=MAX_AGE_HELP)
    t.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: the usable cores)")
    t.add_argument("--quiet", "-q", action="store_true", help=QUIET_HELP)

    h = parser.add_command(sub, "history", help="the verdict timeline of one job bundle (rlhealth/verdicts.jsonl)",
                           description="Print the verdicts recorded in BUNDLE/rlhealth/verdicts.jsonl (by every probe "
                                       "and by diagnose --record), oldest first, flips marked.", epilog=HISTORY_EPILOG)
    h.add_argument("bundle", type=Path, metavar="BUNDLE", help="the job's evidence bundle")
    h.add_argument("--format", choices=["markdown", "json"], default="markdown",
                   help="markdown: one line per verdict; json: rlhealth.history/v1 (default: %(default)s)")

    e = parser.add_command(sub, "examples", help="the example bundles shipped with the package, each with its command line",
                           description="List the example bundles shipped with the package: what each is, the exact "
                                       "command line that diagnoses it (with its --now) and what that shows.",
                           epilog=EXAMPLES_EPILOG)
    e.add_argument("--path", metavar="NAME", help="print only the bundle directory of example NAME (default: list all)")
    e.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: for reading; json: a list of {name, path, now, verdict, exit_code, argv, ...} "
                        "(default: %(default)s)")

    s = parser.add_command(sub, "schema", help="print a shipped JSON Schema",
                           description="Print a shipped JSON Schema.", epilog=SCHEMA_EPILOG)
    s.add_argument("name", nargs="?", choices=SCHEMAS, default="report", metavar="NAME",
                   help="report: what diagnose/probe print with --format json; audit: the audit record "
                        "(default: %(default)s)")

    r = parser.add_command(sub, "rules", help="the rule base: list the rules or run the rule tests",
                           description="The rule base: list every rule, or run the rule tests.", epilog=RULES_EPILOG)
    rsub = r.add_subparsers(dest="rules_command", required=True, parser_class=_Parser, metavar="SUBCOMMAND",
                            title="subcommands")
    rl = r.add_command(rsub, "list", help="print every rule with its description",
                       description="Print every rule with its description.", epilog=RULES_LIST_EPILOG)
    rl.add_argument("--format", choices=["markdown", "json"], default="markdown",
                    help="output format (default: %(default)s)")
    rt = r.add_command(rsub, "test", help="run the rule tests (default: the packaged ones, with coverage)",
                       description="Run rule tests: the packaged ones with rule coverage, or those in PATH.",
                       epilog=RULES_TEST_EPILOG)
    rt.add_argument("path", nargs="?", type=Path, metavar="PATH",
                    help="a rule-test YAML file or a directory of them (default: the packaged rule tests)")
    signatures_arg(rl)
    signatures_arg(rt)

    parser.add_command(sub, "mcp", help="serve diagnose, probe, audit, triage and history as MCP tools over stdio "
                                        "(needs the optional extra rlhealth[mcp])",
                       description="Serve diagnose, probe, audit, triage and history as Model Context Protocol tools "
                                   "over stdio; each answers with the JSON document of the same command line. Needs "
                                   "the optional extra: pip install 'rlhealth[mcp]'.", epilog=MCP_EPILOG)
    return parser


def _parse(parser: _Parser, argv: list[str]) -> argparse.Namespace:
    """``parse_args``, except that an unknown option is answered by the subcommand's parser (its
    usage, not the top-level one)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        target = parser.commands.get(getattr(args, "command", None) or "", parser)
        target = target.commands.get(getattr(args, "rules_command", None) or "", target)
        target.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _emit_text(text: str) -> None:
    """Text for a person (Markdown report, triage, history): coloured only on a terminal."""
    if not capturing():
        from rlhealth import colour
        if colour.enabled(sys.stdout):
            text = colour.colourize(text)
    _emit(text)


def run_captured(argv: list[str]) -> tuple[str, int]:
    """Run one command line exactly as ``main`` does and return (what it printed, exit status).

    The MCP server's runner (``rlhealth mcp`` hands it over); calls are serialized.
    """
    return _run_captured(main, argv)


def _write_output(args, text: str) -> None:
    """The report to ``--output`` (when given) or stdout."""
    target = getattr(args, "output", None)
    if target is None:
        if getattr(args, "format", "markdown") == "markdown":
            _emit_text(text)
        else:
            _emit(text)
        return
    try:
        write_whole(Path(target), text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise UsageError(f"--output: cannot write {target}: {exc.strerror or exc}") from exc


def write_whole(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` whole or not at all: into a temporary file beside it, then
    renamed over it (an interrupt leaves the old file or none, never a part). A target that
    exists and is no regular file (``/dev/stdout``, a FIFO) is written directly."""
    import tempfile

    real = Path(os.path.realpath(target))
    if real.exists() and not real.is_file():
        with open(real, "w", encoding="utf-8") as f:
            f.write(text)
        return
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _given(args):
    from rlhealth.given import given_from_args

    try:
        return given_from_args(args)
    except ValueError as exc:
        raise UsageError(f"dispatcher inputs: {exc}") from exc


def _early_trials(bundle: Path):
    """A trial reader started before the diagnosis is imported (``EarlyTrials``: the one reader
    not started by the trial summary itself), when the bundle has a ``trace_jobs/`` directory."""
    trace_root = Path(bundle) / "trace_jobs"
    try:
        if not trace_root.is_dir() or trace_root.is_symlink():
            return None
    except (OSError, ValueError):
        return None
    from rlhealth.probes.parse.trials import EarlyTrials

    return EarlyTrials(trace_root)


def _coherence_apart(early):
    """How this one diagnosis lets the coherence sample be measured in another process
    (``rlhealth.coherence.measuring``): for a bundle with ``trace_jobs/`` too small for the early
    trial reader, a child that loads the libraries while the diagnosis imports (the second CPU is
    idle then); with the early reader (which takes that CPU), a child that loads them once this
    process has scanned its share of the logs (``coherence.AfterScan``)."""
    if early is None:
        return None
    from rlhealth import coherence

    return coherence.AfterScan() if early.started else coherence.standing_by()


def _cmd_diagnose(args, bundle: Path, now: datetime, *, record_as: str | None = None, argv: list[str] | None = None) -> int:
    max_age_s = parse_duration(args.max_age, "--max-age")
    early = _early_trials(bundle)       # forked first: before pydantic is imported and the compile thread below
    apart = _coherence_apart(early)
    try:
        given = _given(args)
        from rlhealth.probes.patterns import prepare_packaged

        prepare_packaged()      # compiles on another core while the diagnosis imports and loads its rules
        from rlhealth.diagnose import diagnose

        report = diagnose(bundle, now=now, max_age_s=max_age_s, mode_override=args.mode,
                          capture=getattr(args, "capture", None), given=given, with_plots=args.format == "html",
                          early_trials=early, coherence_apart=apart)
    finally:
        if early is not None:
            early.discard()
        if hasattr(apart, "close"):
            apart.close()
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


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    path = Path(path).expanduser().absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _own_capture(bundle: Path, now: datetime) -> Path | None:
    """The capture directory this probe created in ``bundle``: ``CaptureWriter`` names it by the
    evaluation time, ``<stamp>``, ``<stamp>-1``, ... (the first free name), so it is the last of
    that sequence that exists."""
    from rlhealth.probes.capture import CAPTURES_DIR, STAMP_FORMAT

    stamp = now.astimezone(timezone.utc).strftime(STAMP_FORMAT)
    base = Path(bundle) / CAPTURES_DIR
    found, n = None, 0
    while (base / (stamp if n == 0 else f"{stamp}-{n}")).is_dir():
        found = base / (stamp if n == 0 else f"{stamp}-{n}")
        n += 1
    return found


def capture_observed(capture_dir: Path | None) -> bool:
    """Whether a capture observed anything: one probe step in its capture.json ended without error."""
    if capture_dir is None:
        return False
    try:
        doc = json.loads((capture_dir / "capture.json").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return False
    probes = doc.get("probes") if isinstance(doc, dict) else None
    return any(isinstance(p, dict) and not p.get("error") for p in probes or [])


def _remove_capture(capture_dir: Path, keep: Path) -> None:
    """Remove a capture that observed nothing, then every directory above it left empty, up to
    (not including) ``keep``, the nearest directory that existed before the probe."""
    import shutil

    shutil.rmtree(capture_dir, ignore_errors=True)
    d = capture_dir.parent
    keep = keep.resolve()
    while d.resolve() != keep and keep in d.resolve().parents:
        try:
            d.rmdir()                  # only an empty directory: nothing of anyone else's
        except OSError:
            break
        d = d.parent


def _cmd_probe(args, now: datetime, argv: list[str]) -> int:
    _given(args)  # refuse bad dispatcher inputs before touching the cluster
    options = probe_options(args)
    backend = get_backend(options.backend)
    from rlhealth.progress import Progress, set_current

    existed = _nearest_existing(options.bundle_root)
    with Progress(f"probe {args.backend} {args.job}") as progress:
        set_current(progress)
        try:
            bundle = backend.capture(options, now=now)
        finally:
            set_current(None)
    own = _own_capture(bundle, now)
    if own is None or capture_observed(own):
        return _cmd_diagnose(args, bundle, now, record_as="probe", argv=["rlhealth", *argv])
    # nothing observed (no connection, no credentials): the report says why and what to fix; the
    # capture holds nothing worth keeping, so the probe leaves nothing behind
    try:
        return _cmd_diagnose(args, bundle, now, argv=["rlhealth", *argv])
    finally:
        _remove_capture(own, existed)
        print(f"rlhealth: the probe observed nothing (every step failed); its capture {own} was not kept",
              file=sys.stderr)


def _cmd_audit(args, now: datetime) -> int:
    from rlhealth.audit import run_audit
    from rlhealth.triage import is_bundle

    if args.bundle is None and is_bundle(Path(args.run)):
        args.bundle = args.run      # a bundle given as RUN is read as its own bundle, as diagnose reads it
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

    with Progress("triage") as progress:
        rows = T.triage(args.root, now=now, max_age_s=parse_duration(args.max_age, "--max-age"), workers=args.jobs,
                        progress=progress)
    if args.format == "json":
        _emit(T.render_json(args.root, rows, now))
    else:
        _emit_text(T.render_text(args.root, rows))
    return T.exit_code(rows)


def _cmd_history(args) -> int:
    from rlhealth import history as H

    problems: list[str] = []
    entries = H.timeline(H.read_history(args.bundle, problems))
    if args.format == "json":
        _emit(H.render_json(args.bundle, entries, problems))
    else:
        _emit_text(H.render_text(args.bundle, entries, problems))
    return 0


def _cmd_schema(args) -> int:
    from importlib import resources

    _emit(resources.files("rlhealth").joinpath("schema", f"{args.name}.schema.json").read_text())
    return 0


def _cmd_mcp() -> int:
    try:
        from rlhealth.mcp_server import serve
    except ImportError as exc:
        raise UsageError(f"rlhealth mcp needs the optional extra: pip install 'rlhealth[mcp]' ({exc})") from exc
    serve(run_captured)
    return 0


def _cmd_examples(args) -> int:
    from rlhealth.examples import example_names, example_path, load_examples

    if args.path:
        if args.path not in example_names():
            raise UsageError(f"unknown example {args.path!r}; known: {', '.join(example_names())}")
        _emit(str(example_path(args.path)))
        return 0
    examples = load_examples()
    if args.format == "json":
        _emit(json.dumps(examples, indent=2, sort_keys=True, ensure_ascii=False))
        return 0
    _emit(render_examples(examples))
    return 0


def render_examples(examples: list[dict]) -> str:
    """``rlhealth examples``: each example, the exact command line that diagnoses it, what it shows."""
    import textwrap

    lines = [f"rlhealth ships {len(examples)} example bundle{'s' if len(examples) != 1 else ''} (incidents of its test corpus). "
             "Each is diagnosed by the command line shown;",
             "--now is the time it is judged at (without it the wall clock makes its evidence stale: ERROR).", ""]
    for e in examples:
        lines.append(f"{e['name']}: {e['title']}" if e["title"] else e["name"])
        if e["verdict"]:
            lines.append(f"  expect: {e['verdict']} (exit {e['exit_code']})")
        lines.append(f"  run:    {e['command']}")
        if e["shows"]:
            lines += textwrap.wrap(" ".join(str(e["shows"]).split()), width=100, initial_indent="  shows:  ",
                                   subsequent_indent="          ")
        lines.append("")
    lines.append("Add --format json, or --format html -o report.html, to any of them; "
                 "`rlhealth examples --path NAME` prints just the bundle directory.")
    return "\n".join(lines)


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


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (raised by the handler ``run`` installs); like KeyboardInterrupt,
    not an ``Exception``: no ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_MAIN_PID: int | None = None
_ENDING = False
"""Set once the command is ending (an interrupt is being answered, or ``main`` returned): a
further signal then ends the process at once."""


def _on_signal(signum, _frame) -> None:
    global _ENDING
    if os.getpid() != _MAIN_PID:
        os._exit(interrupted_exit(signum))    # a forked helper (trial reader, triage worker): the command answers
    if _ENDING:
        os._exit(interrupted_exit(signum))    # a second Ctrl-C while answering the first: leave now
    _ENDING = True
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise ``Interrupted`` in the command (main thread only)."""
    global _MAIN_PID, _ENDING
    _MAIN_PID, _ENDING = os.getpid(), False
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def _stop_children() -> None:
    """End the helper processes still running (forked trial readers, triage workers)."""
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        try:
            child.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    for child in children:
        try:
            child.join(timeout=2)
        except (OSError, ValueError, AssertionError):
            pass


def _answer_interrupt(args, argv: list[str], fmt: str, signum: int) -> int:
    """What an interrupted command leaves: no traceback, one line on stderr, under JSON a valid
    document with ``error.kind: "interrupted"``, and exit 128 + the signal number."""
    global _ENDING
    _ENDING = True
    code = interrupted_exit(signum)
    from rlhealth import progress
    progress.clear_line()
    _stop_children()
    message = f"interrupted by {signal_name(signum)}"
    print(f"rlhealth: {message}", file=sys.stderr)
    if fmt == "json":
        command = getattr(args, "command", None) or _command_of(argv)
        _emit(json.dumps(error_document(command, message, kind="interrupted", exit_code=code),
                         indent=2, sort_keys=True, ensure_ascii=False))
    return code


def run() -> None:
    """The ``rlhealth`` command (console script and ``python -m rlhealth``): ``main()`` with
    SIGINT/SIGTERM answered (``Interrupted``), the exit handlers, the standard streams flushed,
    then ``os._exit``: the interpreter is not torn down. Freeing every module and object one by
    one took about a tenth of a small bundle's diagnosis, and nothing rlhealth writes waits for it
    (files are closed where they are written)."""
    global _ENDING, _COLLECTOR_HELD
    # rlhealth's models are validated by pydantic alone: no third-party pydantic plugin observes or
    # changes them, and their discovery (every installed distribution's entry points, read when the
    # first model is built) is skipped. An operator's own setting of the variable stands.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # The cyclic garbage collector is off while a command starts: the imports and the models and
    # rules they build are objects that live until the end, which every collection walks again
    # for nothing (a sixth of the start-up's CPU). ``_dispatch`` turns it back on for every command
    # but ``diagnose``, which diagnoses once and ends (its reads build no cycles:
    # ``probes.bundle.collector_paused``).
    if gc.isenabled():
        gc.disable()
        _COLLECTOR_HELD = True
    install_signal_handlers()
    try:
        code = main()
    except Interrupted as exc:       # arrived outside main's own handling (while it answered)
        code = interrupted_exit(exc.signum)
    _ENDING = True
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


COLLECTOR_OFF_COMMANDS = ("diagnose",)
"""Commands that keep the garbage collector ``run`` turned off: one diagnosis, then the end."""
_COLLECTOR_HELD = False
"""``run`` turned the garbage collector off (``_dispatch`` turns it on again)."""


def _dispatch(args, now: datetime, argv: list[str]) -> int:
    global _COLLECTOR_HELD
    if _COLLECTOR_HELD and args.command not in COLLECTOR_OFF_COMMANDS:
        gc.enable()
        _COLLECTOR_HELD = False
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
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    argv = join_dash_values(list(sys.argv[1:] if argv is None else argv))
    wants_json = _wants_json(argv)
    _Parser.json_errors = wants_json
    try:
        return _main(argv, wants_json)
    finally:
        _Parser.json_errors = False     # a parser built later (a library caller, the next MCP call) exits as argparse does


def _main(argv: list[str], wants_json: bool) -> int:
    parser = build_parser()
    args = None
    fmt = "json" if wants_json else "markdown"
    try:
        args = _parse(parser, argv)
        fmt = getattr(args, "format", fmt)
        if getattr(args, "quiet", False):
            from rlhealth import progress
            progress.disable()
        _use_operator_signatures(getattr(args, "signatures", None) or [])
        check_command(args.command, args)      # every usage error before any work
        now = parse_now(getattr(args, "now", None))
        return _dispatch(args, now, argv)
    except UsageError as exc:
        print(f"rlhealth: usage error: {exc}", file=sys.stderr)
        if fmt == "json":
            command = getattr(args, "command", None) or _command_of(argv)
            _emit(json.dumps(error_document(command, str(exc)), indent=2, sort_keys=True, ensure_ascii=False))
        return EXIT_USAGE
    except Interrupted as exc:
        return _answer_interrupt(args, argv, fmt, exc.signum)
    except KeyboardInterrupt:       # no handler installed (``main`` called directly): Ctrl-C is SIGINT
        return _answer_interrupt(args, argv, fmt, signal.SIGINT)
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
