"""Command line (contract §5).

Exit status: 0 NO-KILL, 10 KILL, 20 ERROR verdict, 2 usage error, 1 internal failure.
A JSON run always prints a valid ``rlhealth.report/v1`` document, even on internal failure.
"""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from datetime import datetime
from importlib import resources
from pathlib import Path

from rlhealth.durable_loader import EngineUnavailable
from rlhealth.usage import (EXIT_ERROR, EXIT_INTERNAL, EXIT_KILL, EXIT_NO_KILL, EXIT_USAGE,  # noqa: F401
                           VERDICT_EXIT, UsageError, parse_duration, parse_now)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 on usage errors; keep that, with our prefix
        self.print_usage(sys.stderr)
        print(f"rlhealth: usage error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rlhealth", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def output_args(p):
        p.add_argument("--format", choices=["markdown", "json"], default="markdown")
        p.add_argument("--now", help="evaluation time, ISO-8601 (default: wall clock)")
        p.add_argument("--max-age", default="30m", help="freshness limit for a non-terminal job (default 30m)")
        p.add_argument("--mode", choices=["agentic", "standard"], help="override the mode read from the launch config")

    d = sub.add_parser("diagnose", help="offline diagnosis of one evidence bundle")
    d.add_argument("bundle", type=Path)
    d.add_argument("--capture", help="capture stamp to use (default: newest)")
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
    a.add_argument("--bundle", type=Path)
    a.add_argument("--export-dir", type=Path)
    a.add_argument("--published-dir", type=Path)
    a.add_argument("--policy", help="declared checkpoint selection rule, e.g. ema-reward:alpha=1/3")
    a.add_argument("--trace-root", type=Path, help="the trace rebuild's root (<job>_trace_jobs.tar, its sync manifest, trace_jobs/, staged export)")
    a.add_argument("--campaign", type=Path, help="campaign record (YAML/JSON): destinations, selection policy, registration and reclaim authority")
    a.add_argument("--break-step", type=int, help="first step of a known behavioral break (token salad, reward collapse, broken replay)")
    a.add_argument("--break-time", help="time of a known behavioral break, ISO-8601")
    a.add_argument("--diagnosis", type=Path, help="a `rlhealth diagnose --format json` report of the run; places a behavioral break it found")
    a.add_argument("--format", choices=["markdown", "json"], default="markdown")
    a.add_argument("--now", help="evaluation time, ISO-8601 (default: wall clock)")

    r = sub.add_parser("rules", help="the rule base: list the rules or run the rule tests")
    rsub = r.add_subparsers(dest="rules_command", required=True, parser_class=_Parser)
    rl = rsub.add_parser("list", help="print every rule with its description")
    rl.add_argument("--format", choices=["markdown", "json"], default="markdown")
    rt = rsub.add_parser("test", help="run the rule tests (default: the packaged ones, with coverage)")
    rt.add_argument("path", nargs="?", type=Path, help="a rule-test YAML file or a directory of them")

    e = sub.add_parser("examples", help="list the example incidents shipped with the package")
    e.add_argument("--path", metavar="NAME", help="print the bundle path of one example")
    return parser


def _emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _cmd_diagnose(args, bundle: Path, now: datetime) -> int:
    from rlhealth.diagnose import diagnose
    from rlhealth.render import render

    report = diagnose(bundle, now=now, max_age_s=parse_duration(args.max_age),
                      mode_override=args.mode, capture=getattr(args, "capture", None))
    _emit(render(report, args.format))
    return VERDICT_EXIT[report.verdict]


def probe_options(args):
    """The typed options a probe takes, from the parsed ``probe`` command line."""
    from rlhealth.probes.options import ProbeOptions

    return ProbeOptions.from_flags(
        backend=args.backend, job=args.job, bundle_root=args.bundle_root, deadline=args.deadline,
        command_timeout=args.command_timeout, poll_interval=args.poll_interval, polls=args.polls,
        cluster=args.cluster, host=args.host, experiment_dir=args.experiment_dir, ssh_config=args.ssh_config,
        known_hosts=args.known_hosts, kubeconfig=args.kubeconfig, context=args.context,
        namespace=args.namespace or "iris")


def _cmd_probe(args, now: datetime) -> int:
    options = probe_options(args)
    if args.backend == "slurm":
        from rlhealth.probes import slurm as backend
    else:
        from rlhealth.probes import kubernetes as backend
    bundle = backend.capture(options, now=now)
    return _cmd_diagnose(args, bundle, now)


def _cmd_audit(args, now: datetime) -> int:
    from rlhealth.audit import run_audit
    text, code = run_audit(args, now=now)
    _emit(text)
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    fmt = getattr(args, "format", "markdown")
    try:
        now = parse_now(getattr(args, "now", None))
        if args.command == "diagnose":
            return _cmd_diagnose(args, args.bundle, now)
        if args.command == "probe":
            return _cmd_probe(args, now)
        if args.command == "audit":
            return _cmd_audit(args, now)
        if args.command == "examples":
            return _cmd_examples(args)
        if args.command == "rules":
            return _cmd_rules(args)
    except UsageError as exc:
        print(f"rlhealth: usage error: {exc}", file=sys.stderr)
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
        print(f"rlhealth: internal failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        if fmt == "json" and args.command in ("diagnose", "probe"):
            _emit_failure_report(args, f"{type(exc).__name__}: {exc}")
        return EXIT_INTERNAL
    return EXIT_USAGE
