"""Rendering: the only consumer of ``reports/`` templates (Markdown) and the JSON encoder."""
from __future__ import annotations

import re

import jinja2

from rlhealth.facts import GATES
from rlhealth.report import Report

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("rlhealth.reports", "templates"),
                          undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
                          trim_blocks=False, lstrip_blocks=False)

_QUOTE_LINE = re.compile(r"^(?P<pad>\s*)(?P<mark>[>=]) (?P<where>.+?(?::[0-9]+)?): (?P<text>.*?)(?P<summary> \(summary\))?$", re.S)


def quote_line(e) -> str:
    """One quote as the Markdown prints it: ``> file:line: text`` for a line as read, ``= file[:line]:
    text (summary)`` for a record or tally restated."""
    where = f"{_get(e, 'source')}:{_get(e, 'line')}" if _get(e, "line") else str(_get(e, "source"))
    if _get(e, "summary"):
        return f"= {where}: {_get(e, 'text')} (summary)"
    return f"> {where}: {_get(e, 'text')}"


def _get(e, name):
    return e.get(name) if isinstance(e, dict) else getattr(e, name, None)


_REF_CHARS = 60
"""A later mention of a quote without a line number repeats this many characters of its text."""


class Quotes:
    """Each quote printed once per report: the first mention prints the quoted text, every later
    mention of the same quote refers to it (``> finelog.log:113 (quoted above)``; a quote without a
    line number by its source and the start of its text)."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}
        self._texts: dict[str, str] = {}

    def _ref(self, line: str) -> str:
        m = _QUOTE_LINE.match(line)
        if m is None:
            return line
        where = m.group("where")
        if not re.search(r":[0-9]+$", where):     # no line number: name the quote by its start
            text = m.group("text")
            where += ": " + (text if len(text) <= _REF_CHARS else text[:_REF_CHARS - 1] + "…")
        return f"{m.group('mark')} {where} (quoted above)"

    def line(self, text: str) -> str:
        """``text`` (a formatted quote, possibly indented, or any other line) as this report prints it."""
        pad = text[: len(text) - len(text.lstrip())]
        body = text.lstrip()
        if not body.startswith(("> ", "= ")):
            return text
        if body in self._seen:
            return pad + self._seen[body]
        self._seen[body] = self._ref(body)
        m = _QUOTE_LINE.match(body)
        if m is not None:
            self._texts.setdefault(m.group("text"), m.group("where"))
        return text

    def __call__(self, e) -> str:
        return self.line(quote_line(e))

    def text(self, text: str | None) -> str | None:
        """A quoted text printed outside a quote line (an attempt's first error): a reference when
        a quote line above printed the same text."""
        if text and text in self._texts:
            return f"{self._texts[text]} (quoted above)"
        return text


def render_markdown(report: Report) -> str:
    return _ENV.get_template("report.md.j2").render(r=report, gate_names=GATES, quotes=Quotes())


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return report.to_json() + "\n"
    return render_markdown(report)
