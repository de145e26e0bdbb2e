"""The knowledge base as a whole, loaded through the installed package: every data file validates,
ids are unique, every signature is detected and every rule fires in some incident, and no FAIL or
ERROR rule fires on a healthy baseline."""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest
import yaml

from rlhealth.catalog import ID_RE, load_catalog
from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.probes.bundle import read_bundle

from corpus import incident_dirs, load_expected

CATALOG = load_catalog()


@pytest.fixture(scope="module")
def corpus_runs():
    runs = {}
    for d in incident_dirs():
        expected = load_expected(d)
        report = diagnose(d / "bundle", now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"),
                          given=expected.get("given"))
        read = read_bundle(d / "bundle", CATALOG)
        runs[d.name] = (expected, report, set(read.signatures) | set(read.suppressed))
    return runs


def test_loaded_from_installed_package_not_source_tree():
    rules_pkg = resources.files("rlhealth.rules")
    assert rules_pkg.joinpath("thresholds.yaml").is_file()
    for rel in CATALOG.files:
        node = rules_pkg
        for part in rel.split("/"):
            node = node.joinpath(part)
        assert node.is_file(), rel
    assert len(CATALOG.signatures) >= 30
    assert len(CATALOG.rules) >= 40


def test_every_signature_file_is_valid_and_named_by_id():
    for rel in CATALOG.files:
        if rel.startswith("signatures/"):
            data = yaml.safe_load(resources.files("rlhealth.rules").joinpath(rel).read_text())
            assert Path(rel).stem == data["id"]
            assert ID_RE.match(data["id"])
            for key in ("title", "description", "remediation", "references", "status"):
                assert data.get(key), (rel, key)


def test_rule_ids_unique_and_findings_gate_prefixed():
    ids = [r.id for r in CATALOG.rules]
    assert len(ids) == len(set(ids))
    for rule in CATALOG.rules:
        assert rule.description, rule.id
        if rule.derive == "finding":
            assert rule.id.split(".")[0] == rule.gate


def test_tables_have_units_and_sources():
    assert {row["gpu"] for row in CATALOG.hbm_bandwidth} >= {"H100-80GB-SXM", "H200-141GB", "GH200-96GB", "B200-180GB", "A100-80GB"}
    for row in CATALOG.decode_table + CATALOG.hbm_bandwidth:
        assert row["source"]
    for key in CATALOG.thresholds:
        assert re.search(r"_(s|pct|mib|fraction|ratio|reqs|steps|trials|turns|attempts|polls|nats|factor|l2|loss|reward|chars|letters|words|tokens|samples|zipf)$", key), key


def test_every_signature_is_detected_by_an_incident(corpus_runs):
    """Every signature is proven on evidence: detected in an incident bundle, or named (or seen as
    benign) on a sourced real-wording line of tests/realworld/corpus.yaml, which
    tests/realworld/test_corpus.py asserts."""
    detected = set().union(*(sigs for _, _, sigs in corpus_runs.values()))
    realworld = yaml.safe_load((Path(__file__).parent / "realworld" / "corpus.yaml").read_text())["entries"]
    detected |= {e["expect"] for e in realworld} | {s for e in realworld for s in e.get("also") or []}
    missing = sorted(set(CATALOG.signatures) - detected)
    assert not missing, f"signatures without an incident or a real-wording entry: {missing}"


def test_expected_signatures_are_detected(corpus_runs):
    for name, (expected, _, sigs) in corpus_runs.items():
        for sig in expected.get("signatures", []):
            assert sig in sigs, (name, sig)


def test_every_rule_fires_in_some_incident(corpus_runs):
    fired = set()
    for _, report, _ in corpus_runs.values():
        fired |= {f["rule"] for f in report.fired_rules}
    missing = sorted({r.id for r in CATALOG.rules} - fired)
    assert not missing, f"rules never fired by an incident: {missing}"


def test_no_fail_or_error_rule_fires_on_a_baseline(corpus_runs):
    bad_rules = {r.id for r in CATALOG.rules if r.status in ("FAIL", "ERROR")}
    for name, (_, report, _) in corpus_runs.items():
        if "baseline" in name:
            fired = {f["rule"] for f in report.fired_rules}
            assert not (fired & bad_rules), (name, fired & bad_rules)


def test_every_fail_or_error_rule_has_a_healthy_counterexample(corpus_runs):
    baselines = [r for n, (_, r, _) in corpus_runs.items() if "baseline" in n]
    assert len(baselines) >= 3
    for rule in CATALOG.rules:
        if rule.status in ("FAIL", "ERROR"):
            assert all(rule.id not in {f["rule"] for f in b.fired_rules} for b in baselines)


def test_every_fatal_or_hang_signature_is_read_by_a_finding_rule():
    """A fatal or hang signature whose gate/family no finding rule matches would be silent."""
    def accepts(cond, sig):
        for field in ("severity", "gate", "family"):
            if field in cond:
                want = cond[field]
                options = want if isinstance(want, list) else [want]
                if getattr(sig, field) not in options:
                    return False
        return True
    readers = [c for r in CATALOG.rules if r.derive == "finding" for c in r.when.values() if c.get("kind") == "signature"]
    silent = [s.id for s in CATALOG.signatures.values()
              if s.severity in ("fatal", "hang") and not any(accepts(c, s) for c in readers)]
    assert not silent, silent


def test_packaged_yaml_reads_every_file_as_yaml_safe_load_does():
    """The packaged files are parsed with libyaml's safe loader (``rlhealth.packaged``): the same
    documents as PyYAML's own ``yaml.safe_load`` for every YAML file of the package."""
    from rlhealth.packaged import packaged_text, packaged_yaml

    rules_pkg = resources.files("rlhealth.rules")
    names = []
    stack = [("", rules_pkg)]
    while stack:
        prefix, node = stack.pop()
        for entry in node.iterdir():
            if entry.is_dir():
                stack.append((f"{prefix}{entry.name}/", entry))
            elif entry.name.endswith(".yaml"):
                names.append(f"{prefix}{entry.name}")
    assert len(names) > 60
    for name in sorted(names):
        assert packaged_yaml(name) == yaml.safe_load(packaged_text(name)), name
