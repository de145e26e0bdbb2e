"""HTML rendering without a browser: the derivation (when the report carries one) and broken plots."""
from __future__ import annotations

from pathlib import Path

from rlhealth.usage import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.html import render_report_html

from corpus import incident_dirs, load_expected


def _report(fragment, **kw):
    d = next(d for d in incident_dirs() if fragment in d.name)
    return diagnose(d / "bundle", now=parse_now(load_expected(d)["now"]), **kw)


def test_derivation_is_rendered_when_present():
    base = _report("colocated-wedge")
    assert base.derivation, "the rule base reports a derivation"
    page = render_report_html(base)
    assert '<table id="derivation">' in page
    assert page.count("<tr><td><code>") >= len(base.derivation)
    node = {"id": "g:liveness", "kind": "gate", "rule": "liveness.hang_signature", "statement": "LIVENESS FAIL <wedged>",
            "from": ["m:nccl_watchdog"], "evidence": [{"source": "finelog.log", "line": 7, "text": "watchdog stuck"}]}
    page = render_report_html(base.model_copy(update={"derivation": [node]}))
    assert "LIVENESS FAIL &lt;wedged&gt;" in page and "<code>m:nccl_watchdog</code>" in page
    assert "finelog.log:7: watchdog stuck" in page
    assert '<table id="derivation">' not in render_report_html(base.model_copy(update={"derivation": []}))


def test_a_plot_that_cannot_be_drawn_is_reported_not_fatal(monkeypatch):
    import rlhealth.html as H

    def broken(*_a, **_k):
        raise ValueError("no axes today")

    monkeypatch.setattr(H, "plot_phases", broken)
    page = render_report_html(_report("baseline-healthy-standard", with_plots=True))
    assert 'id="plot-phases-error"' in page and "no axes today" in page
    assert 'data-plot="training"' in page


def test_html_is_deterministic():
    a = render_report_html(_report("colocated-deception-live", with_plots=True))
    b = render_report_html(_report("colocated-deception-live", with_plots=True))
    assert a == b and a.count("<svg") >= 4
