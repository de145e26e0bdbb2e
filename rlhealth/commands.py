"""Command plumbing shared by the command line (``rlhealth.cli``) and the MCP server
(``rlhealth.mcp_server``): where a command's document is printed, and running one command line
with what it printed captured, and the error document a command answers with when it could not run.

Both import this module; it imports neither of them. The MCP server is handed the CLI's
``main`` as a ``Runner`` when ``rlhealth mcp`` starts it, so a tool call runs the very command
line it mirrors.
"""
from __future__ import annotations

import io
import sys
import threading
from datetime import datetime, timezone
from typing import Callable

from rlhealth.usage import EXIT_INTERNAL, EXIT_USAGE

SCHEMAS = ("report", "audit")
"""The documents whose JSON Schema ships (``rlhealth schema NAME``)."""

Main = Callable[[list[str]], int]
"""A command line's entry point: argv without the program name -> exit status."""
Runner = Callable[[list[str]], "tuple[str, int]"]
"""One command line run with its output captured: argv -> (what it printed, exit status)."""

_OUT: io.StringIO | None = None
"""Where ``emit`` writes: stdout, or a buffer while ``run_captured`` runs a command."""
_RUN_LOCK = threading.Lock()


def emit(text: str) -> None:
    """Print one document (a trailing newline added when it has none)."""
    out = _OUT if _OUT is not None else sys.stdout
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def run_captured(main: Main, argv: list[str]) -> tuple[str, int]:
    """Run ``main(argv)`` and return (what it emitted, exit status); calls are serialized.

    ``SystemExit`` (``--help``, ``--version``) becomes its status, a non-integer one the usage status.
    """
    global _OUT
    with _RUN_LOCK:
        _OUT = io.StringIO()
        try:
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
            return _OUT.getvalue(), code
        finally:
            _OUT = None


def capturing() -> bool:
    """True while ``run_captured`` runs a command (its output goes to a buffer, never a terminal)."""
    return _OUT is not None


def error_document(command: str | None, message: str, *, kind: str = "usage", now: datetime | None = None,
                   exit_code: int | None = None) -> dict:
    """The JSON printed for a run that could not answer under ``--format json``: a usage error, an
    interrupt (any command) or an internal failure of triage/history. The command's own document
    shape (report, audit record, triage, history) with an ``error`` object ``{"kind":
    "usage"|"internal"|"interrupted", "message", "exit_code"}``."""
    now = now or datetime.now(timezone.utc)
    if exit_code is None:
        exit_code = EXIT_USAGE if kind == "usage" else EXIT_INTERNAL
    error = {"kind": kind, "message": message, "exit_code": exit_code}
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if command == "audit":
        from rlhealth.audit.core import SCHEMA
        return {"schema": SCHEMA, "evaluated_at": stamp, "status": "usage-error" if kind == "usage" else kind,
                "exit_code": exit_code, "error": error,
                "run": {"path": "", "bundle": None, "export_dir": None, "published_dir": None, "job_id": None}}
    if command == "triage":
        from rlhealth.triage import SCHEMA_ID
        return {"schema": SCHEMA_ID, "root": None, "evaluated_at": stamp, "jobs": [], "error": error}
    if command == "history":
        from rlhealth.history import SCHEMA_ID
        return {"schema": SCHEMA_ID, "bundle": None, "entries": [], "problems": [], "error": error}
    from rlhealth.report import internal_failure_report
    doc = internal_failure_report("", f"{kind} error: {message}" if kind != "interrupted" else message, now=now)
    doc.update(error=error, next_action_machine={"kind": "investigate", "command": None, "deciding_rule": None})
    if kind == "usage":
        doc.update(reasoning=f"usage error: {message}", next_action="Fix the command line (see rlhealth --help) and run again.",
                   flip_signal="A valid command line.")
        for gate in doc["gates"].values():
            gate["finding"] = f"not evaluated: usage error: {message}"
    elif kind == "interrupted":
        doc.update(reasoning=f"Not diagnosed: {message} before the diagnosis finished.",
                   next_action="Run the same command again and let it finish.",
                   flip_signal="A run that is not interrupted.")
        for gate in doc["gates"].values():
            gate["finding"] = f"not evaluated: {message}"
    return doc
