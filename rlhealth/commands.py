"""Command plumbing shared by the command line (``rlhealth.cli``) and the MCP server
(``rlhealth.mcp_server``): where a command's document is printed, and running one command line
with what it printed captured.

Both import this module; it imports neither of them. The MCP server is handed the CLI's
``main`` as a ``Runner`` when ``rlhealth mcp`` starts it, so a tool call runs the very command
line it mirrors.
"""
from __future__ import annotations

import io
import sys
import threading
from typing import Callable

from rlhealth.usage import EXIT_USAGE

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
