"""The rule base one rule at a time: the packaged rule tests (rules/tests/*.yaml), their coverage,
the generated rule documentation, and the catalog's refusal of conditions on unknown fields."""
from __future__ import annotations

import subprocess

import pytest

from rlhealth.catalog import RuleSpec, check_rule_references, load_catalog
from rlhealth.rulebook import rules_markdown
from rlhealth.ruletest import case_files, load_defaults, run_all, run_case

from corpus import REPO, rlhealth_argv

CATALOG = load_catalog()
RESULTS, GAPS = run_all()


@pytest.mark.parametrize("result", RESULTS, ids=[f"{r.file}:{r.name}" for r in RESULTS])
def test_rule_case(result):
    assert not result.failures, result.failures


def test_every_rule_is_tested_both_ways():
    assert RESULTS and not GAPS, "\n".join(GAPS)


def test_a_rule_exempt_from_near_misses_must_fire_in_every_case():
    _, gaps = run_all(catalog=CATALOG, total={"gate.pass": "claimed total", "no.such_rule": "typo"})
    assert any(g.startswith("gate.pass: fires on every input") for g in gaps), gaps
    assert any(g.startswith("no.such_rule: listed in _coverage.yaml") for g in gaps), gaps
    assert not any(g.startswith("gate.pass: no case asserts") for g in gaps), gaps


def test_a_wrong_expectation_fails_the_case():
    case = {"name": "healthy but claimed frozen", "fires": ["liveness.trainer_frozen"], "gates": {"liveness": "FAIL"}}
    result = run_case(case, "inline", CATALOG, load_defaults())
    assert len(result.failures) == 2


def test_a_finding_expectation_checks_the_gate_finding():
    healthy = {"name": "healthy", "gates": {"liveness": "PASS"}, "finding_contains": {"liveness": "trainer advancing"}}
    assert run_case(healthy, "inline", CATALOG, load_defaults()).failures == []
    wrong = {"name": "healthy but claimed idle", "finding_contains": {"liveness": "engines idle"}}
    assert len(run_case(wrong, "inline", CATALOG, load_defaults()).failures) == 1


def test_cli_rules_test_and_list(tmp_path):
    one = sorted(str(p) for p in case_files())[0]
    done = subprocess.run(rlhealth_argv("rules", "test", one), capture_output=True, text=True)
    assert done.returncode == 0 and "rule test case(s) passed" in done.stdout, done.stdout + done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n- name: wrong\n  fires: [liveness.terminal]\n")
    done = subprocess.run(rlhealth_argv("rules", "test", str(bad)), capture_output=True, text=True)
    assert done.returncode == 1 and "expected liveness.terminal to fire" in done.stdout
    listed = subprocess.run(rlhealth_argv("rules", "list", "--format", "json"), capture_output=True, text=True, check=True)
    import json
    entries = json.loads(listed.stdout)
    assert {e["id"] for e in entries} == {r.id for r in CATALOG.rules}
    assert all(e["description"] and set(e) >= {"id", "gate", "description", "thresholds"} for e in entries)


def test_docs_rules_md_is_current():
    assert (REPO / "docs" / "rules.md").read_text() == rules_markdown(CATALOG), \
        "docs/rules.md is stale: rlhealth rules list --format markdown > docs/rules.md"


def test_catalog_refuses_conditions_on_fields_no_fact_has():
    rule = RuleSpec(id="liveness.bad", description="d", gate="liveness", status="FAIL", finding="x",
                    when={"t": {"kind": "trainer", "frozen": True}, "c": {"kind": "conclusion", "name": "trainer_frozen",
                                                                          "no_such": 1}})
    errors = check_rule_references(CATALOG.rules + [rule], CATALOG.thresholds, CATALOG.sets)
    assert any("liveness.bad" in e and "'frozen'" in e for e in errors), errors
    assert any("liveness.bad" in e and "'no_such'" in e for e in errors), errors
