"""Typed facts: what the observers measured, and what the rule base derived from it.

Measurement facts (one pydantic model per kind, ``MEASUREMENTS``) state what was measured in the
evidence: ages in seconds, counts, rates, medians, shares, configuration values with where they
came from, each fact with the quoted file:line evidence behind it. They carry no judgement: no
threshold is applied here.

Derived facts (``Conclusion``, ``Finding``, ``GateStatus``, ``VerdictCandidate``) are asserted by
rules of the rule base (``rules/rulesets/*.yaml``) and consumed by later rules; each keeps the ids
of the facts it was derived from, so every conclusion has a derivation down to quoted lines.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

GateName = Literal["liveness", "resources", "rollouts", "dynamics"]
GATES: tuple[GateName, ...] = ("liveness", "resources", "rollouts", "dynamics")
REPORTED_APART = ("restarts",)
Status = Literal["PASS", "FAIL", "ERROR"]
Scalar = str | bool | int | float | None


class Evidence(BaseModel):
    """One quoted line: ``source`` is relative to the bundle, ``line`` is 1-based.

    ``summary`` is True when ``text`` restates what several lines or a record say (a metric record,
    a trial tally) instead of quoting one line; a summary carries no line number."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str
    line: int | None = Field(None, json_schema_extra={"minimum": 1})
    text: str = Field(json_schema_extra={"maxLength": 500})
    summary: bool = False


class Occurrence(BaseModel):
    """One occurrence of a signature in a log file."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str
    line: int
    text: str
    ts: float | None = None
    """Epoch seconds (UTC) read from the line, when it carries a timestamp."""
    attempt: int | None = None
    """Attempt index the line belongs to (finelog attempt boundaries / Slurm chain leg)."""
    at: int | None = None
    """Where the match that made this line an occurrence lies in ``text`` (the middle of the
    matched span; set for a line longer than a quote: the quote is taken around it)."""

    def evidence(self) -> Evidence:
        return Evidence(source=self.source, line=self.line, text=self.text)


class ProblemNote(BaseModel):
    """Evidence that should exist but could not be read or parsed (from the bundle reader)."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str
    reason: str
    gate: GateName | Literal["all", "none"] = "all"
    """The gate this problem makes ERROR; "all" = every gate; "none" = listed only."""
    artifact: str | None = None
    """What kind of evidence is missing when a rule needs to know (``engine_logs``)."""


class Fact(BaseModel):
    """Base of every fact handed to the rule engine."""
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    kind: str
    fact_id: str
    evidence: tuple[Evidence, ...] = ()

    def summary(self) -> str:
        """``kind [subject]: field=value, ...`` over the fields that carry a value (at most 12)."""
        data = self.model_dump(mode="json", exclude={"evidence", "fact_id", "kind"})
        shown = [f"{k}={v}" for k, v in data.items() if v not in (None, "", False, 0, 0.0) and not isinstance(v, (dict, list))]
        return f"{self.kind} {self.fact_id.partition(':')[2]}".strip() + ": " + (", ".join(shown[:12]) or "nothing measured")

    def engine_payload(self) -> dict[str, Any]:
        """The fact as the rule engine sees it: scalar fields, None left out, evidence left out."""
        data = self.model_dump(mode="json", exclude={"evidence"})
        data["id"] = data.pop("fact_id")
        return {k: v for k, v in data.items() if isinstance(v, (str, bool, int, float))}


# ----------------------------------------------------------------------------- measurements
class JobMeasured(Fact):
    """Identity, controller state, freshness inputs, mode and launch configuration of the job."""
    kind: Literal["job"] = "job"
    job_id: str
    cluster: str
    backend: str
    layout: str
    state: str | None = None
    state_source: str
    evidence_age_s: float | None = None
    """Evaluation time minus the newest evidence time (sync, capture or newest timestamped line)."""
    evidence_time: str | None = None
    max_age_s: float
    """The freshness limit given on the command line (--max-age)."""
    capture_age_s: float | None = None
    """Evaluation time minus the time of the capture used (None without a capture)."""
    has_manifest: bool
    has_capture: bool
    pods_listed: int | None = None
    gpu_poll_rows: int = 0
    stack_samples: int = 0
    log_files: int = 0
    mode: str | None = None
    mode_source: str
    model_name: str | None = None
    model_source: str | None = None
    active_params_b: float | None = None
    gpu: str | None = None
    """The GPU class of the first source in rules/sets.yaml gpu_source_precedence that names one."""
    gpu_source: str | None = None
    gpu_classes: str | None = None
    """Comma-separated GPU classes the device sources name, when they disagree (else None)."""
    gpu_disagreement: str | None = None
    n_concurrent_trials: int | None = None
    max_num_seqs: int | None = None
    num_inference_engines: int | None = None
    enforce_eager: bool | None = None
    enforce_eager_source: str | None = None
    current_attempt: int = 0
    evaluation_time: str | None = None
    """The evaluation time (--now, else the clock)."""
    evidence_ahead_s: float | None = None
    """How far the newest evidence time lies after the evaluation time (None when it does not)."""


class TrainerMeasured(Fact):
    """Trainer progress: completed steps, step cadence and the age of the newest progress line."""
    kind: Literal["trainer"] = "trainer"
    trainer_lines: int
    """Trainer progress/activity lines seen (phase timers, step lines, metric lines)."""
    metric_records: int
    malformed_records: int
    steps_completed: int
    last_step: int | None = None
    total_steps: int | None = None
    last_progress: str | None = None
    progress_age_s: float | None = None
    """Seconds from the newest timestamped trainer progress line to the newest evidence time."""
    median_step_s: float | None = None
    open_phase: str | None = None
    genbuf_unchanged_s: float | None = None
    serialization: str | None = None
    log_files: int = 0
    launch_lines: int = 0
    """Launch/bring-up lines seen (source revision, generator initialized): the run has started."""


class SignatureMeasured(Fact):
    """Occurrences of one log signature from the catalog."""
    kind: Literal["signature"] = "signature"
    sig: str
    family: str
    severity: str
    gate: str
    title: str
    count: int
    files: int
    in_current_attempt: bool
    """An occurrence belongs to the current attempt (or the log has no attempt boundaries)."""
    progress_after: bool
    """A trainer progress line follows the current attempt's last occurrence (by time, else by line
    in one file); False also when nothing orders them (see ``placed``)."""
    placed: bool = True
    """False for an undated occurrence that neither time nor file order places against trainer
    progress (it is never placed before or after progress); a dated one is always placed."""
    first_error: bool = False
    """Its occurrence is the first causal error of the current attempt (earliest primary error)."""
    transient: bool
    remediation: str
    generic: bool = False
    """It only restates a shape (a traceback, an unclassified fatal line: ``generic_signatures`` of
    rules/event_shapes.yaml): the error it matches is not named by it."""


class EventMeasured(Fact):
    """A failure-shaped log event (``rlhealth.probes.events``): the current attempt's first causal
    error when it is an event, or a background-thread exception of the current attempt."""
    kind: Literal["event"] = "event"
    shape: str
    """exception | cpp_abort | fatal_signal | exit_status | kernel | nccl_warn | slurm | fatal_log |
    comm_error | runtime_error | logged_error | kernel_record | k8s_event | ray_exit
    (rules/event_shapes.yaml)"""
    exc_type: str | None = None
    message: str | None = None
    template: str
    role: str
    """policy | engine | trainer | ray_system | sandbox | scheduler | unknown (from the line's prefix or file)"""
    thread: str
    """main | background"""
    grade: str
    """primary | consequence | note (rules/event_shapes.yaml)"""
    telemetry: bool
    signal: str | None = None
    signal_meaning: str | None = None
    count: int
    dated: bool
    progress_after: bool | None = None
    """A trainer progress line follows it (by time, else by line in one file); None when the
    event is undated and no progress line shares its file: never placed before or after progress."""
    first_error: bool
    named: bool
    """A specific signature names it (not only a generic traceback / unclassified one)."""
    signature: str | None = None


class SuppressedMeasured(Fact):
    kind: Literal["suppressed"] = "suppressed"
    sig: str
    count: int


class EnginesMeasured(Fact):
    """vLLM stats lines over the recent stats window (per engine medians, then across engines)."""
    kind: Literal["engines"] = "engines"
    seen: int
    """Engines that printed at least one stats line."""
    fresh: int = 0
    """Engines whose newest stats line is within the freshness window of the evidence time."""
    stats_lines: int = 0
    eras: str | None = None
    newest_stats: str | None = None
    stats_age_s: float | None = None
    gen_tok_s_per_engine: float | None = None
    """Median over fresh engines of each engine's median generation throughput in the window."""
    running_median: float | None = None
    waiting_median: float | None = None
    waiting_p_persistent: float | None = None
    """The waiting count exceeded in the persistent share of recent samples (a low quantile)."""
    waiting_over_running_p_persistent: float | None = None
    """The waiting/running ratio exceeded in the persistent share of recent samples."""
    kv_cache_pct_median: float | None = None
    expected_engines: int | None = None
    n_concurrent_trials: int | None = None
    max_num_seqs: int | None = None
    demand_over_supply: float | None = None
    present: int = 0
    """Engines with a stats line in the current attempt (all engines seen when no attempt boundary is known)."""
    identities: str | None = None
    """The engines seen, one canonical identity each (process prefix or Ray worker file, host), sorted."""
    unattributed_files: int = 0
    """Files whose stats lines carry no process identity (no ``(Actor pid=N)`` prefix, no Ray worker
    file name): their engines cannot be told apart, so the engine count is not comparable."""
    deduplicated_lines: int = 0
    """Stats lines Ray folded with others (``[repeated Nx across cluster]``): the folded engines'
    lines are missing from that stream, so an engine absent or silent there may only be folded."""
    log_files: int = 0
    """Log files read for this diagnosis."""
    log_capture_problems: str | None = None
    """Evidence problems on log sources (sync or probe errors for the finelog, pod or Ray logs; unreadable logs)."""
    gpu_groups: int = 0
    """Engines (or hosts) the live polls' inference GPUs were grouped into (``engine_gpus`` facts)."""
    gpu_groups_busy_unlogged: int = 0
    """Of them, groups computing (median utilization above idle) that match no engine printing stats
    in the logs: an engine runs there whose log lines were not captured."""


class EngineGpusMeasured(Fact):
    """The inference GPUs of one engine in the live polls, matched to the engine by every cue there is."""
    kind: Literal["engine_gpus"] = "engine_gpus"
    identity: str
    """The engine's canonical identity (as in the ``engine`` facts), else ``inference GPUs on <host>``."""
    matched_by: str
    """``pid`` (a GPU's compute process is the engine's pid on its host), ``host`` (the only engine
    logging from that pod / IP / node) or ``none`` (no engine in the logs matches)."""
    host: str
    gpu_list: str
    """The GPU indices, comma-separated."""
    gpus: int
    polls: int
    """Fewest polls of any of its GPUs."""
    max_util_pct: float | None = None
    max_median_util_pct: float | None = None
    min_mem_used_mib: float | None = None
    in_logs: bool = False
    """The engine also prints stats lines in the logs read."""


class EngineMeasured(Fact):
    """One inference engine (canonical identity over every file it logs to) and its newest stats line."""
    kind: Literal["engine"] = "engine"
    identity: str
    sources: str
    """The files its stats lines were read from."""
    samples: int
    last_stats: str | None = None
    lag_s: float | None = None
    """How long before the newest stats line of any engine this engine's newest stats line was printed."""
    last_gen_tok_s: float | None = None
    last_running: int | None = None
    in_current_attempt: bool = True


class EnginesConfigured(Fact):
    """The configured number of inference engines (num_inference_engines) and where it was read."""
    kind: Literal["engines_configured"] = "engines_configured"
    expected: int
    source: str
    """``file:line`` of the configuration line, or the configuration source and key."""


class ThroughputMeasured(Fact):
    """Measured generation throughput next to the hardware table's row for this model and GPU."""
    kind: Literal["throughput"] = "throughput"
    measured_tok_s: float
    running_median: float | None = None
    enforce_eager: bool | None = None
    enforce_eager_source: str | None = None
    table_row: str | None = None
    gpu: str | None = None
    floor_tok_s: float | None = None
    healthy_low_tok_s: float | None = None
    single_stream_bound_tok_s: float | None = None
    table_source: str | None = None
    floor_assumption: str | None = None
    """Set when the model or GPU was unknown or disputed: which conservative row the floor assumes."""
    gpu_source: str | None = None
    """Where the GPU of the row was read (None when it was assumed)."""
    floor_fastest_tok_s: float | None = None
    """When the GPU sources disagree: the floor on the fastest GPU named (``floor_tok_s`` is the
    floor on the slowest, the conservative one)."""


class IdentityMeasured(Fact):
    """The job judged (model and class, GPU, engine geometry, stage, each with its source) beside the given inputs."""
    kind: Literal["identity"] = "identity"
    model: str | None = None
    model_source: str | None = None
    """``file:line`` where the evidence names the model (else the configuration source)."""
    model_class: str | None = None
    """``dense`` or ``MoE`` (fewer active than total parameters), as observed."""
    total_params_b: float | None = None
    active_params_b: float | None = None
    params_source: str | None = None
    gpu: str | None = None
    """The GPU class as observed (not given)."""
    gpu_source: str | None = None
    engines: int | None = None
    tp: int | None = None
    ep: int | None = None
    geometry: str | None = None
    geometry_source: str | None = None
    stage: str | None = None
    """``bring-up`` (no completed step), ``inference`` (a rollout phase open) or ``training``."""
    stage_source: str | None = None
    given_model: str | None = None
    given_class: str | None = None
    given_total_params_b: float | None = None
    given_active_params_b: float | None = None
    active_params_ratio: float | None = None
    """The larger over the smaller of the given and the observed active parameters."""
    total_params_ratio: float | None = None
    given_gpu: str | None = None
    given_gpu_class: str | None = None


class GpuTypeMeasured(Fact):
    """The GPU type as each source names it (nvidia-smi, node labels, job.json, launch words, --gpu)."""
    kind: Literal["gpu_type"] = "gpu_type"
    gpu: str
    """The class of the first source in rules/sets.yaml gpu_source_precedence that names a GPU."""
    source_kind: str
    source: str
    kinds_named: int
    """Kinds of source that name a GPU."""
    device_classes: int
    """Distinct GPU classes the device sources (rules/sets.yaml gpu_device_sources) name."""
    classes: str | None = None
    disagreement: str | None = None
    """Which device source names which class, when they name more than one."""


class GpuRoleMeasured(Fact):
    """Live GPU polls of one role (policy / inference / unknown)."""
    kind: Literal["gpu_role"] = "gpu_role"
    role: str
    gpus: int
    polls: int
    """Fewest polls of any GPU of this role."""
    max_util_pct: float | None = None
    """Highest utilization seen on any GPU of this role in any poll."""
    min_mem_used_mib: float | None = None
    max_median_util_pct: float | None = None
    """Highest per-GPU median utilization."""
    busy_gpus_over_idle: int = 0
    """GPUs whose median utilization is above the idle-utilization threshold (reported only)."""
    max_mem_used_fraction: float | None = None
    mean_util_pct: float | None = None


class GpuHealthMeasured(Fact):
    """GPU health queried once per node (nvidia-smi ECC / page retirement / row remapping)."""
    kind: Literal["gpu_health"] = "gpu_health"
    hosts: int
    gpus: int
    ecc_volatile_uncorrectable: int = 0
    """Uncorrectable volatile ECC errors summed over every GPU."""
    remapping_failure_gpus: int = 0
    remap_pending_gpus: int = 0
    retire_pending_gpus: int = 0


class GpuXidMeasured(Fact):
    """NVRM Xid events of one Xid code in the nodes' kernel logs."""
    kind: Literal["gpu_xid"] = "gpu_xid"
    xid: str
    count: int
    hosts: int


class FlightRecorderMeasured(Fact):
    """The NCCL flight-recorder dumps fetched from a live job: which ranks wait in which collective."""
    kind: Literal["flight_recorder"] = "flight_recorder"
    readable_ranks: int
    stuck_ranks: int
    """Ranks with a pending (started, never completed) collective."""
    behind_ranks: int
    """Ranks whose last enqueued collective is behind the highest any rank of their group enqueued."""
    collective: str | None = None
    seq: int | None = None
    process_group: str | None = None
    """The process group of the stuck collective with the most suspected ranks."""
    members: int | None = None
    """Members of that group (its ``pg_config`` ranks)."""
    suspected: int = 0
    """Ranks singled out across groups: members that never enqueued the stuck collective (absent)
    plus members that enqueued it but lag the others' state in it (lagging)."""
    absent_ranks: int = 0
    lagging_ranks: int = 0
    no_dump_ranks: int = 0
    """Members whose dump is missing or unreadable: neither cleared nor suspected."""
    suspected_ranks: str | None = None
    """The suspected ranks, e.g. ``5 (enqueued all_reduce seq 41, never started), 11 (never enqueued it)``."""
    suspected_nodes: str | None = None
    """The nodes holding the suspected ranks, e.g. ``node-0 (rank 5), node-1 (rank 11)``."""


class StacksMeasured(Fact):
    kind: Literal["stacks"] = "stacks"
    count: int
    in_collective: int


class PodsMeasured(Fact):
    kind: Literal["pods"] = "pods"
    count: int
    oomkilled: int
    progress_after_last_oom: bool
    last_oom: str | None = None
    image_pull_backoff: int
    crashloop: int
    restarts: int
    running: int
    pending: int


class TrialsMeasured(Fact):
    """Agentic trial summary from trace_jobs/ (current generation only)."""
    kind: Literal["trials"] = "trials"
    present: bool
    trace_dir: bool = False
    started: int = 0
    prior_generation: int = 0
    completed: int = 0
    unreadable: int = 0
    finished: int = 0
    rewards: int = 0
    nonzero_rewards: int = 0
    mean_reward: float | None = None
    top_exception: str | None = None
    top_exception_count: int = 0
    top_exception_fraction: float = 0.0
    top_exception_infra: bool = False
    """The top exception is listed as infrastructure in rules/trial_exceptions.yaml."""
    infra_cause: str | None = None
    infra_fix: str | None = None
    turns_mean: float | None = None
    coherence_sampled: int = 0
    """Newest sampled trials whose agent output was read."""
    incoherent: int = 0
    """Of them, outputs at least one coherence signal flags (rlhealth/coherence.py)."""
    incoherent_fraction: float | None = None
    incoherent_empty: int = 0
    incoherent_script_switch: int = 0
    incoherent_dictionary: int = 0
    incoherent_compressibility: int = 0
    incoherent_repetition: int = 0
    incoherent_special_tokens: int = 0
    incoherent_wrong_language: int = 0
    """Per signal: sampled outputs that signal flags (one output can be flagged by several)."""
    incoherent_signals: str | None = None
    """The per-signal counts as text (``dictionary 15, repetition 12``; ``no signal``)."""
    sampled_before_sync: int = 0
    """Sampled outputs of trials started before the first weight broadcast in the engine logs."""
    incoherent_before_sync: int = 0
    incoherent_before_sync_fraction: float | None = None
    sampled_after_sync: int = 0
    """Sampled outputs of trials started at or after the first weight broadcast."""
    incoherent_after_sync: int = 0
    incoherent_after_sync_fraction: float | None = None
    weight_syncs: int = 0
    """Weight syncs in the engine logs: dated weight-broadcast lines grouped (one per engine) when
    less than ``weight_sync_group_s`` apart. They delimit the steps (policy versions) coherence is judged per."""
    steps_judged: int = 0
    """Policy versions (before the first sync, between two syncs, after the last) with at least
    ``coherence_step_min_samples`` sampled outputs."""
    recent_salad_steps: int = 0
    """The newest judged steps, consecutive, each with an incoherent share at or above ``salad_fraction``."""
    recent_salad_sampled: int = 0
    recent_salad_incoherent: int = 0
    """Sampled outputs, and the incoherent ones, of those newest salad steps."""
    recent_salad_fraction: float | None = None
    recent_salad_since_sync: int | None = None
    """The change point: the number (1 = first) of the weight sync the newest salad steps start at;
    None when they start before any sync."""
    recent_salad_since: str | None = None
    """When that weight sync happened (ISO)."""
    before_change_sampled: int = 0
    before_change_incoherent: int = 0
    before_change_fraction: float | None = None
    """Sampled outputs of the judged steps before the change point, the incoherent ones, their share."""
    newest_step_sampled: int = 0
    newest_step_incoherent: int = 0
    newest_step_fraction: float | None = None
    """Sampled outputs of the newest judged step, the incoherent ones, their share."""
    newest_step_since_sync: int | None = None
    """The weight sync the newest judged step starts at (0: before the first sync)."""
    step_coherence: str | None = None
    """Per judged step, oldest first: ``sync k: incoherent/sampled`` (``initial`` before the first sync)."""
    weight_reload_markers: int = 0
    weight_updates: int = 0
    """Engine-log lines of a weight broadcast (``update_weights`` ...)."""
    weight_reload_finished: int = 0
    """Engine-log lines closing a weight reload (``finish_weight_reload`` / ``finalize_layerwise_reload``)."""
    unreadable_fraction: float = 0.0
    newest_trial_start_age_s: float | None = None
    """Seconds from the newest start recorded in a trial's result.json to the newest evidence time."""


class StopReasonsMeasured(Fact):
    """Why the agents of finished trials stopped: each trial's stop-reason field, else its exception type."""
    kind: Literal["stop_reasons"] = "stop_reasons"
    finished: int
    """Finished trials counted (every one has a reason, possibly ended_without_exception)."""
    recorded: int = 0
    """Of them, trials whose result.json has a stop-reason field."""
    top: str
    """The most frequent stop reason (rules/trial_exceptions.yaml stop_reasons)."""
    top_count: int
    top_fraction: float
    mix: str
    """Every stop reason with its count and share, most frequent first."""
    cause: str | None = None
    fix: str | None = None


class StdRolloutsMeasured(Fact):
    """Standard-run rollout metrics from the trainer log."""
    kind: Literal["std_rollouts"] = "std_rollouts"
    reward_steps: int
    zero_reward_steps: int
    last_reward: float | None = None
    gen_token_steps: int = 0
    max_gen_tokens: float | None = None
    batch_exception: str | None = None
    batch_exception_infra: bool = False
    batch_exception_fraction: float = 0.0
    batch_success_fraction: float | None = None
    batch_infra_cause: str | None = None
    batch_infra_fix: str | None = None


class DynamicsMeasured(Fact):
    """Metric series over the metric window (the newest completed steps)."""
    kind: Literal["dynamics"] = "dynamics"
    steps: int
    window: int
    recent_window: int
    nan_metrics: str | None = None
    log_ratio_abs_max: float | None = None
    policy_loss_abs_max: float | None = None
    grad_norm_max: float | None = None
    recent_log_ratio_abs_max: float | None = None
    recent_policy_loss_abs_max: float | None = None
    recent_grad_norm_max: float | None = None
    log_ratio_onset_step: int | None = None
    """First window step at which log_ratio_abs_max reaches the onset share of its window peak."""
    policy_loss_onset_step: int | None = None
    grad_norm_onset_step: int | None = None
    tis_imp_ratio_mean: float | None = None
    reward_first: float | None = None
    reward_last: float | None = None
    reward_range: float | None = None
    reward_points: int = 0
    """Steps in the window with a finite reward."""
    use_tis: bool | None = None


class RestartsMeasured(Fact):
    """Attempts of the job, their first causal errors and the retry budget."""
    kind: Literal["restarts"] = "restarts"
    attempts: int
    failed_before_current: int
    """Failed attempts before the current one (a wall-clock timeout with a successor is not counted)."""
    current_failed: bool
    """The current (last) attempt is in a failed state or has a first causal error."""
    failed_including_current: int
    distinct_errors_before_current: int
    distinct_errors_all: int
    """Distinct normalized first errors over failed attempts including the current one."""
    errors_missing_before_current: int
    """Failed attempts before the current one with no first causal error found."""
    errors_missing_all: int
    transient_failed: int
    """Failed attempts before the current one whose first error is a transient signature."""
    current_transient: bool = False
    controller_failure_count: int = 0
    preemption_count: int = 0
    """Preemptions and requeues (Slurm ``Restarts=``) the controller counts: not burned attempts."""
    max_retries: int | None = None
    max_retries_source: str | None = None
    first_signature: str | None = None


class ProblemMeasured(Fact):
    """Evidence that should exist but could not be read or parsed."""
    kind: Literal["problem"] = "problem"
    source: str
    reason: str
    gate: str
    fix: str | None = None
    """The fix the probe named for this failure (the text after "; next action: ")."""
    artifact: str | None = None
    """The kind of evidence missing (``engine_logs``: the Ray/vLLM logs the engines write), else None."""


class GateSlot(Fact):
    """One gate to be decided (every gate gets a status, even when no rule concluded)."""
    kind: Literal["gate_slot"] = "gate_slot"
    gate: str
    present: str = "none"
    """The measurements this gate reads that were present (named when no rule concludes)."""
    absent: str = "none"


# Which measurement kinds each gate reads (named when no rule concluded on a gate).
GATE_INPUTS = {
    "liveness": ("job", "trainer", "signature", "gpu_role", "stacks", "flight_recorder", "problem"),
    "resources": ("engines", "engine", "engines_configured", "throughput", "gpu_type", "gpu_role", "gpu_health", "gpu_xid",
                  "pods", "signature", "problem"),
    "rollouts": ("job", "trials", "stop_reasons", "std_rollouts", "problem"),
    "dynamics": ("trainer", "dynamics", "problem"),
    "restarts": ("restarts",),
}


def gate_slot(gate: str, facts: list["Fact"]) -> "GateSlot":
    kinds = GATE_INPUTS.get(gate, ())
    present = [f.summary() for f in sorted(facts, key=lambda f: f.fact_id) if f.kind in kinds]
    absent = [k for k in kinds if not any(f.kind == k for f in facts) and k != "problem"]
    return GateSlot(fact_id=f"gate_slot:{gate}", gate=gate, present="; ".join(present) or "none",
                    absent=", ".join(absent) or "none")


MEASUREMENTS: dict[str, type[Fact]] = {m.model_fields["kind"].default: m for m in (
    JobMeasured, TrainerMeasured, SignatureMeasured, EventMeasured, SuppressedMeasured, EnginesMeasured, EngineMeasured,
    EnginesConfigured, EngineGpusMeasured, ThroughputMeasured, GpuTypeMeasured, IdentityMeasured,
    GpuRoleMeasured, GpuHealthMeasured, GpuXidMeasured, FlightRecorderMeasured, StacksMeasured, PodsMeasured, TrialsMeasured,
    StopReasonsMeasured, StdRolloutsMeasured, DynamicsMeasured,
    RestartsMeasured, ProblemMeasured, GateSlot)}


# ----------------------------------------------------------------------------- derived facts
class Derived(BaseModel):
    """A fact a rule asserted. ``derived_from`` holds the ids of the facts the rule matched."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str
    fact_id: str
    rule: str
    statement: str
    derived_from: tuple[str, ...]
    fields: dict[str, Scalar] = {}
    """Values the rule set on the fact (conclusions: the rule's ``set``; findings: status etc.)."""

    def engine_payload(self) -> dict[str, Any]:
        data = {k: v for k, v in self.fields.items() if isinstance(v, (str, bool, int, float))}
        data.update(kind=self.kind, id=self.fact_id, rule=self.rule)
        return data


DERIVED_KINDS = ("conclusion", "finding", "gate", "verdict_candidate", "verdict", "confidence")
# Fields every derived kind carries (besides those a producing rule sets).
DERIVED_BASE_FIELDS = {
    "conclusion": {"name"},
    "finding": {"gate", "status", "order", "stall", "refutes_stall", "early", "next_action", "flip_signal",
                "finding", "finding_id"},
    "gate": {"gate", "status", "order", "stall", "early", "finding_id", "finding", "next_action", "flip_signal",
             "rule_of_finding"},
    "verdict_candidate": {"verdict", "order", "next_action", "flip_signal", "action_kind"},
    "verdict": {"verdict", "next_action", "flip_signal", "action_kind", "decided_by"},
    "confidence": {"confidence"},
}


def fact_kinds() -> dict[str, str]:
    """kind -> first docstring line, for documentation and `rlhealth rules list`."""
    return {kind: (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else kind
            for kind, model in sorted(MEASUREMENTS.items())}
