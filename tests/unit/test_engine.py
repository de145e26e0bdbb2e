"""The durable-rules adapter: isolation between runs, unique facts, errors become ERROR."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlhealth.catalog import RuleSpec, load_catalog
from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.engine import EngineError, compile_condition, run_rules
from rlhealth.facts import make_fact

from corpus import incident_dirs, load_expected, rlhealth_argv

THR = {"x": 5.0}


def rule(**kw):
    base = dict(id="liveness.t", gate="liveness", status="FAIL", when={"m": {"kind": "k", "v": {"gt": "$thr.x"}}},
                finding="v={{ m.v }}")
    base.update(kw)
    return RuleSpec(**base)


def test_condition_compiles_thresholds_lists_and_exists():
    cond = compile_condition({"kind": "k", "sev": ["a", "b"], "n": {"gte": "$thr.x"}, "c": {"exists": False}}, THR)
    assert cond == {"$and": [{"kind": "k"}, {"$or": [{"sev": "a"}, {"sev": "b"}]}, {"$gte": {"n": 5.0}}, {"$nex": {"c": 1}}]}


def test_rule_fires_only_on_matching_fact_and_traces_it():
    facts = [make_fact("k", "a", v=9), make_fact("k", "b", v=1), make_fact("other", "c", v=100)]
    result = run_rules([rule()], facts, THR)
    assert [f.finding for f in result.findings] == ["v=9"]
    assert result.fired == [{"rule": "liveness.t", "facts": ["a"]}]


def test_two_runs_in_one_process_are_isolated():
    first = run_rules([rule()], [make_fact("k", "a", v=9)], THR)
    second = run_rules([rule()], [make_fact("k", "a", v=1)], THR)
    assert len(first.findings) == 1 and second.findings == []


def test_duplicate_fact_ids_are_refused():
    with pytest.raises(EngineError, match="duplicate fact id"):
        run_rules([rule()], [make_fact("k", "a", v=9), make_fact("k", "a", v=8)], THR)


def test_action_exception_becomes_engine_error():
    broken = rule(finding="{{ m.no_such_field }}")
    with pytest.raises(EngineError, match="liveness.t"):
        run_rules([broken], [make_fact("k", "a", v=9)], THR)


def test_unknown_operator_is_an_engine_error():
    with pytest.raises(EngineError, match="unknown operator"):
        compile_condition({"v": {"approx": 1}}, THR)


def test_engine_failure_turns_into_error_verdict(monkeypatch):
    import rlhealth.diagnose as diag

    def boom(*a, **k):
        raise EngineError("simulated engine crash")
    d = incident_dirs()[0]
    expected = load_expected(d)
    monkeypatch.setattr(diag, "run_rules", boom)
    report = diag.diagnose(d / "bundle", now=parse_now(expected["now"]))
    assert report.verdict == "ERROR"
    assert all(g.status == "ERROR" and "simulated engine crash" in g.finding for g in report.gates.values())


def test_in_process_runs_match_separate_processes(tmp_path):
    """Two diagnoses in one process give the same JSON as two separate processes."""
    picks = [d for d in incident_dirs() if "colocated-wedge" in d.name or "baseline-healthy-standard" in d.name]
    assert len(picks) == 2
    in_process = []
    for d in picks + picks:   # interleaved repeats in one process
        e = load_expected(d)
        in_process.append(diagnose(d / "bundle", now=parse_now(e["now"]), mode_override=e.get("mode_arg")).to_json())
    assert in_process[0] == in_process[2] and in_process[1] == in_process[3]
    for d, inproc in zip(picks, in_process):
        e = load_expected(d)
        out = subprocess.run(rlhealth_argv("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "json"),
                             capture_output=True, text=True, check=False, cwd="/")
        assert json.loads(out.stdout) == json.loads(inproc)


def test_runs_leave_no_threads_behind():
    """durable's Host would start self-re-arming dispatch timers per run; the adapter starts none."""
    import threading
    before = threading.active_count()
    for _ in range(20):
        run_rules([rule()], [make_fact("k", "a", v=9)], THR)
    assert threading.active_count() <= before
