"""Rendering: the only consumer of ``reports/`` templates (Markdown) and the JSON encoder."""
from __future__ import annotations

import jinja2

from rlhealth.facts import GATES
from rlhealth.report import Report

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("rlhealth.reports", "templates"),
                          undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
                          trim_blocks=False, lstrip_blocks=False)


def render_markdown(report: Report) -> str:
    return _ENV.get_template("report.md.j2").render(r=report, gate_names=GATES)


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return report.to_json() + "\n"
    return render_markdown(report)
