"""The only module that talks to durable-rules: forward chaining over the rule base.

Compiles the YAML rules (``rules/rulesets/*.yaml``, loaded by ``rlhealth.catalog``) into one
durable-rules JSON ruleset and runs every diagnosis in a fresh ``durable.engine.Host`` under a
unique ruleset name (two diagnoses in one process never share facts).

Forward chaining: measurement facts are asserted first; then the stratum markers
``{kind: stage, level: 1}``, ``{level: 2}``, ... one after the other. A rule of level L also
waits for the marker of its level, so it fires only after every rule producing one of its inputs
(level < L) has run; its ``unless`` (negation) therefore sees complete inputs. A rule's action
renders its templates, evaluates its ``set`` expressions and asserts the derived fact, which
later strata consume. Every derived fact records the ids of the facts the rule matched.

Condition syntax (per alias, all terms must hold): ``field: value`` equals, ``field: [a, b]`` any
of, ``field: {gt|gte|lt|lte|ne: operand}``, ``field: {exists: bool}``, ``field: {all: [{op: operand}, ...]}`` (several comparisons with
the same operator). An operand is a number, a
string, ``$thr.<name>`` (rules/thresholds.yaml), ``$set.<name>`` (rules/sets.yaml; only for
equality = membership), ``$.<field>`` (another field of the same fact), ``@<alias>.<field>``
(a field of an earlier alias), or ``{add|sub|mul|div: [operand, operand]}``.

durable-rules 2.0.28 sharp edges handled here (style.md §6; checked against 2.0.28, pinned in
pyproject.toml; ``tests/unit/test_engine.py::test_durable_internals_this_adapter_relies_on``
fails if they change): a fact matching no rule raises ``MessageNotHandledException`` (ignored);
identical facts raise ``MessageObservedException`` (every fact has a unique ``id``); exceptions
inside actions are swallowed by the engine (recorded here and raised as ``EngineError``);
definitions are mutated by the engine (deep-copied per host); every ``Host`` starts two
self-re-arming timer threads (``Host._run``, overridden: everything runs synchronously); its C
rulesets are freed after the run (private ``Host._ruleset_list`` / ``Ruleset._handle``), the
ruleset's state node first (``delete_state``: ``delete_ruleset`` frees only the ruleset's own
pools, not the per-state message, frame and action pools, several MiB a run); the
matched facts of an action are read from the private ``Closure._m``.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import jinja2

from rlhealth.catalog import RuleSpec
from rlhealth.durable_loader import import_durable
from rlhealth.facts import Derived, Fact
from rlhealth import templates as rule_templates

durable_rules_engine, durable_engine = import_durable()

_COUNTER = itertools.count(1)
_LOCK = threading.Lock()
_TEMPLATES = rule_templates.ENV
_ARITH = {"add": "$add", "sub": "$sub", "mul": "$mul", "div": "$div"}
_COMPARE = {"gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte", "ne": "$neq"}
_STAGE_ALIAS = "stage_"


class EngineError(Exception):
    """The rule engine failed; the diagnosis reports ERROR with this reason."""


@dataclass
class EngineResult:
    derived: list[Derived] = field(default_factory=list)
    """Every fact the rules asserted, sorted by (rule level, rule id, fact id)."""
    fired: list[dict[str, Any]] = field(default_factory=list)
    """One entry per rule firing: the rule and the ids of the facts it matched (sorted)."""
    handoffs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Finding fact id -> its rendered handoff (a finding rule's ``handoff``)."""
    also: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Conclusion fact id -> further supports (rule, statement, from) of the same conclusion."""


def compile_operand(value: Any, thresholds: dict[str, float]) -> Any:
    """An operand -> a durable-rules expression or a constant."""
    if isinstance(value, dict):
        if len(value) != 1:
            raise EngineError(f"expression {value!r} must have exactly one operator")
        (op, operands), = value.items()
        if op not in _ARITH or not isinstance(operands, list) or len(operands) != 2:
            raise EngineError(f"unknown expression {value!r}")
        left, right = (compile_operand(x, thresholds) for x in operands)
        if all(isinstance(x, (int, float)) for x in (left, right)):
            return {"add": left + right, "sub": left - right, "mul": left * right,
                    "div": left / right if right else float("inf")}[op]
        return {_ARITH[op]: {"$l": left, "$r": right}}
    if isinstance(value, str):
        if value.startswith("$thr."):
            try:
                return thresholds[value[5:]]
            except KeyError:
                raise EngineError(f"unknown threshold {value!r}") from None
        if value.startswith("$."):
            return {"$m": value[2:]}
        if value.startswith("@"):
            alias, _, name = value[1:].partition(".")
            return {alias: name}
    return value


def _own_references(value: Any) -> list[str]:
    """Fields of the same fact an operand reads (``$.<field>``)."""
    if isinstance(value, dict):
        return [name for operands in value.values() if isinstance(operands, list)
                for operand in operands for name in _own_references(operand)]
    if isinstance(value, str) and value.startswith("$."):
        return [value[2:]]
    return []


def compile_condition(conditions: dict[str, Any], thresholds: dict[str, float],
                      sets: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """One alias's conditions -> a durable-rules JSON expression.

    A comparison with ``$.<field>`` also requires that field to exist: durable-rules compares a
    missing field as null, which would make ``age > $.limit * 3`` true without a limit.
    """
    terms = []
    referenced: list[str] = []
    for field_name, cond in conditions.items():
        if isinstance(cond, str) and cond.startswith("$set."):
            try:
                cond = list((sets or {})[cond[5:]])
            except KeyError:
                raise EngineError(f"unknown set {cond!r}") from None
        if isinstance(cond, list):
            options = [{field_name: compile_operand(v, thresholds)} for v in cond]
            terms.append({"$or": options} if len(options) > 1 else options[0])
        elif isinstance(cond, dict):
            items = [(op, value) for op, value in cond.items() if op != "all"]
            for part in cond.get("all") or []:
                items += list(part.items())
            for op, value in items:
                if op == "exists":
                    terms.append({"$ex" if value else "$nex": {field_name: 1}})
                elif op in _COMPARE:
                    terms.append({_COMPARE[op]: {field_name: compile_operand(value, thresholds)}})
                    referenced += [r for r in _own_references(value) if r not in referenced]
                else:
                    raise EngineError(f"unknown operator {op!r} on {field_name}")
        else:
            terms.append({field_name: compile_operand(cond, thresholds)})
    terms += [{"$ex": {name: 1}} for name in referenced]
    return {"$and": terms} if len(terms) > 1 else terms[0]


def compile_ruleset(rules: list[RuleSpec], thresholds: dict[str, float],
                    sets: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """RuleSpecs -> the body of a durable-rules JSON ruleset (rule key = rule id)."""
    body = {}
    for rule in rules:
        terms = [{_STAGE_ALIAS: {"$and": [{"kind": "stage"}, {"level": rule.level}]}}]
        terms += [{alias: compile_condition(cond, thresholds, sets)} for alias, cond in rule.when.items()]
        for alias, cond in rule.unless.items():
            for i, one in enumerate(_expand_any_of(cond, sets)):
                terms.append({f"{alias}{'' if i == 0 else f'_{i}'}$not": compile_condition(one, thresholds, sets)})
        body[rule.id] = {"all": terms, "run": rule.id}
    return body


def _expand_any_of(cond: dict[str, Any], sets: dict[str, list[str]] | None) -> list[dict[str, Any]]:
    """A negated condition with "any of" fields -> one condition per combination.

    not (a in [x, y] and rest) == not (a = x and rest) and not (a = y and rest); durable-rules
    mis-evaluates an ``$or`` inside a negation that also refers to another alias, so negations
    are compiled without ``$or``.
    """
    out = [dict(cond)]
    for field_name, value in cond.items():
        if isinstance(value, str) and value.startswith("$set."):
            value = list((sets or {}).get(value[5:], []))
        if isinstance(value, list):
            out = [{**c, field_name: v} for c in out for v in value]
    return out


def derived_id(rule_id: str, matched_ids: list[str]) -> str:
    digest = hashlib.sha1("\x1f".join(sorted(matched_ids)).encode()).hexdigest()[:10]
    return f"{rule_id}#{digest}"


class _Run:
    """What one diagnosis' actions need: the facts so far, thresholds, and where results go."""

    def __init__(self, rules: list[RuleSpec], facts: list[Fact], thresholds: dict[str, float]):
        self.rules = {r.id: r for r in rules}
        self.thresholds = thresholds
        self.records: dict[str, dict[str, Any]] = {}
        for fact in facts:
            record = fact.model_dump(mode="json", exclude={"evidence"})
            record["id"] = record.pop("fact_id")
            self.records[fact.fact_id] = record
        self.result = EngineResult()
        self.errors: list[str] = []
        self.conclusions: dict[tuple, str] = {}

    def fire(self, rule: RuleSpec, closure) -> None:
        matched_ids = {alias: str(fact.get("id")) for alias, fact in (closure._m or {}).items()
                       if alias != _STAGE_ALIAS}
        context: dict[str, Any] = {alias: self.records.get(fid, {}) for alias, fid in matched_ids.items()}
        context["thr"] = self.thresholds
        ids = sorted(matched_ids.values())
        fact_id = derived_id(rule.id, ids)
        self.result.fired.append({"rule": rule.id, "facts": ids})
        fields: dict[str, Any] = {}
        if rule.derive == "finding":
            fields = dict(gate=rule.gate, status=rule.status, order=rule.order, stall=rule.stall,
                          refutes_stall=rule.refutes_stall, early=rule.early, finding_id=fact_id,
                          finding=_render(rule.finding, context) or "",
                          next_action=_render(rule.next_action, context), flip_signal=_render(rule.flip_signal, context))
            if rule.handoff:
                self.result.handoffs[fact_id] = {k: _render(v, context) or "" for k, v in rule.handoff.items()}
        elif rule.derive == "conclusion":
            fields["name"] = rule.conclude
        for name, expression in rule.set.items():
            fields[name] = _evaluate(expression, context)
        statement = _render(rule.statement, context) if rule.statement else fields.get("finding", "")
        ordered_from = tuple(matched_ids[a] for a in rule.when if a in matched_ids)
        if rule.derive == "conclusion":
            # one conclusion, several supports: asserted once, the other derivations recorded
            key = (rule.conclude, tuple(sorted((k, repr(v)) for k, v in fields.items())))
            if key in self.conclusions:
                self.result.also.setdefault(self.conclusions[key], []).append(
                    {"rule": rule.id, "statement": statement or "", "from": list(ordered_from)})
                return
            self.conclusions[key] = fact_id
        derived = Derived(kind=rule.derive, fact_id=fact_id, rule=rule.id, statement=statement or "",
                          derived_from=ordered_from, fields={k: v for k, v in fields.items()
                                                           if v is None or isinstance(v, (str, bool, int, float))})
        record = dict(derived.fields)
        record.update(kind=derived.kind, id=fact_id, rule=rule.id, statement=derived.statement)
        self.records[fact_id] = record
        self.result.derived.append(derived)
        try:
            closure.assert_fact(derived.engine_payload())
        except durable_engine.MessageNotHandledException:
            pass  # nothing consumes this fact (a final conclusion): not an error


# Most templates only print variables (``... {{ tp.gpu }} ...``) and many set expressions are a
# literal or one variable: those are rendered here without compiling them with Jinja (compiling
# was most of a small diagnosis' rule run), with Jinja's semantics: a name from the context, each
# ``.attr`` as ``Environment.getattr`` (attribute first, then item), printed with ``str``. Whatever
# else, and any lookup that fails (Jinja's StrictUndefined error), goes to Jinja.
_PATH = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_PLAIN_FILTERS = ("int", "upper", "age")
"""Filters without arguments a plain print may apply (the environment's filter functions, called as
Jinja calls them)."""
_PRINT = re.compile(r"\{\{ *(" + _PATH + r") *((?:\| *(?:" + "|".join(_PLAIN_FILTERS) + r") *)*)\}\}")
_WHOLE_PATH = re.compile(r" *(" + _PATH + r") *")
_LITERAL = re.compile(r" *(?:(-?[0-9]+)|'([^'\\{}]*)'|\"([^\"\\{}]*)\") *")
_JINJA_NAMES = frozenset({"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else",
                          "self", "loop", "super", "varargs", "kwargs", "caller"})
"""Names Jinja reads as constants, operators or its own objects: never looked up here."""
_MISSING = object()


@functools.lru_cache(maxsize=2048)
def _plain_template(text: str) -> tuple | None:
    """``(literal, print, literal, print, ..., literal)`` when ``text`` only prints variables,
    each through the ``_PLAIN_FILTERS`` it names, else None; a print is ``(names, filters)``
    (the path as a name tuple, the filter functions in order)."""
    parts: list = []
    pos = 0
    for m in _PRINT.finditer(text):
        parts.append(text[pos:m.start()])
        filters = tuple(_TEMPLATES.filters[f.strip()] for f in m.group(2).split("|")[1:])
        parts.append((tuple(m.group(1).split(".")), filters))
        pos = m.end()
    parts.append(text[pos:])
    literals = parts[0::2]
    if any("{" in t or "}" in t for t in literals) or any(p[0][0] in _JINJA_NAMES for p in parts[1::2]):
        return None
    return tuple(parts)


@functools.lru_cache(maxsize=2048)
def _plain_expression(text: str) -> tuple | None:
    """``("literal", value)`` or ``("path", names)`` for an expression that is one, else None."""
    m = _LITERAL.fullmatch(text)
    if m:
        number, single, double = m.groups()
        return ("literal", int(number) if number is not None else single if single is not None else double)
    m = _WHOLE_PATH.fullmatch(text)
    if m and m.group(1).split(".")[0] not in _JINJA_NAMES:
        return ("path", tuple(m.group(1).split(".")))
    return None


def _lookup(names: tuple, context: dict[str, Any]) -> Any:
    """``Environment.getattr`` along ``names``; _MISSING where Jinja would be undefined."""
    value = context.get(names[0], _MISSING)
    for name in names[1:]:
        if value is _MISSING:
            break
        try:
            value = getattr(value, name)
        except AttributeError:
            try:
                value = value[name]
            except (TypeError, LookupError, AttributeError):
                value = _MISSING
    return value


def _render(template: str | None, context: dict[str, Any]) -> str | None:
    if template is None:
        return None
    if "{" not in template:     # no tag, variable or comment: Jinja would render the text itself
        return " ".join(template.split())
    plain = _plain_template(template)
    if plain is not None:
        out = []
        for i, part in enumerate(plain):
            if i % 2 == 0:
                out.append(part)
                continue
            names, filters = part
            value = _lookup(names, context)
            if value is _MISSING:
                break
            for apply in filters:       # what raises here raises in Jinja's rendering too
                value = apply(value)
            out.append(str(value))
        else:
            return " ".join("".join(out).split())
    return " ".join(rule_templates.template(template).render(**context).split())


def _evaluate(expression: str, context: dict[str, Any]) -> Any:
    plain = _plain_expression(expression)
    if plain is not None:
        kind, what = plain
        if kind == "literal":
            return what
        value = _lookup(what, context)
        if value is not _MISSING:
            return value
    value = rule_templates.expression(expression)(**context)
    if isinstance(value, jinja2.Undefined):
        raise EngineError(f"set expression {expression!r} is undefined")
    return value


class _Host(durable_engine.Host):
    """A durable Host whose named actions fire rules of one run, synchronously."""

    def __init__(self, run: _Run):
        self._run_state = run
        self.state_created = False
        """Facts reached the engine and none was refused, so the run's state is whole (``close`` frees
        it); a run whose state was never made or was left half-built leaks it rather than abort."""
        super().__init__()

    def _run(self):
        """No background dispatch threads (see the module docstring)."""

    def close(self) -> None:
        """Free the engine's C-side rulesets of this host."""
        for ruleset in self._ruleset_list:
            if self.state_created:      # delete_state aborts the process (C) without a whole state
                try:
                    durable_rules_engine.delete_state(ruleset._handle, None)
                except Exception:  # nothing to release
                    pass
            try:
                durable_rules_engine.delete_ruleset(ruleset._handle)
            except Exception:  # already freed / never created: nothing to release
                pass
        self._ruleset_list = []
        self._ruleset_directory = {}

    def get_action(self, name: str):
        rule = self._run_state.rules.get(name)
        if rule is None:
            return super().get_action(name)
        run = self._run_state

        def action(c):
            try:
                run.fire(rule, c)
            except Exception as exc:  # recorded; durable would swallow it
                run.errors.append(f"rule {rule.id}: {type(exc).__name__}: {exc}")
        return action


def run_rules(rules: list[RuleSpec], facts: list[Fact], thresholds: dict[str, float],
              sets: dict[str, list[str]] | None = None) -> EngineResult:
    """Assert ``facts`` into a fresh ruleset built from ``rules`` and chain to a fixpoint.

    Raises EngineError when the engine or an action failed. Called from the main thread the run
    happens right there; called from any other thread (the MCP server runs each tool call on a
    worker thread of its own) it happens on the one engine thread, so the engine's large C pools
    (several MiB per run) are always allocated and freed in the same malloc arena: glibc gives
    each new thread its own arena, and the pools freed in one arena and allocated in the next
    fragment the process' heap (measured over 1,000 MCP diagnose calls: +38 MiB after the first
    call with the runs on the callers' threads, +14 MiB on one engine thread, most of it in the
    first 20 calls).
    """
    if threading.current_thread() is not threading.main_thread():
        return _engine_thread().submit(_run_rules, rules, facts, thresholds, sets).result()
    return _run_rules(rules, facts, thresholds, sets)


@functools.lru_cache(maxsize=1)
def _engine_thread():
    """The single worker thread of the runs asked for off the main thread (started on first use)."""
    from concurrent.futures import ThreadPoolExecutor
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlhealth-engine")


def _run_rules(rules: list[RuleSpec], facts: list[Fact], thresholds: dict[str, float],
               sets: dict[str, list[str]] | None) -> EngineResult:
    with _LOCK:
        name = f"rlhealth_{next(_COUNTER)}"
    run = _Run(rules, facts, thresholds)
    host = _Host(run)
    try:
        try:
            host.set_rulesets({name: compile_ruleset(rules, thresholds, sets)})   # a fresh dict per run
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"rule base failed to compile: {type(exc).__name__}: {exc}") from exc
        seen: set[str] = set()
        payloads = []
        for fact in sorted(facts, key=lambda f: f.fact_id):
            if fact.fact_id in seen:
                raise EngineError(f"duplicate fact id {fact.fact_id!r}")
            seen.add(fact.fact_id)
            payloads.append(fact.engine_payload())
        payloads += [{"id": f"stage:{level}", "kind": "stage", "level": level}
                     for level in range(1, max((r.level for r in rules), default=0) + 1)]
        for payload in payloads:
            try:
                host.assert_fact(name, payload)
                host.state_created = True
            except durable_engine.MessageNotHandledException:
                host.state_created = True
                continue
            except Exception as exc:
                host.state_created = False      # a refused fact leaves the state half-built: freeing it aborts
                raise EngineError(f"asserting fact {payload['id']}: {type(exc).__name__}: {exc}") from exc
            if run.errors:
                break
        try:
            state = host.get_state(name)
        except Exception:
            state = {}
        if isinstance(state, dict) and state.get("exception"):
            run.errors.append(str(state["exception"])[:500])
        if run.errors:
            raise EngineError("; ".join(run.errors))
    finally:
        host.close()
    level = {r.id: r.level for r in rules}
    run.result.derived.sort(key=lambda d: (level.get(d.rule, 0), d.rule, d.fact_id))
    run.result.fired.sort(key=lambda f: (f["rule"], f["facts"]))
    return run.result
