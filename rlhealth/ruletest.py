"""Rule tests in the style of ``promtool test rules``: input facts in, expected conclusions out.

A test file (``rules/tests/*.yaml``) holds ``cases``; each case starts from the default facts
(``rules/tests/_defaults.yaml``: a healthy running standard job), applies its ``facts`` (a map
from fact id to field overrides; a new id adds a fact, ``null`` removes one) and states what
must follow:

    - name: a hang signature with no progress after it fails liveness
      facts:
        signature:nccl_watchdog_stuck: {kind: signature, sig: nccl_watchdog_stuck, ...}
      fires: [liveness.hang_signature]
      does_not_fire: [liveness.error_handled]
      gates: {liveness: FAIL}
      verdict: KILL
      confidence: high
      conclusions: [trainer_frozen]        # names that must be derived
      no_conclusions: [evidence_stale]     # names that must not

``rlhealth rules test [PATH]`` and pytest run the same cases; a full run also checks coverage:
every rule fires in some case and is named in ``does_not_fire`` of another. A rule that by design
fires on every input (``rules/tests/_coverage.yaml`` ``fires_on_every_input``, each with the reason)
has no near-miss; instead it must fire in every case.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rlhealth.catalog import Catalog, load_catalog
from rlhealth.engine import EngineError, EngineResult, run_rules
from rlhealth.facts import GATES, MEASUREMENTS, REPORTED_APART, Fact, gate_slot

_EXPECT_KEYS = {"name", "facts", "fires", "does_not_fire", "gates", "verdict", "confidence", "conclusions",
                "no_conclusions", "description", "finding_contains"}


@dataclass
class CaseResult:
    file: str
    name: str
    failures: list[str] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)
    not_fired_checked: set[str] = field(default_factory=set)


def _packaged_dir():
    return resources.files("rlhealth.rules").joinpath("tests")


def _read_yaml(path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_defaults() -> dict[str, dict[str, Any]]:
    return dict(_read_yaml(_packaged_dir().joinpath("_defaults.yaml"))["facts"])


def load_total_rules() -> dict[str, str]:
    """Rules that fire on every input by design (rule id -> why), exempt from the near-miss check."""
    entry = _packaged_dir().joinpath("_coverage.yaml")
    if not entry.is_file():
        return {}
    return dict((_read_yaml(entry) or {}).get("fires_on_every_input") or {})


def case_files(path: Path | None = None) -> list:
    if path is None:
        root = _packaged_dir()
        return sorted((e for e in root.iterdir() if e.name.endswith(".yaml") and not e.name.startswith("_")),
                      key=lambda e: e.name)
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(p for p in path.glob("*.yaml") if not p.name.startswith("_"))


def build_facts(overrides: dict[str, Any] | None, defaults: dict[str, dict[str, Any]]) -> list[Fact]:
    """Default facts with a case's overrides applied, validated by each kind's model."""
    merged = copy.deepcopy(defaults)
    for fact_id, fields in (overrides or {}).items():
        if fields is None:
            merged.pop(fact_id, None)
        elif fact_id in merged:
            merged[fact_id].update(fields)
        else:
            merged[fact_id] = dict(fields)
    facts: list[Fact] = []
    for fact_id, fields in sorted(merged.items()):
        kind = fields.get("kind")
        if kind not in MEASUREMENTS:
            raise ValueError(f"fact {fact_id}: unknown kind {kind!r}")
        facts.append(MEASUREMENTS[kind](fact_id=fact_id, **fields))
    facts += [gate_slot(g, list(facts)) for g in GATES + REPORTED_APART]
    return facts


def _decided(result: EngineResult, kind: str, key: str, gate: str | None = None) -> set[str]:
    return {str(d.fields.get(key)) for d in result.derived
            if d.kind == kind and (gate is None or d.fields.get("gate") == gate)}


def run_case(case: dict[str, Any], file: str, catalog: Catalog, defaults: dict) -> CaseResult:
    out = CaseResult(file=file, name=str(case.get("name")))
    unknown = set(case) - _EXPECT_KEYS
    if unknown:
        out.failures.append(f"unknown keys {sorted(unknown)}")
        return out
    known_rules = {r.id for r in catalog.rules}
    for rule_id in list(case.get("fires") or []) + list(case.get("does_not_fire") or []):
        if rule_id not in known_rules:
            out.failures.append(f"names unknown rule {rule_id}")
    try:
        facts = build_facts(case.get("facts"), defaults)
        result = run_rules(catalog.rules, facts, catalog.thresholds, catalog.sets)
    except (ValidationError, ValueError, EngineError) as exc:
        out.failures.append(f"{type(exc).__name__}: {exc}")
        return out
    out.fired = {f["rule"] for f in result.fired}
    for rule_id in case.get("fires") or []:
        if rule_id not in out.fired:
            out.failures.append(f"expected {rule_id} to fire")
    for rule_id in case.get("does_not_fire") or []:
        out.not_fired_checked.add(rule_id)
        if rule_id in out.fired:
            out.failures.append(f"expected {rule_id} not to fire")
    for gate, status in (case.get("gates") or {}).items():
        got = _decided(result, "gate", "status", gate)
        if got != {status}:
            out.failures.append(f"gate {gate}: expected {status}, got {sorted(got) or 'nothing'}")
    for gate, text in (case.get("finding_contains") or {}).items():
        got = _decided(result, "gate", "finding", gate)
        if not any(str(text) in finding for finding in got):
            out.failures.append(f"gate {gate}: expected a finding containing {text!r}, got {sorted(got) or 'nothing'}")
    for key in ("verdict", "confidence"):
        if key in case:
            got = _decided(result, key, key)
            if got != {str(case[key])}:
                out.failures.append(f"{key}: expected {case[key]}, got {sorted(got) or 'nothing'}")
    names = {str(d.fields.get("name")) for d in result.derived if d.kind == "conclusion"}
    for name in case.get("conclusions") or []:
        if name not in names:
            out.failures.append(f"expected conclusion {name}")
    for name in case.get("no_conclusions") or []:
        if name in names:
            out.failures.append(f"expected no conclusion {name}")
    return out


def run_all(path: Path | None = None, catalog: Catalog | None = None,
            total: dict[str, str] | None = None) -> tuple[list[CaseResult], list[str]]:
    """Every case under ``path`` (default: the packaged rule tests) and, for a full run, the coverage gaps."""
    catalog = catalog or load_catalog()
    defaults = load_defaults()
    results: list[CaseResult] = []
    for entry in case_files(path):
        doc = _read_yaml(entry) or {}
        for case in doc.get("cases") or []:
            results.append(run_case(case, entry.name, catalog, defaults))
    gaps: list[str] = []
    if path is None:
        fired = set().union(*(r.fired for r in results)) if results else set()
        checked = set().union(*(r.not_fired_checked for r in results)) if results else set()
        total = load_total_rules() if total is None else total
        known = {rule.id for rule in catalog.rules}
        gaps += [f"{rule_id}: listed in _coverage.yaml but not in the catalog" for rule_id in sorted(set(total) - known)]
        for rule in catalog.rules:
            if rule.id not in fired:
                gaps.append(f"{rule.id}: no case makes it fire")
            if rule.id in total:
                gaps += [f"{rule.id}: fires on every input (_coverage.yaml) but not in {r.file}: {r.name}"
                         for r in results if rule.id not in r.fired and not r.failures]
            elif rule.id not in checked:
                gaps.append(f"{rule.id}: no case asserts it does not fire")
    return results, gaps
