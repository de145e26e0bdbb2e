"""Replays every captured incident: verdict, each gate status, mode, terminal, restarts, the rules
that must fire, the quoted evidence, the first causal error, the JSON schema, and the golden
Markdown report (byte for byte)."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.render import render
from rlhealth.report import load_schema

from corpus import incident_dirs, load_expected

INCIDENTS = incident_dirs()
SCHEMA = load_schema()


def _run(d, monkeypatch, fmt="json"):
    expected = load_expected(d)
    monkeypatch.chdir(d)
    from pathlib import Path
    report = diagnose(Path("bundle"), now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"),
                      given=expected.get("given"))
    return expected, report


def test_corpus_is_big_enough():
    ids = [load_expected(d)["id"] for d in INCIDENTS]
    assert len(ids) >= 28 and len(set(ids)) == len(ids)
    kills = [load_expected(d) for d in INCIDENTS if load_expected(d)["verdict"] == "KILL"]
    assert kills
    assert [d.name for d in INCIDENTS] == sorted(ids)
    baselines = [d for d in INCIDENTS if "baseline" in d.name]
    assert len(baselines) >= 3


@pytest.mark.parametrize("d", INCIDENTS, ids=[d.name for d in INCIDENTS])
def test_incident(d, monkeypatch, update_golden):
    expected, report = _run(d, monkeypatch)
    doc = report.to_json_dict()
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] == expected["verdict"], doc["reasoning"]
    _assert_derivation_reaches_evidence(doc)
    if "confidence" in expected:
        assert doc["confidence"] == expected["confidence"]
    if doc["verdict"] == "KILL":
        assert doc["handoff"], "every KILL carries a HANDOFF"
        assert doc["next_action"].startswith("Recommend KILL") and len(doc["next_action"]) > 80, doc["next_action"]
    assert doc["mode"] == expected["mode"]
    assert doc["terminal"] == expected["terminal"]
    for gate, status in expected["gates"].items():
        assert doc["gates"][gate]["status"] == status, (gate, doc["gates"][gate]["finding"])
    for key, value in expected["restarts"].items():
        assert doc["restarts"][key] == value, (key, doc["restarts"])
    fired = {f["rule"] for f in doc["fired_rules"]}
    for rule in expected.get("fired", []):
        assert rule in fired, (rule, sorted(fired))
    for item in expected.get("evidence", []):
        texts = [e["text"] for e in doc["gates"][item["gate"]]["evidence"]]
        assert any(item["contains"] in t for t in texts), (item, texts)
    for gate, needle in (expected.get("finding_contains") or {}).items():
        assert needle in doc["gates"][gate]["finding"], (gate, doc["gates"][gate]["finding"])
    for rule in expected.get("not_fired", []):
        assert rule not in fired, (rule, sorted(fired))
    for needle in expected.get("report_not_contains", []):
        assert needle not in json.dumps(doc) and needle not in render(report, "markdown"), needle
    if expected.get("next_action_contains"):
        assert expected["next_action_contains"] in (doc["next_action"] or ""), doc["next_action"]
    if "flight_recorder_suspected" in expected:
        # the capture's flight-recorder summary names exactly the ranks the incident made faulty
        summaries = sorted(Path("bundle").glob("rlhealth/captures/*/flight_recorder/summary.json"))
        assert summaries and json.loads(summaries[-1].read_text())["suspected"] == expected["flight_recorder_suspected"]
    if expected.get("mode_source_contains"):
        assert expected["mode_source_contains"] in doc["mode_source"], doc["mode_source"]
    for gate, needle in (expected.get("any_finding_contains") or {}).items():
        assert any(needle in f["finding"] for f in doc["gates"][gate]["findings"]), (gate, doc["gates"][gate]["findings"])
    if expected.get("reasoning_contains"):
        assert expected["reasoning_contains"] in doc["reasoning"], doc["reasoning"]
    if expected.get("first_error_contains"):
        assert expected["first_error_contains"] in (doc["first_error"] or {}).get("text", "")
    for gate in doc["gates"].values():
        for ev in gate["evidence"]:
            assert len(ev["text"]) <= 500
            _assert_quote_is_the_line(d, ev)
    golden = d / "report.golden.md"
    markdown = render(report, "markdown")
    if update_golden:
        golden.write_text(markdown)
    assert golden.exists(), f"{golden} is missing: review the report, then write it with scripts/test --update-golden"
    assert markdown == golden.read_text()


def _assert_derivation_reaches_evidence(doc):
    """The verdict reaches gates, and every gate reaches a measurement with evidence or a missing node."""
    nodes = {n["id"]: n for n in doc["derivation"]}
    assert all(f in nodes for n in nodes.values() for f in n["from"]), "dangling derivation edge"

    def below(node_id, seen=None):
        seen = set() if seen is None else seen
        for child in nodes[node_id]["from"]:
            if child not in seen:
                seen.add(child)
                below(child, seen)
        return seen
    verdict = [n for n in nodes.values() if n["kind"] == "verdict"]
    assert len({n["statement"] for n in verdict}) >= 1
    gates = [n for n in nodes.values() if n["kind"] == "gate"]
    assert len({n["id"] for n in gates}) >= 5
    for gate in gates:
        leaves = [nodes[c] for c in below(gate["id"])]
        assert any((n["kind"] == "measurement" and n["evidence"]) or n["kind"] == "missing" for n in leaves), gate
    reached = [nodes[c] for v in verdict for c in below(v["id"])]
    if doc["verdict"] == "KILL" and not doc["terminal"]:
        chain_gates = [n for n in reached if n["kind"] == "gate"]
        assert chain_gates, "a KILL is derived through a gate"
        assert any(nodes[c]["kind"] == "measurement" and nodes[c]["evidence"] for g in chain_gates for c in below(g["id"]))


def _assert_quote_is_the_line(d, ev):
    """A quote with a line number and no summary flag is that line as read (cleaned, redacted, cut;
    leading and trailing blanks aside)."""
    from rlhealth.probes.textio import clean_line, quote
    if ev.get("summary") or not ev.get("line"):
        return
    path = d / "bundle" / ev["source"]
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if n == ev["line"]:
                whole = quote(clean_line(raw))
                if ev["text"].strip() != whole.strip():     # a long line quoted around its match
                    from rlhealth.redact import redact
                    line = redact(clean_line(raw))
                    assert len(line) > 500 and all(part.strip() in line for part in ev["text"].split("…")), \
                        (ev, clean_line(raw)[:200])
                return
    raise AssertionError(f"{ev['source']} has no line {ev['line']}")


@pytest.mark.parametrize("d", [d for d in INCIDENTS if "baseline" in d.name], ids=lambda d: d.name)
def test_baselines_fire_no_fail_or_error(d, monkeypatch):
    """Healthy baselines: NO-KILL and no FAIL/ERROR finding on any gate or restarts."""
    _, report = _run(d, monkeypatch)
    assert report.verdict == "NO-KILL"
    for name, gate in report.gates.items():
        assert all(f["status"] == "PASS" for f in gate.findings), (name, gate.findings)
    assert not report.restarts.same_failure


def test_json_output_is_deterministic(monkeypatch):
    d = INCIDENTS[0]
    _, first = _run(d, monkeypatch)
    _, second = _run(d, monkeypatch)
    assert first.to_json() == second.to_json()
    assert json.loads(first.to_json())["schema"] == "rlhealth.report/v1"


def test_committed_bundles_are_what_the_generator_writes(tmp_path):
    """tests/incidents/build.py regenerated into a temp dir gives the committed bundles byte for byte."""
    import filecmp
    import importlib.util
    from corpus import INCIDENTS_DIR
    spec = importlib.util.spec_from_file_location("incident_build", INCIDENTS_DIR / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.build(root=tmp_path)
    assert sorted(built) == [d.name for d in INCIDENTS]

    def differences(a, b, rel=""):
        cmp = filecmp.dircmp(a, b)
        out = [f"{rel}{n}" for n in cmp.left_only + cmp.right_only + cmp.funny_files]
        out += [f"{rel}{n}" for n in cmp.common_files if not filecmp.cmp(a / n, b / n, shallow=False)]
        for sub in cmp.common_dirs:
            out += differences(a / sub, b / sub, f"{rel}{sub}/")
        return out
    for name in built:
        assert not differences(tmp_path / name / "bundle", INCIDENTS_DIR / name / "bundle"), name
        assert (tmp_path / name / "expected.yaml").read_text() == (INCIDENTS_DIR / name / "expected.yaml").read_text(), name
