"""The only module that talks to durable-rules.

Compiles the YAML rule specs (``rules/rulesets/*.yaml``) into durable-rules JSON rulesets,
runs every diagnosis in a fresh ``durable.engine.Host`` under a unique ruleset name (two
diagnoses in one process never share facts), and returns the findings the rules concluded
plus a trace of which rule fired on which facts.

durable-rules sharp edges handled here (style.md §6): a fact matching no rule raises
``MessageNotHandledException`` (ignored: an unmatched fact is not an error); identical facts
raise ``MessageObservedException`` (every fact has a unique ``id``); exceptions inside actions
are swallowed into the ruleset state (read back and raised as ``EngineError``); ruleset
definitions are mutated by the engine (deep-copied per host); every ``Host`` starts two
self-re-arming dispatch timer threads that never stop (not started here: facts are asserted and
actions run synchronously, no timers or queued events are used), and its C-side rulesets are
freed after the run.
"""
from __future__ import annotations

import copy
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import jinja2

from rlhealth.catalog import RuleSpec
from rlhealth.durable_loader import import_durable
from rlhealth.facts import AnyFact, Evidence, FindingSpec

durable_rules_engine, durable_engine = import_durable()

_COUNTER = itertools.count(1)
_LOCK = threading.Lock()
_TEMPLATES = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


class EngineError(Exception):
    """The rule engine failed; the diagnosis reports ERROR with this reason."""


@dataclass
class EngineResult:
    findings: list[FindingSpec] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)


def _scalar_payload(fact: AnyFact) -> dict[str, Any]:
    payload = {}
    for key, value in fact.engine_payload().items():
        if isinstance(value, (str, bool, int, float)) and not key.startswith("_"):
            payload[key] = value
    return payload


def compile_condition(conditions: dict[str, Any], thresholds: dict[str, float]) -> dict[str, Any]:
    """One alias's field conditions -> a durable-rules JSON expression."""
    terms = []
    for field_name, cond in conditions.items():
        if isinstance(cond, list):
            terms.append({"$or": [{field_name: v} for v in cond]} if len(cond) > 1 else {field_name: cond[0]})
        elif isinstance(cond, dict):
            for op, value in cond.items():
                if isinstance(value, str) and value.startswith("$thr."):
                    value = thresholds[value[len("$thr."):]]
                if op == "exists":
                    terms.append({"$ex" if value else "$nex": {field_name: 1}})
                elif op in ("gt", "gte", "lt", "lte"):
                    terms.append({f"${op}": {field_name: value}})
                elif op == "ne":
                    terms.append({"$neq": {field_name: value}})
                else:
                    raise EngineError(f"unknown operator {op!r} on {field_name}")
        else:
            terms.append({field_name: cond})
    return {"$and": terms} if len(terms) > 1 else terms[0]


def compile_ruleset(rules: list[RuleSpec], thresholds: dict[str, float]) -> dict[str, Any]:
    """RuleSpecs -> the body of a durable-rules JSON ruleset (rule key = rule id)."""
    body = {}
    for rule in rules:
        body[rule.id] = {"all": [{alias: compile_condition(cond, thresholds)} for alias, cond in rule.when.items()],
                         "run": rule.id}
    return body


class _Host(durable_engine.Host):
    """A durable Host whose named actions record findings for this run only."""

    def __init__(self, rules: dict[str, RuleSpec], evidence: dict[str, tuple[Evidence, ...]], result: EngineResult,
                 errors: list[str], full: dict[str, dict]):
        self._rules = rules
        self._evidence = evidence
        self._full = full
        self._result = result
        self._errors = errors
        super().__init__()

    def _run(self):
        """No background dispatch threads (see the module docstring)."""

    def close(self) -> None:
        """Free the engine's C-side rulesets of this host."""
        for ruleset in self._ruleset_list:
            try:
                durable_rules_engine.delete_ruleset(ruleset._handle)
            except Exception:  # already freed / never created: nothing to release
                pass
        self._ruleset_list = []
        self._ruleset_directory = {}

    def get_action(self, name: str):
        rule = self._rules.get(name)
        if rule is None:
            return super().get_action(name)

        def action(c):
            try:
                matched = {alias: self._full.get(str(fact.get("id")), dict(fact)) for alias, fact in (c._m or {}).items()}
                self._result.findings.append(_finding(rule, matched, self._evidence))
                self._result.fired.append({"rule": rule.id, "facts": sorted(str(f.get("id")) for f in matched.values())})
            except Exception as exc:  # recorded; durable would swallow it
                self._errors.append(f"rule {rule.id}: {type(exc).__name__}: {exc}")
        return action


def _render(template: str | None, matched: dict[str, dict]) -> str | None:
    if template is None:
        return None
    return " ".join(_TEMPLATES.from_string(template).render(**matched).split())


def _finding(rule: RuleSpec, matched: dict[str, dict], evidence: dict[str, tuple[Evidence, ...]]) -> FindingSpec:
    quoted: list[Evidence] = []
    aliases = sorted(rule.when, key=lambda a: (matched.get(a) or {}).get("kind") == "job")
    for alias in aliases:
        fact = matched.get(alias) or {}
        for item in evidence.get(str(fact.get("id")), ()):
            if item not in quoted:
                quoted.append(item)
    handoff = None
    if rule.handoff:
        handoff = {k: _render(v, matched) or "" for k, v in rule.handoff.items()}
    return FindingSpec(rule=rule.id, gate=rule.gate, status=rule.status, finding=_render(rule.finding, matched) or "",
                       evidence=tuple(quoted), facts=tuple(sorted(str(f.get("id")) for f in matched.values())),
                       stall=rule.stall, refutes_stall=rule.refutes_stall, next_action=_render(rule.next_action, matched),
                       flip_signal=_render(rule.flip_signal, matched), handoff=handoff, order=rule.order)


def run_rules(rules: list[RuleSpec], facts: list[AnyFact], thresholds: dict[str, float]) -> EngineResult:
    """Assert ``facts`` into a fresh ruleset built from ``rules``; return what fired.

    Raises EngineError when the engine or an action failed.
    """
    with _LOCK:
        name = f"rlhealth_{next(_COUNTER)}"
    result = EngineResult()
    errors: list[str] = []
    evidence = {fact.fact_id: fact.evidence for fact in facts}
    full = {fact.fact_id: {**fact.model_dump(mode="json", exclude={"evidence"}), "id": fact.fact_id} for fact in facts}
    host = _Host({r.id: r for r in rules}, evidence, result, errors, full)
    try:
        try:
            host.set_rulesets({name: copy.deepcopy(compile_ruleset(rules, thresholds))})
        except Exception as exc:
            raise EngineError(f"rule base failed to compile: {type(exc).__name__}: {exc}") from exc
        seen: set[str] = set()
        for fact in sorted(facts, key=lambda f: f.fact_id):
            if fact.fact_id in seen:
                raise EngineError(f"duplicate fact id {fact.fact_id!r}")
            seen.add(fact.fact_id)
            try:
                host.assert_fact(name, _scalar_payload(fact))
            except durable_engine.MessageNotHandledException:
                continue
            except Exception as exc:
                raise EngineError(f"asserting fact {fact.fact_id}: {type(exc).__name__}: {exc}") from exc
        try:
            state = host.get_state(name)
        except Exception:
            state = {}
        if isinstance(state, dict) and state.get("exception"):
            errors.append(str(state["exception"])[:500])
        if errors:
            raise EngineError("; ".join(errors))
    finally:
        host.close()
    result.findings.sort(key=lambda f: (f.gate, f.order, f.rule, f.facts))
    result.fired.sort(key=lambda f: (f["rule"], f["facts"]))
    return result
