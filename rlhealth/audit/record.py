"""The audit's completion record (``rlhealth.audit/v1``) as pydantic models, one per section.

``rlhealth.audit.core`` builds each section as its model and ``build_record`` assembles them into
an ``AuditRecord``; ``AuditDocument`` is every document ``rlhealth audit --format json`` prints
(the record, or an internal-failure, usage-error or interrupted document). The JSON Schema shipped
in ``rlhealth/schema/audit.schema.json`` is generated from ``AuditDocument`` (``rlhealth.schemas``;
``python -m rlhealth.schemas --write`` rewrites it, a test checks the shipped file is the generated
one). Fields may be added within v1; renaming or removing one is a new schema version.

A record is printed as ``record(AuditRecord).model_dump(by_alias=True, exclude_unset=True)``: a key
is printed when its section builder set it (``None`` included), so a model's optional field is a
key that only some records carry. Objects whose keys come partly from other modules (attempts, the
published download, the trace rebuild) allow further keys (``extra="allow"``); the record's own
objects forbid unknown keys. Values read from the user's files (a manifest's ``job_id``, a capture's
``failure_count``) are any JSON value: a record is printed for bad input, never a crash.
"""
from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

SCHEMA = "rlhealth.audit/v1"

_CLOSED = ConfigDict(extra="forbid", use_attribute_docstrings=True)
"""An object the record builds itself: no unknown keys; attribute docstrings are the schema's descriptions."""
_OPEN = ConfigDict(extra="allow", use_attribute_docstrings=True)
"""An object that may carry further keys (its producer lives outside the record builder)."""

Number = Union[int, float]
"""A JSON number as produced: an int stays an int, a float a float."""
ArtifactState = Literal["present", "absent", "could not check", "not applicable"]
CheckStatus = Literal["pass", "fail", "warn"]


def dump(model: BaseModel) -> dict[str, Any]:
    """The JSON-able dict of a section or record: its keys as set, by their JSON names."""
    return model.model_dump(by_alias=True, exclude_unset=True)


# ------------------------------------------------------------------------------------------ run
class RunSection(BaseModel):
    """The directories the audit read, as given, and the job id from the bundle manifest."""
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)
    path: str
    bundle: Optional[str]
    export_dir: Optional[str]
    published_dir: Optional[str]
    job_id: Any
    """The bundle manifest's ``job_id`` (a string; null without a bundle manifest)."""


class ModeSection(BaseModel):
    """How the run was classified (standard, agentic, unknown) and from which evidence."""
    model_config = _OPEN
    value: Literal["standard", "agentic", "unknown"]
    source: Optional[str]
    evidence: list[str]
    reason: Optional[str] = None
    classifier: Optional[Literal["rlhealth.mode.classify_mode"]] = None


class TerminalState(BaseModel):
    """Whether the run ended, how, and the step budget the outcome is judged against."""
    model_config = _OPEN
    terminal: Optional[bool]
    outcome: str
    controller_state: Optional[str]
    controller_source: Optional[str]
    last_step: Optional[int]
    budget: Optional[int]
    budget_source: Optional[str]
    budget_complete: bool
    failure_count: Any = None
    """The capture state's ``failure_count`` as the controller gave it."""
    max_retries: Any = None
    """The capture state's ``max_retries`` as the controller gave it."""


class RevisionSource(BaseModel):
    model_config = _OPEN
    source: str
    kind: str
    value: str
    attempt: Any = None


class SourceRevision(BaseModel):
    """The source revision the attempts ran, and whether they agree."""
    model_config = _OPEN
    value: Optional[str]
    consistent: bool
    sources: list[RevisionSource]


class ResolvedConfiguration(BaseModel):
    """The launch configuration the audit resolved (credential-shaped values redacted)."""
    model_config = _OPEN
    source: Optional[str]
    entrypoint: Optional[str]
    settings: dict[str, Any]


# ------------------------------------------------------------------------------------------ evidence chain
class LogQuote(BaseModel):
    """A quoted log line: where it is and its text."""
    model_config = _OPEN
    source: Optional[str]
    line: Optional[int]
    text: str
    signature: Optional[str] = None
    family: Optional[str] = None
    severity: Optional[str] = None
    transient: Optional[bool] = None


class Attempt(BaseModel):
    """One training attempt found in the logs."""
    model_config = _OPEN
    attempt: int = Field(ge=0)
    source: str
    start_line: int = Field(ge=1)
    end_line: int
    max_step: Optional[int]
    resumed_from: Optional[int] = None
    first_error: Optional[LogQuote]
    after_budget_complete: bool


class FirstFailureCause(LogQuote):
    """The first causal error of the first attempt that failed before the budget was complete (or the controller's)."""
    attempt: Any = None


class InventoryItem(BaseModel):
    """One piece of the evidence chain the runbook requires, and whether it is here."""
    model_config = _CLOSED
    artifact: str
    status: Literal["present", "absent", "not applicable"]
    detail: str
    required: bool


class MetricWindow(BaseModel):
    """The training-metric steps found in the logs, and their gaps."""
    model_config = _OPEN
    first_step: int
    last_step: int
    steps: int
    missing_steps: list[int]
    missing_count: int
    malformed_lines: int
    repeated_steps: Optional[int] = None
    reward_key: Optional[str] = None
    serializations: Optional[dict[str, int]] = None


class MetricDataFinding(BaseModel):
    model_config = _CLOSED
    kind: Literal["malformed_metric_line", "reward_not_numeric", "reward_missing"]
    source: str
    line: int = Field(ge=1)
    value: str
    detail: str
    severity: Literal["blocking", "warning"]


class MetricData(BaseModel):
    """Training-metric data the audit refuses, each case named by file, line and value (malformed
    metric lines, non-numeric or missing rewards); at most rules/audit.yaml
    bad_data.listed_per_kind cases per kind are listed, all are counted."""
    model_config = _CLOSED
    findings: list[MetricDataFinding]
    counts: dict[str, int]


# ------------------------------------------------------------------------------------------ checkpoints and exports
class Check(BaseModel):
    """One validation of a checkpoint, export or published download."""
    model_config = _CLOSED
    check: str
    status: CheckStatus
    detail: str


class ModelSize(BaseModel):
    """The parameter count of a weights directory (from the safetensors headers) and its label."""
    model_config = _OPEN
    parameters: int = Field(ge=0)
    label: str
    billions_rounded: int
    source: str
    estimate: Optional[int]
    estimate_disagreement: Optional[Number]
    index_total_parameters: Optional[int]


class Candidate(BaseModel):
    """A saved checkpoint or export, validated."""
    model_config = _CLOSED
    id: str
    kind: Literal["checkpoint", "export"]
    path: str
    step: Optional[int]
    valid: bool
    checks: list[Check]
    model_size: Optional[ModelSize]
    format: Optional[str] = None
    """checkpoint format (FSDP sharded, Megatron distributed, Hugging Face safetensors, unknown)"""
    optimizer_state: Optional[ArtifactState] = None
    trainer_state: Optional[ArtifactState] = None


class Checkpoints(BaseModel):
    """The checkpoint directory, its atomic latest marker and the steps saved."""
    model_config = _OPEN
    root: Optional[str]
    latest_marker: Optional[int]
    saved_steps: list[int]
    last_saved_step: Optional[int]
    logged_saves: Optional[list[int]] = None
    """Steps with a 'Successfully saved checkpoint' line in the logs."""


# ------------------------------------------------------------------------------------------ selection
class SelectedArtifact(BaseModel):
    """A chosen artifact and the metric and log coverage of its step."""
    model_config = _OPEN
    id: str
    kind: Literal["checkpoint", "export"]
    path: str
    step: Optional[int]
    model_size: Optional[str] = None
    """The label of its model size."""
    metric_window: Optional[str] = None
    chain_coverage: Optional[str] = None
    steps_with_metrics: Optional[int] = None
    missing_steps: Optional[list[int]] = None


class SelectionRow(BaseModel):
    """One step the declared policy weighed."""
    model_config = _OPEN
    step: int
    reward: Optional[Number]
    ema: Optional[Number]
    eligible: bool
    reason: str


class Selection(BaseModel):
    """The declared selection policy applied to the valid candidates (or left to the operator)."""
    model_config = _OPEN
    policy: Optional[str]
    status: Literal["selected", "unresolved", "no-eligible-step"]
    selected: Optional[SelectedArtifact]
    rationale: str
    valid_candidates: list[str]
    table: list[SelectionRow]
    metric_window: str
    chain_coverage: str


# ------------------------------------------------------------------------------------------ publication and traces
class SecretFinding(BaseModel):
    """One credential shape found, never the secret: `line` is the 1-based line of a text file or tar
    member, or the 1-based row of a parquet shard; `location` names the tar member or the row's
    field (e.g. conversations[0].content)."""
    model_config = _CLOSED
    file: str
    line: int = Field(ge=1)
    shape: str
    redacted: str
    location: Optional[str] = None


class SkippedFile(BaseModel):
    model_config = _OPEN
    file: str
    reason: str


class SecretScan(BaseModel):
    """A scan of a tree for credential-shaped text."""
    model_config = _OPEN
    status: Literal["clean", "findings", "incomplete"]
    files_scanned: int
    findings: list[SecretFinding]
    skipped: list[SkippedFile]


class TraceExport(BaseModel):
    """The trace dataset's export manifest and the result coverage it states (or the rebuild recomputed)."""
    model_config = _OPEN
    status: Literal["present", "absent", "not applicable"]
    path: Optional[str]
    result_coverage: Optional[Number]
    passed: Optional[bool]
    detail: str


class PublishedArtifact(BaseModel):
    model_config = _OPEN
    artifact: Literal["weights", "tokenizer_configuration", "training_logs", "training_traces_link"]
    status: Literal["present", "absent", "not applicable"]
    detail: Optional[str] = None


class Publication(BaseModel):
    """The downloaded published model (--published-dir), verified."""
    model_config = _OPEN
    path: str
    artifacts: list[PublishedArtifact]
    weight_checks: list[Check]
    model_size: Optional[ModelSize]
    secret_scan: SecretScan
    trace_export: TraceExport
    complete: bool
    message: str


class TraceRebuildCheck(BaseModel):
    model_config = _CLOSED
    check: str
    status: Literal["pass", "fail", "absent", "could not check"]
    path: Optional[str] = None
    detail: str


class TraceRebuild(BaseModel):
    """The durable trace rebuild under --trace-root, checked."""
    model_config = _OPEN
    root: str
    checks: list[TraceRebuildCheck]
    result_coverage: Optional[Number]
    coverage_gate: Number
    export_manifest: Optional[str] = None
    complete: bool
    secret_scan: SecretScan = Field(description="The secret scan of every file under --trace-root: text files, "
                                                "the trace tar's members and the staged parquet rows.")


class MonitorMirror(BaseModel):
    """The monitor's trace_jobs/ mirror in the bundle: a sample or evidence only, never the source of record."""
    model_config = _OPEN
    path: str
    status: Literal["sample", "full mirror (evidence only)"]
    trials: Optional[int] = None
    results: Optional[int] = None
    trace_sync_limit: Any = None
    """As the sync selection or the manifest gives it."""
    objects_skipped: Optional[int] = None
    cap: Optional[int] = None
    detail: str


# ------------------------------------------------------------------------------------------ hand-off
class PreservedLocation(BaseModel):
    """A place the evidence lives that must be kept."""
    model_config = _OPEN
    what: str
    path: str


class ResumeSafety(BaseModel):
    """Whether the run can resume from its newest complete checkpoint."""
    model_config = _OPEN
    status: Literal["safe", "unsafe", "not needed", "unknown"]
    detail: str
    newest_complete_checkpoint: Optional[str] = None
    optimizer_state: Optional[ArtifactState] = None
    trainer_state: Optional[ArtifactState] = None
    step_consistent: Optional[bool] = None
    resume_checkpoint: Optional[str] = None


class Problem(BaseModel):
    model_config = _CLOSED
    severity: Literal["blocking", "warning"]
    code: str
    message: str


class LastCleanCheckpoint(BaseModel):
    """The last valid checkpoint whose generating rollouts predate the break."""
    model_config = _OPEN
    status: Literal["present", "absent"]
    selected: Optional[SelectedArtifact]
    rationale: str


class BehavioralBreak(BaseModel):
    """a behavioral break placed by --break-step/--break-time or the diagnosis report, and the last
    valid checkpoint whose generating rollouts predate it"""
    model_config = _OPEN
    status: Literal["none placed", "placed"]
    source: Optional[str]
    step: Optional[int]
    time: Optional[str]
    kind: Optional[str] = None
    evidence: Optional[str] = None
    last_clean_checkpoint: Optional[LastCleanCheckpoint]


class ExportProvenance(BaseModel):
    """Where the selected (else the newest valid) export came from."""
    model_config = _OPEN
    export: str
    path: Optional[str] = None
    step: Optional[int]
    source_checkpoint: Optional[str]
    source_checkpoint_path: Optional[str] = None
    source_format: Optional[str]
    converted_by: str
    verified_by: str
    valid: bool
    within_latest_marker: Optional[bool] = None


class CampaignSection(BaseModel):
    """The campaign record (--campaign): destinations and authorities."""
    model_config = _OPEN
    source: Optional[str]
    model_repo: Optional[str] = None
    trace_dataset: Optional[str] = None
    base_model: Optional[str] = None
    registration_authorized: Optional[bool] = None
    reclaim_authorized: Optional[bool] = None


class PreservationStep(BaseModel):
    model_config = _CLOSED
    step: Literal["capture_chain", "select_checkpoint", "export_model", "publish_model", "publish_traces",
                  "register", "reclaim_storage"]
    status: Literal["completed", "not applicable", "pending", "failed", "could not proceed"]
    detail: str


class CompletionField(BaseModel):
    model_config = _CLOSED
    field: str
    status: ArtifactState
    value: Any
    evidence: str


# ------------------------------------------------------------------------------------------ the record
class AuditError(BaseModel):
    """Why a usage-error or interrupted document has no record."""
    model_config = _OPEN
    kind: Literal["usage", "interrupted"]
    message: str
    exit_code: Literal[2, 130, 143]


class AuditHead(BaseModel):
    """What every audit document carries."""
    model_config = _OPEN
    schema_: Literal["rlhealth.audit/v1"] = Field(alias="schema")
    evaluated_at: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}T")
    run: RunSection


class AuditRecord(AuditHead):
    """The completion record of a completed audit (``build_record``; the command adds ``exit_code``)."""
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, populate_by_name=True)
    status: Literal["complete", "blocked"]
    mode: ModeSection
    terminal_state: TerminalState
    source_revision: SourceRevision
    resolved_configuration: ResolvedConfiguration
    attempts: list[Attempt]
    first_failure_cause: Optional[FirstFailureCause]
    inventory: list[InventoryItem]
    metrics: Optional[MetricWindow]
    metric_data: MetricData = Field(description=MetricData.__doc__.replace("\n    ", " "))
    checkpoints: Checkpoints
    candidates: list[Candidate]
    selection: Selection
    publication: Optional[Publication]
    trace_export: TraceExport
    preserved_locations: list[PreservedLocation]
    resume_safety: ResumeSafety
    problems: list[Problem]
    remaining_work: list[str]
    behavioral_break: BehavioralBreak = Field(description=BehavioralBreak.__doc__.replace("\n    ", " "))
    export_provenance: Optional[ExportProvenance]
    trace_rebuild: Optional[TraceRebuild]
    monitor_mirror: Optional[MonitorMirror]
    campaign: CampaignSection
    preservation_steps: list[PreservationStep]
    completion_record: list[CompletionField] = Field(
        description="every field of the runbook's completion record (rules/audit.yaml completion_fields), each with its status and evidence")


HEAD = frozenset(AuditHead.model_fields) | {"status"}
RECORD_KEYS = [f.alias or name for name, f in AuditRecord.model_fields.items()]
"""The keys of a complete or blocked record (the command adds ``exit_code``)."""


def _record_or_error(schema: dict[str, Any]) -> None:
    """A complete or blocked record carries every section; any other status carries ``error``."""
    schema["if"] = {"properties": {"status": {"enum": ["complete", "blocked"]}}}
    schema["then"] = {"required": [*RECORD_KEYS, "exit_code"]}
    schema["else"] = {"required": ["error"]}


class _Document(AuditHead):
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, json_schema_extra=_record_or_error)


AuditDocument = create_model(
    "AuditDocument",
    __base__=_Document,
    __doc__="Printed by `rlhealth audit --format json`: the completion record, or (status internal-failure, "
            "usage-error, interrupted) the run and the error. Fields may be added; renaming or removing one is a "
            "new schema version.",
    status=(Literal["complete", "blocked", "internal-failure", "usage-error", "interrupted"], ...),
    exit_code=(Literal[0, 1, 2, 20, 130, 143], ...),
    error=(Union[str, AuditError], Field(
        default=None, description="internal-failure: the reason (a string); usage-error and interrupted: an object "
                                  "{kind, message, exit_code} (interrupted: 130 SIGINT, 143 SIGTERM).")),
    **{name: (field.annotation, Field(default=None, description=field.description))
       for name, field in AuditRecord.model_fields.items() if name not in HEAD},
)
"""Every document ``rlhealth audit --format json`` prints; the shipped schema is generated from it."""
