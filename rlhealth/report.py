"""The report: the ``rlhealth.report/v1`` document (contract §4.2) as a pydantic model.

Fields may be added within v1; renaming or removing one is a new schema version. The JSON
Schema shipped in ``rlhealth/schema/report.schema.json`` is generated from these models
(``rlhealth.schemas``; ``python -m rlhealth.schemas --write`` rewrites it, a test checks that the
shipped file is the generated one), and every incident's report is validated against it.
"""

import json
from datetime import datetime, timezone
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlhealth.facts import Evidence

SCHEMA_ID = "rlhealth.report/v1"
DOCUMENTED = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)
"""Every report model: no unknown keys; a field with a default is always printed, so the schema
requires it. The attribute docstrings are the schema's descriptions: ``rlhealth.schemas`` reads them
when it generates the schema (not at import: reading the source costs every command)."""

NextActionKind = Literal["kill", "leave", "probe", "fix_and_relaunch", "investigate"]
GATE_NAMES = ("liveness", "resources", "rollouts", "dynamics")


class NextActionMachine(BaseModel):
    """Machine form of next_action; command is the exact rlhealth probe argv for kind probe, else null."""
    model_config = ConfigDict(DOCUMENTED, defer_build=True)   # its schema only: built on first use
    kind: NextActionKind
    command: list[str] | None = Field(json_schema_extra={"minItems": 1})
    deciding_rule: str | None = None


class _ModelJsonSchema:
    """A field's JSON Schema: ``model``'s (serialization mode), or null; computed when a schema is
    generated, not at import."""

    def __init__(self, model: type[BaseModel]):
        self.model = model

    def __get_pydantic_json_schema__(self, _core_schema: Any, _handler: Any) -> dict[str, Any]:
        return {"anyOf": [self.model.model_json_schema(mode="serialization"), {"type": "null"}]}

    def __hash__(self) -> int:
        return hash(self.model)


class ErrorInfo(BaseModel):
    """Only when the command could not run: a usage error (exit 2), an internal failure (exit 1), or an interrupt (exit 130 SIGINT, 143 SIGTERM)."""
    model_config = ConfigDict(DOCUMENTED, defer_build=True)
    kind: Literal["usage", "internal", "interrupted"]
    message: str
    exit_code: int


class GateReport(BaseModel):
    model_config = DOCUMENTED
    status: Literal["PASS", "FAIL", "ERROR"]
    finding: str
    evidence: list[Evidence] = Field(default_factory=list)
    findings: list[dict[str, Any]] = Field(default_factory=list)
    """Every finding the rules drew for this gate (rule, status, finding), most load-bearing first."""


class JobIdentity(BaseModel):
    """What job was judged, as observed, each value with where it was read (a ``file:line`` of the
    evidence, a configuration source, or ``given``); ``conflicts``: the rule statements of given
    dispatcher inputs that contradict the evidence."""
    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    model_source: str | None = None
    model_class: Literal["dense", "MoE"] | None = None
    total_params_b: float | None = None
    active_params_b: float | None = None
    params_source: str | None = None
    gpu: str | None = None
    gpu_source: str | None = None
    engines: int | None = None
    engines_source: str | None = None
    tp: int | None = None
    ep: int | None = None
    geometry: str | None = None
    """``<engines> engines x TP<n>/EP<n>``."""
    geometry_source: str | None = None
    stage: Literal["bring-up", "inference", "training"] | None = None
    stage_source: str | None = None
    conflicts: list[str] = Field(default_factory=list)


class AttemptReport(BaseModel):
    model_config = DOCUMENTED
    attempt: int
    state: str
    first_error: str | None = None
    interpretation: str | None = None


class RestartsReport(BaseModel):
    model_config = DOCUMENTED
    burned: int = Field(0, ge=0)
    max_retries: int | None = None
    remaining: int | None = None
    """Retries left after the burned ones (max_retries - burned), when the budget is known."""
    preemptions: int = Field(0, ge=0)
    """Preemptions and requeues (Slurm ``Restarts=``) the controller counts; they burn no retry."""
    same_failure: bool = False
    attempts: list[AttemptReport] = Field(default_factory=list)
    finding: str = ""
    evidence: list[Evidence] = Field(default_factory=list)


class JobRef(BaseModel):
    model_config = DOCUMENTED
    id: str
    cluster: str
    backend: str


class Report(BaseModel):
    model_config = DOCUMENTED
    schema_: Literal["rlhealth.report/v1"] = Field(SCHEMA_ID, alias="schema")
    job: JobRef
    evidence_dir: str
    captured_at: str | None
    evaluated_at: str
    verdict: Literal["KILL", "NO-KILL", "ERROR"]
    confidence: Literal["high", "medium", "low"]
    mode: str
    mode_source: str = ""
    """Where the mode was read: the launch configuration's location, --mode, or the launch log."""
    terminal: bool
    restarts: RestartsReport
    gates: Annotated[dict[str, GateReport], Field(json_schema_extra={"required": list(GATE_NAMES),
                                                                      "propertyNames": {"enum": list(GATE_NAMES)}})]
    """The four gates, each PASS / FAIL / ERROR with its finding and quoted evidence."""
    duty_cycle: dict[str, Any] | None = None
    reasoning: str
    next_action: str
    flip_signal: str
    handoff: dict[str, Any] | None = None
    fired_rules: list[dict[str, Any]] = Field(default_factory=list)
    problems: list[dict[str, str]] = Field(default_factory=list)
    metric_window: dict[str, Any] | None = None
    phase_table: list[dict[str, Any]] = Field(default_factory=list)
    first_error: Evidence | None = None
    behavioral_break: dict[str, Any] | None = None
    """Where a behavioral break (broken replay, ...) began: {kind, step, evidence}; the audit
    selects the last checkpoint before it."""
    derivation: list[dict[str, Any]] = Field(default_factory=list)
    """Every derived fact back to the measurements and quoted lines (verdict, gate, conclusion,
    measurement and missing nodes; ``from`` lists the ids a node was derived from)."""
    why: list[str] = Field(default_factory=list)
    """The chain that decided the verdict, as the Markdown WHY block prints it."""
    identity: JobIdentity | None = None
    """What job was judged: model, class, parameters, GPU type, engine geometry, stage, each with its source."""
    given: dict[str, Any] | None = None
    """Dispatcher inputs (--gpu, --model, --focus): evidence given to rlhealth, not observed."""
    next_action_machine: Annotated[dict[str, Any] | None, _ModelJsonSchema(NextActionMachine)] = None
    """``{"kind": kill|leave|probe|fix_and_relaunch|investigate, "command": argv | null, "deciding_rule"}``."""
    plots: dict[str, Any] | None = Field(default=None, exclude=True)
    """Series for the HTML report's plots (``rlhealth.plots_data``); never part of the JSON."""

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), indent=2, sort_keys=True, ensure_ascii=False)


def _error_is_optional(schema: dict[str, Any]) -> None:
    schema["required"] = [name for name in schema["required"] if name != "error"]


class ReportDocument(Report):
    """What ``--format json`` prints: the report, and ``error`` when the command could not run."""
    model_config = ConfigDict(DOCUMENTED, json_schema_extra=_error_is_optional, defer_build=True)
    error: ErrorInfo | None = None
    """Only when the command could not run: a usage error (exit 2), an internal failure (exit 1), or an interrupt (exit 130 SIGINT, 143 SIGTERM)."""


def load_schema() -> dict[str, Any]:
    return json.loads(resources.files("rlhealth").joinpath("schema", "report.schema.json").read_text())


def internal_failure_report(evidence_dir: str, reason: str, now: datetime | None = None) -> dict[str, Any]:
    """A valid v1 document for an internal failure: verdict ERROR with the reason."""
    now = now or datetime.now(timezone.utc)
    gate = GateReport(status="ERROR", finding=f"not evaluated: internal failure: {reason}")
    report = Report(job=JobRef(id="unknown", cluster="unknown", backend="unknown"), evidence_dir=evidence_dir,
                    captured_at=None, evaluated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), verdict="ERROR",
                    confidence="low", mode="unknown", terminal=False, restarts=RestartsReport(finding="not evaluated"),
                    gates={g: gate for g in ("liveness", "resources", "rollouts", "dynamics")},
                    reasoning=f"rlhealth failed internally: {reason}",
                    next_action="Report this failure to the rlhealth maintainers with the bundle; diagnose manually meanwhile.",
                    flip_signal="A successful rlhealth run on this bundle.")
    return report.to_json_dict()
