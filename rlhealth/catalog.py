"""The knowledge base as data: loaded and validated through the installed package.

Everything here comes from ``rlhealth.rules`` via ``importlib.resources`` (never a
path relative to the source tree). ``load_catalog`` validates every file and
collects all problems, each with its file, before failing.
"""

import csv
import io
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rlhealth.packaged import (CATALOG_CACHE_DIR, CATALOG_FORMAT, catalog_cache_name, catalog_key, packaged_catalog_data,
                               packaged_text, parse_yaml, signature_documents, stored_documents)

ID_RE = re.compile(r"^[a-z][a-z0-9_]{3,79}$")
_yaml = parse_yaml


class CatalogError(Exception):
    """One or more packaged knowledge files are invalid (all problems listed)."""


class Signature(BaseModel):
    """A log signature: a hyperscan-compatible regex plus what it means."""
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    id: str
    title: str
    family: str
    severity: Literal["fatal", "hang", "secondary", "transient", "benign", "marker"]
    gate: Literal["liveness", "resources", "rollouts", "dynamics"]
    pattern: str
    caseless: bool = False
    skip_if_line_matches: str | None = None
    suppresses: list[str] = Field(default_factory=list)
    explains: list[str] = Field(default_factory=list)
    """Signatures that are consequences of this one: in an attempt where this signature occurs,
    their occurrences do not compete for the first causal error unless timestamped earlier."""
    transient: bool = False
    detail_after: Literal["exception_line"] | None = None
    status: Literal["experimental", "stable", "deprecated"]
    description: str
    remediation: str
    references: list[str]

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not ID_RE.match(v):
            raise ValueError(f"id {v!r} must match {ID_RE.pattern}")
        return v

    @field_validator("pattern", "skip_if_line_matches")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            re.compile(v)
        return v


DerivedKind = Literal["conclusion", "finding", "gate", "verdict_candidate", "verdict", "confidence"]


class RuleSpec(BaseModel):
    """One rule of the rule base.

    ``when`` maps aliases to the conditions one fact must meet; ``unless`` maps aliases to
    conditions no fact may meet (they may refer to ``when`` aliases). What the rule asserts:
    a finding about a gate (``gate`` + ``status`` + ``finding``), or a derived fact of kind
    ``derive`` (a named ``conclude`` conclusion, a gate status, a verdict candidate, the verdict,
    the confidence) whose fields are the Jinja2 expressions in ``set``. The rule's stratum
    (``level``) is computed from what it consumes: a rule runs only once every rule producing an
    input of it has run, so ``unless`` sees complete inputs.
    """
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    id: str
    description: str
    when: dict[str, dict[str, Any]]
    unless: dict[str, dict[str, Any]] = Field(default_factory=dict)
    derive: DerivedKind = "finding"
    conclude: str | None = None
    set: dict[str, str] = Field(default_factory=dict)
    statement: str | None = None
    gate: Literal["liveness", "resources", "rollouts", "dynamics", "restarts"] | None = None
    status: Literal["PASS", "FAIL", "ERROR"] | None = None
    finding: str | None = None
    order: int = 100
    stall: bool = False
    refutes_stall: bool = False
    early: bool = False
    """A PASS that holds only because the run is young (lowers confidence)."""
    explain: bool = True
    """False for bookkeeping rules (arbitration) that the WHY block steps over."""
    reason: bool = False
    """The derived fact's statement is stated in REASONING (e.g. a run on its last retry)."""
    next_action: str | None = None
    flip_signal: str | None = None
    handoff: dict[str, str] | None = None
    level: int = 0
    source_file: str = ""

    @model_validator(mode="after")
    def _shape(self):
        if self.derive == "finding":
            if self.gate is None or self.status is None or self.finding is None:
                raise ValueError("a finding rule needs gate, status and finding")
        elif self.derive == "conclusion":
            if not self.conclude:
                raise ValueError("derive: conclusion needs conclude: <name>")
        if self.conclude and self.derive != "conclusion":
            raise ValueError("conclude is only for derive: conclusion")
        if self.derive != "finding" and self.statement is None:
            raise ValueError(f"derive: {self.derive} needs a statement")
        return self

    def produces(self) -> str:
        return f"conclusion:{self.conclude}" if self.derive == "conclusion" else self.derive

    def thresholds_used(self) -> list[str]:
        """Threshold names the rule reads ($thr.<name> in conditions, thr.<name> in templates)."""
        text = repr(self.when) + repr(self.unless) + repr(self.set) + repr(self.finding) + repr(self.statement)
        return sorted(set(re.findall(r"\bthr\.([a-z0-9_]+)", text)))


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)
    signatures: dict[str, Signature]
    rules: list[RuleSpec]
    """Every rule, with its computed ``level`` (stratum), sorted by (level, id)."""
    thresholds: dict[str, float]
    sets: dict[str, list[str]]
    hbm_bandwidth: list[dict[str, Any]]
    decode_table: list[dict[str, Any]]
    trial_exceptions: dict[str, Any]
    files: list[str]

    def rule(self, rule_id: str) -> RuleSpec:
        return next(r for r in self.rules if r.id == rule_id)


def _pkg():
    return resources.files("rlhealth.rules")


_read = packaged_text


def _csv(rel: str) -> list[dict[str, Any]]:
    rows = []
    for row in csv.DictReader(io.StringIO(_read(rel))):
        parsed = {}
        for key, value in row.items():
            try:
                parsed[key] = float(value) if key not in ("source", "gpu", "model_class", "pattern") else value
            except (TypeError, ValueError):
                parsed[key] = value
        rows.append(parsed)
    return rows


def load_catalog() -> Catalog:
    """The validated knowledge base: the packaged files plus the operator's signature directories
    (``rlhealth.packaged.operator_signature_directories``); one per set of directories."""
    from rlhealth.packaged import operator_signature_directories

    return _load_catalog(tuple(str(d) for d in operator_signature_directories()))


load_catalog.cache_clear = lambda: _load_catalog.cache_clear()   # type: ignore[attr-defined]


@lru_cache(maxsize=4)
def _load_catalog(signature_dirs: tuple[str, ...]) -> Catalog:
    if not signature_dirs:
        stored = packaged_catalog_data()
        if stored is not None:
            return catalog_from_data(stored["catalog"])
    return validate_catalog()


def catalog_data(catalog: Catalog) -> dict[str, Any]:
    """``catalog`` as plain data (dicts, lists, strings, numbers): each model's field values and
    the fields that were set; ``catalog_from_data`` rebuilds the same catalog from it."""
    def model(m: BaseModel) -> dict[str, Any]:
        return {"values": m.model_dump(), "set": sorted(m.model_fields_set)}

    values = catalog.model_dump(exclude={"signatures", "rules"})
    return {"values": values, "set": sorted(catalog.model_fields_set),
            "signatures": {k: model(v) for k, v in catalog.signatures.items()},
            "rules": [model(r) for r in catalog.rules]}


def catalog_from_data(data: dict[str, Any]) -> Catalog:
    """The catalog ``catalog_data`` gave: its models constructed from values that were validated
    when it was stored (no validation again)."""
    def model(cls, d: dict[str, Any]):
        return cls.model_construct(_fields_set=set(d["set"]), **d["values"])

    return Catalog.model_construct(
        _fields_set=set(data["set"]), **data["values"],
        signatures={k: model(Signature, v) for k, v in data["signatures"].items()},
        rules=[model(RuleSpec, r) for r in data["rules"]])


def write_packaged_catalog(rules_dir) -> Path:
    """Validate the packaged files and store the catalog, as plain data under its key
    (``rlhealth.packaged.catalog_key``), in ``rules_dir/compiled/`` (the install's build step:
    ``rules_dir`` is the built ``rlhealth/rules``, the package being imported from the built tree),
    alone there. Raises ``CatalogError`` for invalid files, ``ValueError`` when operator signature
    directories apply. Returns its path."""
    import pickle

    key = catalog_key()
    if key is None:
        raise ValueError("operator signature directories apply: the packaged catalog alone is stored")
    catalog = validate_catalog()
    data = {"format": CATALOG_FORMAT, "key": key, "catalog": catalog_data(catalog), "documents": stored_documents()}
    if catalog_from_data(data["catalog"]) != catalog:
        raise ValueError("the stored catalog does not rebuild the validated one")
    try:
        from rlhealth.templates import rule_texts, stored_code
    except ImportError:         # no Jinja in the build environment: templates compile at run time
        pass
    else:
        data["templates"] = stored_code(rule_texts(catalog.rules))
    out = Path(rules_dir) / CATALOG_CACHE_DIR
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(catalog_cache_name("*")):
        old.unlink()
    path = out / catalog_cache_name(key)
    path.write_bytes(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def validate_catalog() -> Catalog:
    """Read and validate the packaged files and the operator's signature directories
    (``signature_documents``); ``CatalogError`` lists every problem."""
    import yaml

    errors: list[str] = []
    files: list[str] = []
    signatures: dict[str, Signature] = {}
    for name, document in signature_documents():
        rel = f"signatures/{name}"
        files.append(rel)
        try:
            if isinstance(document, Exception):
                raise document
            sig = Signature(**document)
        except (ValidationError, yaml.YAMLError, OSError, UnicodeDecodeError, TypeError, re.error) as exc:
            errors.append(f"{rel}: {exc}")
            continue
        if name != f"{sig.id}.yaml":
            errors.append(f"{rel}: file stem must equal id {sig.id!r}")
        if sig.id in signatures:
            errors.append(f"{rel}: duplicate signature id {sig.id!r}")
        signatures[sig.id] = sig
    for sig in signatures.values():
        for field_name in ("suppresses", "explains"):
            for target in getattr(sig, field_name):
                if target not in signatures:
                    errors.append(f"signatures/{sig.id}.yaml: {field_name} unknown signature {target!r}")

    def load_rules(rel: str) -> list[RuleSpec]:
        files.append(rel)
        try:
            raw = _yaml(_read(rel))
        except (yaml.YAMLError, OSError) as exc:
            errors.append(f"{rel}: {exc}")
            return []
        out = []
        for i, item in enumerate(raw.get("rules", [])):
            try:
                out.append(RuleSpec(**item, source_file=rel))
            except (ValidationError, TypeError) as exc:
                errors.append(f"{rel}: rule #{i}: {exc}")
        return out

    rules: list[RuleSpec] = []
    rules_dir = _pkg().joinpath("rulesets")
    for entry in sorted(rules_dir.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            rules.extend(load_rules(f"rulesets/{entry.name}"))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            errors.append(f"rulesets: duplicate rule id {rule.id!r}")
        seen.add(rule.id)
        if not re.match(r"^[a-z_]+\.[a-z0-9_]+$", rule.id):
            errors.append(f"rulesets: rule id {rule.id!r} must be <group>.<name>")

    files.append("thresholds.yaml")
    thresholds = {k: float(v) for k, v in _yaml(_read("thresholds.yaml")).items() if k != "version"}
    files.append("sets.yaml")
    sets = {k: [str(x) for x in v] for k, v in (_yaml(_read("sets.yaml")) or {}).items() if k != "version"}
    errors += check_rule_references(rules, thresholds, sets)
    levels, level_errors = stratify(rules)
    errors += level_errors
    rules = sorted((r.model_copy(update={"level": levels.get(r.id, 0)}) for r in rules), key=lambda r: (r.level, r.id))
    files += ["tables/gpu_hbm_bandwidth.csv", "tables/decode_throughput_h100_tok_s.csv", "trial_exceptions.yaml"]
    hbm = _csv("tables/gpu_hbm_bandwidth.csv")
    decode = _csv("tables/decode_throughput_h100_tok_s.csv")
    for table, rel in ((hbm, "tables/gpu_hbm_bandwidth.csv"), (decode, "tables/decode_throughput_h100_tok_s.csv")):
        for i, row in enumerate(table, start=2):
            if not str(row.get("source") or "").strip():
                errors.append(f"{rel}:{i}: every row needs a source")
            for key, value in row.items():
                if key.endswith(("_tok_s", "_tb_s", "_b", "_gib")) and not isinstance(value, float):
                    errors.append(f"{rel}:{i}: {key} must be a number, got {value!r}")
    files.append("tables/gpu_names.csv")
    known_gpus = {row["gpu"] for row in hbm}
    for i, row in enumerate(_csv("tables/gpu_names.csv"), start=2):
        try:
            re.compile(str(row.get("pattern") or ""))
        except re.error as exc:
            errors.append(f"tables/gpu_names.csv:{i}: pattern {row.get('pattern')!r}: {exc}")
        if not str(row.get("pattern") or "").strip() or not str(row.get("source") or "").strip():
            errors.append(f"tables/gpu_names.csv:{i}: every row needs a pattern and a source")
        if row.get("gpu") not in known_gpus:
            errors.append(f"tables/gpu_names.csv:{i}: GPU class {row.get('gpu')!r} is not a row of tables/gpu_hbm_bandwidth.csv")
    trial_exceptions = _yaml(_read("trial_exceptions.yaml"))
    if errors:
        raise CatalogError("invalid knowledge base:\n" + "\n".join(errors))
    return Catalog(signatures=signatures, rules=rules, thresholds=thresholds, sets=sets,
                   hbm_bandwidth=hbm, decode_table=decode, trial_exceptions=trial_exceptions, files=files)


@lru_cache(maxsize=1)
def load_focus_topics() -> list[dict[str, Any]]:
    """rules/focus.yaml: dispatcher focus topics -> the gates whose evidence answers them."""
    data = _yaml(_read("focus.yaml")) or {}
    topics = []
    for t in data.get("topics") or []:
        re.compile(t["pattern"])
        topics.append({"pattern": t["pattern"], "name": str(t["name"]), "gates": list(t["gates"])})
    return topics


# ----------------------------------------------------------------------------- rule checks
_OPERATORS = {"gt", "gte", "lt", "lte", "ne", "exists", "all"}
_ARITH = {"add", "sub", "mul", "div"}


def _consumed_keys(cond: dict[str, Any], producers: dict[str, list[str]]) -> list[str]:
    kind = cond.get("kind")
    if kind == "conclusion":
        name = cond.get("name")
        names = name if isinstance(name, list) else [name] if isinstance(name, str) else None
        if names is None:
            return [k for k in producers if k.startswith("conclusion:")]
        return [f"conclusion:{n}" for n in names]
    if kind in ("finding", "gate", "verdict_candidate", "verdict", "confidence"):
        return [kind]
    return []


def stratify(rules: list[RuleSpec]) -> tuple[dict[str, int], list[str]]:
    """Each rule's level: 1 + the highest level of any rule producing what it consumes."""
    producers: dict[str, list[str]] = {}
    for r in rules:
        producers.setdefault(r.produces(), []).append(r.id)
    by_id = {r.id: r for r in rules}
    deps = {r.id: sorted({p for cond in list(r.when.values()) + list(r.unless.values())
                          for key in _consumed_keys(cond, producers) for p in producers.get(key, [])})
            for r in rules}
    levels: dict[str, int] = {}
    errors: list[str] = []

    def level(rid: str, path: tuple[str, ...]) -> int:
        if rid in levels:
            return levels[rid]
        if rid in path:
            errors.append(f"rulesets: dependency cycle: {' -> '.join(path + (rid,))}")
            return 1
        value = 1 + max((level(d, path + (rid,)) for d in deps[rid]), default=0)
        levels[rid] = value
        return value
    for rid in sorted(by_id):
        level(rid, ())
    return levels, sorted(set(errors))


def derived_fields(rules: list[RuleSpec]) -> dict[str, set[str]]:
    """Fields each derived fact key carries: its base fields plus what its producers set."""
    from rlhealth.facts import DERIVED_BASE_FIELDS
    out: dict[str, set[str]] = {}
    for r in rules:
        key = r.produces()
        base = DERIVED_BASE_FIELDS["conclusion" if key.startswith("conclusion:") else key]
        out.setdefault(key, set(base) | {"kind", "id", "rule"}).update(r.set)
    return out


def _fields_of(cond: dict[str, Any], fields: dict[str, set[str]]) -> set[str] | None:
    from rlhealth.facts import MEASUREMENTS
    kind = cond.get("kind")
    if kind in MEASUREMENTS:
        return set(MEASUREMENTS[kind].model_fields) - {"fact_id", "evidence"} | {"id"}
    keys = _consumed_keys(cond, {k: [] for k in fields})
    if not keys or not all(k in fields for k in keys):
        return None
    return set.intersection(*(fields[k] for k in keys))


def check_rule_references(rules: list[RuleSpec], thresholds: dict[str, float], sets: dict[str, list[str]]) -> list[str]:
    """Every condition names a known fact kind and fields that kind has; every $thr / $set / @alias
    reference resolves; templates only read thresholds that exist."""
    errors: list[str] = []
    fields = derived_fields(rules)

    def check_value(rule: RuleSpec, alias: str, value: Any, aliases: dict[str, set[str] | None]) -> None:
        if isinstance(value, dict):
            for op, operands in value.items():
                if op not in _ARITH or not isinstance(operands, list) or len(operands) != 2:
                    errors.append(f"{rule.source_file}: {rule.id}: bad expression {value!r} in {alias}")
                    continue
                for operand in operands:
                    check_value(rule, alias, operand, aliases)
        elif isinstance(value, str) and value.startswith("$thr."):
            if value[5:] not in thresholds:
                errors.append(f"{rule.source_file}: {rule.id}: unknown threshold {value!r}")
        elif isinstance(value, str) and value.startswith("$set."):
            if value[5:] not in sets:
                errors.append(f"{rule.source_file}: {rule.id}: unknown set {value!r}")
        elif isinstance(value, str) and value.startswith("$."):
            own = aliases.get(alias)
            if own is not None and value[2:] not in own:
                errors.append(f"{rule.source_file}: {rule.id}: {alias} has no field {value[2:]!r}")
        elif isinstance(value, str) and value.startswith("@"):
            other, _, name = value[1:].partition(".")
            if other not in aliases:
                errors.append(f"{rule.source_file}: {rule.id}: reference to unknown alias {other!r}")
            elif aliases[other] is not None and name not in aliases[other]:
                errors.append(f"{rule.source_file}: {rule.id}: {other} has no field {name!r}")

    for rule in rules:
        aliases: dict[str, set[str] | None] = {}
        for part in (rule.when, rule.unless):
            for alias, cond in part.items():
                if not isinstance(cond, dict) or "kind" not in cond:
                    errors.append(f"{rule.source_file}: {rule.id}: alias {alias} needs a kind")
                    continue
                known = _fields_of(cond, fields)
                if known is None:
                    errors.append(f"{rule.source_file}: {rule.id}: alias {alias}: no rule or observer produces "
                                  f"{cond.get('kind')} {cond.get('name', '')}".rstrip())
                aliases[alias] = known
                for name, value in cond.items():
                    if known is not None and name not in known:
                        errors.append(f"{rule.source_file}: {rule.id}: condition on {alias}.{name}: "
                                      f"fact kind {cond['kind']} has no field {name!r}")
                    if isinstance(value, dict):
                        terms = [(op, operand) for op, operand in value.items() if op != "all"]
                        for part in value.get("all") or []:
                            terms += list(part.items()) if isinstance(part, dict) else [("?", part)]
                        for op, operand in terms:
                            if op not in _OPERATORS or op == "all":
                                errors.append(f"{rule.source_file}: {rule.id}: unknown operator {op!r} on {alias}.{name}")
                            check_value(rule, alias, operand, aliases)
                    else:
                        check_value(rule, alias, value, aliases)
        for name in rule.thresholds_used():
            if name not in thresholds:
                errors.append(f"{rule.source_file}: {rule.id}: unknown threshold thr.{name}")
    return errors
