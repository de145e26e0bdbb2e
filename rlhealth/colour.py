"""Colour for verdicts and statuses in the text a command prints to a terminal.

Only where a person reads it: stdout is a TTY, ``NO_COLOR`` is unset or empty
(https://no-color.org), ``TERM`` is not ``dumb``, and the output is Markdown/text printed to stdout
-- never JSON, HTML, a ``-o`` file, a pipe or the MCP server's captured output. The text itself is
unchanged: only the status words in their fixed places get ANSI colour codes (quoted log lines,
which may hold the same words, are left alone).
"""
from __future__ import annotations

import os
import re

RED, GREEN, YELLOW, RESET, BOLD = "\033[31m", "\033[32m", "\033[33m", "\033[0m", "\033[1m"
COLOURS = {"KILL": RED, "FAIL": RED, "BLOCKED": RED,
           "NO-KILL": GREEN, "PASS": GREEN, "COMPLETE": GREEN,
           "ERROR": YELLOW, "INTERNAL-FAILURE": YELLOW, "USAGE-ERROR": YELLOW}
_STATUS = r"NO-KILL|KILL|PASS|FAIL|ERROR|BLOCKED|COMPLETE|INTERNAL-FAILURE|USAGE-ERROR"

# (line pattern, whether the status word is bold): the status word is the group ``s``
_LINES = (
    (re.compile(rf"^(?P<pre>VERDICT: |STATUS: )(?P<s>{_STATUS})\b"), True),              # report, audit
    (re.compile(rf"^(?P<pre>(?:LIVENESS|RESOURCES|ROLLOUTS|DYNAMICS): +)(?P<s>{_STATUS})\b"), False),  # gate lines
    (re.compile(r"^(?P<pre>)(?P<s>NO-KILL|KILL|ERROR)(?= )"), True),                        # triage rows
    (re.compile(r"^(?P<pre>\d{4}-\d\d-\d\dT\S+ +)(?P<s>NO-KILL|KILL|ERROR)\b"), True),      # history rows
)
_GATE_CELLS = re.compile(r"\b(?P<g>LIV|RES|ROL|DYN):(?P<s>PASS|FAIL|ERROR)\b")
"""Gate cells of a triage or history row (``LIV:FAIL``)."""


def enabled(stream) -> bool:
    """Colour for ``stream``: a TTY, ``NO_COLOR`` unset or empty, ``TERM`` not ``dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _paint(word: str, bold: bool) -> str:
    return f"{BOLD if bold else ''}{COLOURS.get(word, '')}{word}{RESET}"


def colourize(text: str) -> str:
    """``text`` with its verdict and status words coloured (see the module docstring)."""
    out = []
    for line in text.split("\n"):
        for pattern, bold in _LINES:
            m = pattern.match(line)
            if m is None:
                continue
            rest = line[m.end():]
            if pattern is _LINES[2][0] or pattern is _LINES[3][0]:
                rest = _GATE_CELLS.sub(lambda g: f"{g['g']}:{_paint(g['s'], False)}", rest)
            line = m["pre"] + _paint(m["s"], bold) + rest
            break
        out.append(line)
    return "\n".join(out)
