"""The knowledge base as data: loaded and validated through the installed package.

Everything here comes from ``rlhealth.rules`` via ``importlib.resources`` (never a
path relative to the source tree). ``load_catalog`` validates every file and
collects all problems, each with its file, before failing.
"""
from __future__ import annotations

import csv
import io
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

ID_RE = re.compile(r"^[a-z][a-z0-9_]{3,79}$")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml(text: str):
    return yaml.load(text, Loader=_LOADER)


class CatalogError(Exception):
    """One or more packaged knowledge files are invalid (all problems listed)."""


class Signature(BaseModel):
    """A log signature: a hyperscan-compatible regex plus what it means."""
    model_config = ConfigDict(frozen=True, extra="forbid")
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


class RuleSpec(BaseModel):
    """One rule of the rule base: a durable-rules condition and the finding it concludes."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    gate: Literal["liveness", "resources", "rollouts", "dynamics", "restarts", "verdict"]
    status: Literal["PASS", "FAIL", "ERROR"]
    when: dict[str, Any]
    finding: str
    order: int = 100
    stall: bool = False
    refutes_stall: bool = False
    next_action: str | None = None
    flip_signal: str | None = None
    handoff: dict[str, str] | None = None
    description: str = ""


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    signatures: dict[str, Signature]
    rules: list[RuleSpec]
    verdict_rules: list[RuleSpec]
    thresholds: dict[str, float]
    hbm_bandwidth: list[dict[str, Any]]
    decode_table: list[dict[str, Any]]
    trial_exceptions: dict[str, Any]
    files: list[str]


def _pkg():
    return resources.files("rlhealth.rules")


def _read(rel: str) -> str:
    node = _pkg()
    for part in rel.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def _csv(rel: str) -> list[dict[str, Any]]:
    rows = []
    for row in csv.DictReader(io.StringIO(_read(rel))):
        parsed = {}
        for key, value in row.items():
            try:
                parsed[key] = float(value) if key != "source" and key not in ("gpu", "model_class") else value
            except (TypeError, ValueError):
                parsed[key] = value
        rows.append(parsed)
    return rows


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    errors: list[str] = []
    files: list[str] = []
    signatures: dict[str, Signature] = {}
    sig_dir = _pkg().joinpath("signatures")
    for entry in sorted(sig_dir.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        rel = f"signatures/{entry.name}"
        files.append(rel)
        try:
            sig = Signature(**_yaml(entry.read_text(encoding="utf-8")))
        except (ValidationError, yaml.YAMLError, TypeError, re.error) as exc:
            errors.append(f"{rel}: {exc}")
            continue
        if entry.name != f"{sig.id}.yaml":
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
                out.append(RuleSpec(**item))
            except (ValidationError, TypeError) as exc:
                errors.append(f"{rel}: rule #{i}: {exc}")
        return out

    rules: list[RuleSpec] = []
    rules_dir = _pkg().joinpath("rulesets")
    for entry in sorted(rules_dir.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml") and entry.name != "verdict.yaml":
            rules.extend(load_rules(f"rulesets/{entry.name}"))
    verdict_rules = load_rules("rulesets/verdict.yaml")
    seen: set[str] = set()
    for rule in rules + verdict_rules:
        if rule.id in seen:
            errors.append(f"rulesets: duplicate rule id {rule.id!r}")
        seen.add(rule.id)
        if not re.match(r"^[a-z_]+\.[a-z0-9_]+$", rule.id):
            errors.append(f"rulesets: rule id {rule.id!r} must be <gate>.<name>")

    files.append("thresholds.yaml")
    thresholds = {k: float(v) for k, v in _yaml(_read("thresholds.yaml")).items() if k != "version"}
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
    trial_exceptions = _yaml(_read("trial_exceptions.yaml"))
    if errors:
        raise CatalogError("invalid knowledge base:\n" + "\n".join(errors))
    return Catalog(signatures=signatures, rules=rules, verdict_rules=verdict_rules, thresholds=thresholds,
                   hbm_bandwidth=hbm, decode_table=decode, trial_exceptions=trial_exceptions, files=files)


@lru_cache(maxsize=1)
def load_capture_probe_policy() -> dict[str, Any]:
    """rules/capture_probes.yaml: which failed live probes make which gate ERROR."""
    data = _yaml(_read("capture_probes.yaml"))
    return {"required": list(data.get("required") or []), "informational": set(data.get("informational") or [])}
