"""``rlhealth audit RUN``: read-only audit of a terminal RL run and its completion record.

Seeds 000-002 (standard and agentic cleanup runbooks), reference marin-artifacts §6. The audit
classifies the run from its resolved configuration, establishes the terminal state, inventories
the evidence chain, validates every saved checkpoint and export, applies a declared selection
policy (``rlhealth.audit.policy``), optionally verifies a downloaded published model, and prints
the completion record (Markdown via ``reports/templates/audit.md.j2``, or JSON
``rlhealth.audit/v1``: the models of ``rlhealth.audit.record``, whose JSON Schema
``rlhealth/schema/audit.schema.json`` is generated). It writes nothing: every read is
confined to the given directories (``rlhealth.audit.safefs``).

Exit codes:
  0   audit complete: no blocking problem (warnings may remain; selection may be "unresolved")
  20  audit found blocking problems or could not complete (run not terminal or state unknown,
      required evidence absent, an invalid export / latest checkpoint, a declared policy that
      chose nothing, an incomplete publication, credential-shaped text in the published download
      or the trace root (parquet rows and tar members included), refused metric data (a malformed
      metric line, a non-numeric or missing reward), a recomputed trace coverage below the gate,
      an unsafe path)
  2   usage error (RUN is not a directory, a given path such as --trace-root that does not exist, a bad --policy)
  1   internal failure (a record with status "internal-failure" is still printed; no traceback)
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from rlhealth.usage import EXIT_AUDIT_BLOCKED as EXIT_BLOCKED
from rlhealth.usage import EXIT_AUDIT_COMPLETE as EXIT_COMPLETE
from rlhealth.usage import EXIT_INTERNAL, EXIT_USAGE  # noqa: F401  (one set of exit statuses, rlhealth.usage)


def render_json(record: dict) -> str:
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False)


def render_markdown(record: dict) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("rlhealth.reports", "templates"),
                             undefined=jinja2.StrictUndefined, autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template("audit.md.j2").render(r=record)


def internal_failure_record(args, now: datetime, message: str) -> dict:
    from rlhealth.audit.record import SCHEMA, RunSection, dump
    from rlhealth.redact import redact

    run = RunSection(path=str(getattr(args, "run", "")), bundle=None, export_dir=None, published_dir=None, job_id=None)
    return {"schema": SCHEMA, "evaluated_at": now.isoformat().replace("+00:00", "Z"), "run": dump(run),
            "status": "internal-failure", "error": redact(message)}


def run_audit(args, now: datetime) -> tuple[str, int]:
    from rlhealth.usage import UsageError

    import rlhealth.audit.policy as P

    run = Path(args.run)
    if not run.is_dir():
        raise UsageError(f"RUN is not a directory: {run}")
    for flag in ("bundle", "export_dir", "published_dir", "trace_root", "campaign", "diagnosis"):
        v = getattr(args, flag, None)
        if v is not None and not Path(v).exists():
            raise UsageError(f"--{flag.replace('_', '-')}: no such path: {v}")
    try:
        policy = P.parse_policy(getattr(args, "policy", None))
    except P.PolicyError as exc:
        raise UsageError(f"--policy: {exc}") from exc
    break_step = getattr(args, "break_step", None)
    if break_step is not None and break_step < 0:
        raise UsageError("--break-step must be a non-negative step")
    break_time = None
    if getattr(args, "break_time", None):
        try:
            break_time = datetime.fromisoformat(args.break_time.replace("Z", "+00:00"))
        except ValueError as exc:
            raise UsageError(f"--break-time: not an ISO-8601 time: {args.break_time}") from exc
        if break_time.tzinfo is None:
            raise UsageError("--break-time needs a time zone (e.g. 2026-08-01T12:00:00Z)")
    fmt = getattr(args, "format", "markdown")
    try:
        from rlhealth.audit.campaign import load_campaign
        from rlhealth.audit.core import build_record

        record = build_record(run, getattr(args, "bundle", None), getattr(args, "export_dir", None),
                              getattr(args, "published_dir", None), policy, now,
                              trace_root=getattr(args, "trace_root", None),
                              campaign=load_campaign(getattr(args, "campaign", None)),
                              break_step=break_step, break_time=break_time,
                              diagnosis=getattr(args, "diagnosis", None))
        code = EXIT_BLOCKED if record["status"] == "blocked" else EXIT_COMPLETE
        record["exit_code"] = code
        return (render_json(record) if fmt == "json" else render_markdown(record)), code
    except Exception as exc:  # never a traceback to the user: a record that says what failed
        rec = internal_failure_record(args, now, f"{type(exc).__name__}: {exc}")
        rec["exit_code"] = EXIT_INTERNAL
        if fmt == "json":
            return render_json(rec), EXIT_INTERNAL
        return (f"RL-RUN-AUDIT — {rec['run']['path']} — evaluated {rec['evaluated_at']}\n\n"
                f"STATUS: internal-failure\nERROR: {rec['error']}\n"), EXIT_INTERNAL
