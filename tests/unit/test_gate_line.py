"""The gate line shows the finding that decided the verdict when that finding is the gate's, and
otherwise the gate's own deciding finding; ages are written in human units with the seconds."""
from __future__ import annotations

from types import SimpleNamespace

from rlhealth.diagnose import _gate_report
from rlhealth.facts import Derived
from rlhealth.units import age_text


def _gate(fid, finding_id, finding, order):
    return Derived(kind="gate", fact_id=fid, rule="gate.fail", statement=f"LIVENESS FAIL ({finding})", derived_from=(finding_id,),
                   fields={"gate": "liveness", "status": "FAIL", "finding": finding, "finding_id": finding_id, "order": order,
                           "rule_of_finding": "liveness.hang_signature"})


class _NoQuotes:
    def quoted(self, _fid):
        return []


def test_gate_line_shows_the_verdicts_deciding_finding():
    gates = [_gate("g1", "f1", "first by order", 1), _gate("g2", "f2", "the verdict's finding", 2)]
    result = SimpleNamespace(derived=gates)
    assert _gate_report("liveness", gates, [], _NoQuotes(), result).finding == "first by order"
    assert _gate_report("liveness", gates, [], _NoQuotes(), result, because="f2").finding == "the verdict's finding"
    # a deciding finding of another gate, or of another status, leaves the gate's own decision
    assert _gate_report("liveness", gates, [], _NoQuotes(), result, because="other").finding == "first by order"
    passing = [_gate("g1", "f1", "first by order", 1),
               Derived(kind="gate", fact_id="g3", rule="gate.pass", statement="", derived_from=("f3",),
                       fields={"gate": "liveness", "status": "PASS", "finding": "a pass", "finding_id": "f3", "order": 50})]
    report = _gate_report("liveness", passing, [], _NoQuotes(), SimpleNamespace(derived=passing), because="f3")
    assert report.status == "FAIL" and report.finding == "first by order"


def test_age_text():
    assert age_text(42) == "42 s"
    assert age_text(302) == "5m 2s (302 s)"
    assert age_text(420.4) == "7m (420 s)"
    assert age_text(10560) == "2h 56m (10560 s)"
    assert age_text(10560122.9) == "122d 5h (10560123 s)"
    assert age_text(None) == "None" and age_text("n/a") == "n/a"
