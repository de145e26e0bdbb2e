"""The durable-rules adapter: forward chaining by strata, negation, references, isolation, errors."""
from __future__ import annotations

import json
import subprocess

import pytest

from rlhealth.catalog import RuleSpec, stratify
from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.engine import EngineError, compile_condition, run_rules
from rlhealth.facts import GateSlot, TrainerMeasured

from corpus import incident_dirs, load_expected, rlhealth_argv

THR = {"x": 5.0, "factor": 3.0}


def trainer(fact_id="trainer", age=9.0, median=None, steps=2):
    return TrainerMeasured(fact_id=fact_id, trainer_lines=1, metric_records=1, malformed_records=0,
                           steps_completed=steps, progress_age_s=age, median_step_s=median)


def staged(rules):
    levels, errors = stratify(rules)
    assert not errors
    return [r.model_copy(update={"level": levels[r.id]}) for r in rules]


def finding_rule(**kw):
    base = dict(id="liveness.t", description="test", gate="liveness", status="FAIL",
                when={"m": {"kind": "trainer", "progress_age_s": {"gt": "$thr.x"}}}, finding="age={{ m.progress_age_s }}")
    base.update(kw)
    return RuleSpec(**base)


def conclusion_rule(**kw):
    base = dict(id="c.frozen", description="test", derive="conclusion", conclude="frozen", statement="frozen {{ t.id }}",
                when={"t": {"kind": "trainer", "progress_age_s": {"gt": {"mul": ["$.median_step_s", "$thr.factor"]}}}},
                set={"age_s": "t.progress_age_s"})
    base.update(kw)
    return RuleSpec(**base)


def test_condition_compiles_thresholds_lists_exists_references_and_arithmetic():
    cond = compile_condition({"kind": "k", "sev": ["a", "b"], "n": {"gte": "$thr.x"}, "c": {"exists": False},
                              "d": {"lt": "@other.v"}, "e": {"gt": {"mul": ["$.f", "$thr.factor"]}},
                              "g": {"all": [{"gt": 1}, {"gt": "$.h"}]}, "s": "$set.names"}, THR, {"names": ["p", "q"]})
    assert cond == {"$and": [{"kind": "k"}, {"$or": [{"sev": "a"}, {"sev": "b"}]}, {"$gte": {"n": 5.0}},
                             {"$nex": {"c": 1}}, {"$lt": {"d": {"other": "v"}}},
                             {"$gt": {"e": {"$mul": {"$l": {"$m": "f"}, "$r": 3.0}}}},
                             {"$gt": {"g": 1}}, {"$gt": {"g": {"$m": "h"}}}, {"$or": [{"s": "p"}, {"s": "q"}]},
                             {"$ex": {"f": 1}}, {"$ex": {"h": 1}}]}


def test_rule_fires_only_on_matching_fact_and_traces_it():
    result = run_rules(staged([finding_rule()]), [trainer("a", age=9), trainer("b", age=1)], THR)
    assert [d.fields["finding"] for d in result.derived] == ["age=9.0"]
    assert result.fired == [{"rule": "liveness.t", "facts": ["a"]}]
    assert result.derived[0].derived_from == ("a",)


def test_a_conclusion_chains_into_a_later_rule_and_unless_sees_complete_inputs():
    uses = finding_rule(id="liveness.uses", when={"c": {"kind": "conclusion", "name": "frozen"}}, finding="frozen for {{ c.age_s }}")
    absent = finding_rule(id="liveness.absent", status="PASS", when={"t": {"kind": "trainer"}},
                          unless={"c": {"kind": "conclusion", "name": "frozen"}}, finding="not frozen")
    rules = staged([uses, absent, conclusion_rule()])
    assert {r.id: r.level for r in rules} == {"c.frozen": 1, "liveness.uses": 2, "liveness.absent": 2}
    frozen = run_rules(rules, [trainer(age=100, median=10)], THR)
    assert sorted(d.rule for d in frozen.derived) == ["c.frozen", "liveness.uses"]
    chained = next(d for d in frozen.derived if d.rule == "liveness.uses")
    assert chained.fields["finding"] == "frozen for 100.0" and chained.derived_from[0].startswith("c.frozen#")
    fresh = run_rules(rules, [trainer(age=10, median=10)], THR)
    assert [d.rule for d in fresh.derived] == ["liveness.absent"]


def test_a_missing_field_never_matches_a_comparison():
    result = run_rules(staged([conclusion_rule()]), [trainer(age=100, median=None)], THR)
    assert result.derived == []


def test_negation_with_any_of_and_a_reference_is_compiled_so_it_works():
    """durable-rules never matches an $or inside a negation that refers to another alias."""
    facts = [GateSlot(fact_id="s1", gate="liveness"), GateSlot(fact_id="s2", gate="resources")]
    made = [finding_rule(id=f"x.{g}{o}", gate=g, order=o, when={"g": {"kind": "gate_slot", "gate": g}}, finding=f"{g} {o}")
            for g, o in (("liveness", 20), ("resources", 10))]
    best = RuleSpec(id="v.best", description="test", derive="conclusion", conclude="best", statement="{{ s.finding }}",
                    when={"s": {"kind": "finding", "gate": ["liveness", "resources"]}},
                    unless={"b": {"kind": "finding", "gate": ["liveness", "resources"], "order": {"lt": "@s.order"}}})
    result = run_rules(staged(made + [best]), facts, THR)
    assert [d.statement for d in result.derived if d.kind == "conclusion"] == ["resources 10"]


def test_one_conclusion_from_several_rules_is_asserted_once_with_every_support():
    second = conclusion_rule(id="c.frozen_too", when={"t": {"kind": "trainer", "progress_age_s": {"gt": "$thr.x"}}},
                             statement="also frozen")
    uses = finding_rule(id="liveness.uses", when={"c": {"kind": "conclusion", "name": "frozen"}}, finding="frozen")
    result = run_rules(staged([conclusion_rule(), second, uses]), [trainer(age=100, median=10)], THR)
    assert [d.rule for d in result.derived if d.kind == "finding"] == ["liveness.uses"]
    (conclusion_id, supports), = result.also.items()
    assert supports[0]["from"] == ["trainer"]


def test_duplicate_fact_ids_are_refused():
    with pytest.raises(EngineError, match="duplicate fact id"):
        run_rules(staged([finding_rule()]), [trainer("a", age=9), trainer("a", age=8)], THR)


def test_action_exception_becomes_engine_error():
    with pytest.raises(EngineError, match="liveness.t"):
        run_rules(staged([finding_rule(finding="{{ m.no_such_field }}")]), [trainer(age=9)], THR)


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
        run_rules(staged([finding_rule()]), [trainer(age=9)], THR)
    assert threading.active_count() <= before


def test_durable_internals_this_adapter_relies_on():
    """The adapter uses private durable-rules 2.0.28 internals (see rlhealth/engine.py): fail loudly if they move."""
    from importlib.metadata import version

    import durable_rules_engine
    from durable import engine as durable_engine
    assert version("durable_rules") == "2.0.28"
    assert callable(getattr(durable_engine.Host, "_run")) and callable(durable_rules_engine.delete_ruleset)
    host = durable_engine.Host()   # starts the timer threads this adapter avoids; harmless in a test
    assert hasattr(host, "_ruleset_list") and hasattr(host, "_ruleset_directory")
    closure = durable_engine.Closure(host, None, {"sid": "0"}, {"a": {"id": "x"}}, 0)
    assert closure._m == {"a": {"id": "x"}}


# ----------------------------------------------------------------- templates without Jinja
_CONTEXT = {"tp": {"gpu": "H100", "tok": 12.5, "none": None, "flag": True, "items": "shadowed?", "nested": {"k": [1, 2]},
                   "text_number": "42.7", "inf": float("inf"), "nan": float("nan")},
            "thr": {"floor": 300}, "n": 3}


@pytest.mark.parametrize("template", [
    "{{ tp.gpu }} at {{tp.tok}} tok/s, floor {{ thr.floor }}",
    "{{ tp.none }} {{ tp.flag }} {{ n }} {{ tp.nested }} {{ tp.nested.k }}",
    "{{ tp.items }}",                 # a dict method name: Jinja's getattr finds the method first
    "{{ tp.nested.k.count }}",        # list.count: an attribute
    "  spaced   {{ n }}\n text  ",
    # the argument-less filters a plain print may apply, with Jinja's own functions
    "{{ tp.gpu|upper }} {{ tp.tok|int }} {{ tp.tok | int }}s {{ tp.text_number|int }} {{ tp.gpu|int }}",
    "{{ tp.none|int }} {{ tp.nested|int }} {{ tp.flag|int }} {{ tp.tok|int|upper }} {{ tp.none|upper }} {{ n|upper }} {{ tp.nan|int }}",
])
def test_plain_templates_render_as_jinja_does(template):
    from rlhealth import engine as E

    assert E._plain_template(template) is not None
    jinja = " ".join(E._TEMPLATES.from_string(template).render(**_CONTEXT).split())
    assert E._render(template, _CONTEXT) == jinja


@pytest.mark.parametrize("template", [
    "{% if n %}x{% endif %}", "{{ true }}", "{{ self }}", "{{- n }}", "{ {{ n }}", "{{ n }} }",
    "{{ tp.gpu|lower }}", "{{ tp.tok|int(5) }}", "{{ tp.gpu|upper() }}", "{{ tp.gpu|title }}",
])
def test_other_templates_go_to_jinja(template):
    from rlhealth import engine as E

    assert E._plain_template(template) is None
    assert E._render(template, _CONTEXT) == " ".join(E._TEMPLATES.from_string(template).render(**_CONTEXT).split())


@pytest.mark.parametrize("template", ["{{ tp.inf|int }}", "{{ n }} {{ tp.inf|int }}"])
def test_a_failing_filter_fails_as_in_jinja(template):
    """int() of an infinity raises in Jinja's int filter (OverflowError): the
    plain print hands the template to Jinja, which raises the same."""
    from rlhealth import engine as E

    assert E._plain_template(template) is not None
    with pytest.raises(Exception) as jinja:
        E._TEMPLATES.from_string(template).render(**_CONTEXT)
    with pytest.raises(jinja.type):
        E._render(template, _CONTEXT)


@pytest.mark.parametrize("template", ["{{ missing }}", "{{ tp.missing }}", "{{ tp.gpu.missing.deeper }}",
                                      "{{ tp.missing|int }}", "{{ missing|upper }}"])
def test_an_undefined_variable_fails_as_in_jinja(template):
    import jinja2

    from rlhealth import engine as E

    with pytest.raises(jinja2.UndefinedError):
        E._render(template, _CONTEXT)


@pytest.mark.parametrize("expression", ["5", "-2", "'high'", '"NO-KILL"', " tp.tok ", "tp.nested", "n", "tp.items"])
def test_plain_expressions_evaluate_as_jinja_does(expression):
    from rlhealth import engine as E

    assert E._plain_expression(expression) is not None
    assert E._evaluate(expression, _CONTEXT) == E.rule_templates.expression(expression)(**_CONTEXT)


def test_other_expressions_and_undefined_ones_go_to_jinja():
    from rlhealth import engine as E

    assert E._plain_expression("n + 1") is None and E._evaluate("n + 1", _CONTEXT) == 4
    assert E._plain_expression("'a\\'b'") is None
    assert E._plain_expression("none") is None and E._evaluate("none", _CONTEXT) is None
    with pytest.raises(E.EngineError):
        E._evaluate("tp.missing", _CONTEXT)
