"""Typed facts: what the probes observed, summarized, with the evidence behind them.

Facts are frozen pydantic models. Each one has a ``kind`` (what the rule base
matches on), a unique ``fact_id`` (durable-rules refuses identical facts) and the
quoted evidence lines it rests on. The rule engine receives summary facts
(counts, first/last occurrence, series statistics), never one fact per log line.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

GateName = Literal["liveness", "resources", "rollouts", "dynamics"]
GATES: tuple[GateName, ...] = ("liveness", "resources", "rollouts", "dynamics")
Status = Literal["PASS", "FAIL", "ERROR"]


class Evidence(BaseModel):
    """One quoted line: ``source`` is relative to the bundle, ``line`` is 1-based."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str
    line: int | None = None
    text: str


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

    def evidence(self) -> Evidence:
        return Evidence(source=self.source, line=self.line, text=self.text)


class Fact(BaseModel):
    """Base of every fact handed to the rule engine."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str
    fact_id: str
    evidence: tuple[Evidence, ...] = ()

    def engine_payload(self) -> dict[str, Any]:
        """The fact as the rule engine sees it (JSON-safe, evidence left out)."""
        data = self.model_dump(mode="json", exclude={"evidence"})
        data["id"] = self.fact_id
        return {k: v for k, v in data.items() if v is not None}


class FindingSpec(BaseModel):
    """A conclusion a rule draws about one gate."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    rule: str
    gate: GateName | Literal["restarts", "verdict"]
    status: Status
    finding: str
    evidence: tuple[Evidence, ...] = ()
    facts: tuple[str, ...] = ()
    stall: bool = False
    """True when the failure is frozen progress without a hard-failure signature."""
    refutes_stall: bool = False
    """True when live evidence shows the frozen-looking job is working (drops stall findings)."""
    next_action: str | None = None
    flip_signal: str | None = None
    handoff: dict[str, str] | None = None
    order: int = 100
    """Lower order = more load-bearing; used to rank findings within a gate."""


class AnyFact(Fact):
    """A fact whose fields are free-form (payload); used for derived summaries."""
    model_config = ConfigDict(frozen=True, extra="allow")


def make_fact(kind: str, fact_id: str, evidence: list[Evidence] | tuple[Evidence, ...] = (), **fields: Any) -> AnyFact:
    return AnyFact(kind=kind, fact_id=fact_id, evidence=tuple(evidence), **fields)


class ProblemNote(BaseModel):
    """Evidence that should exist but could not be read or parsed."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str
    reason: str
    gate: GateName | Literal["all", "none"] = "all"
    """The gate this problem makes ERROR; "none" = listed only."""


def fact_kinds() -> dict[str, str]:
    """Documentation of the fact kinds the rule base matches on (kind -> meaning)."""
    return {
        "job": "identity, controller state, freshness, mode, placement of the job",
        "signature": "occurrences of one log signature (count, first/last, attempts)",
        "trainer": "trainer progress: steps, phase timers, freshness of the newest trainer line",
        "engines": "vLLM stats per engine, recent throughput and queue tuple",
        "throughput": "engine throughput against the hardware lookup table",
        "gpu_roles": "live GPU polls separated by role (policy / inference)",
        "stacks": "py-spy stacks captured while the job existed",
        "pods": "Kubernetes pod state: OOMKilled, image pull, restarts",
        "trials": "agentic trial summary from trace_jobs/",
        "std_rollouts": "standard-run rollout metrics from the trainer log",
        "dynamics": "metric series over completed steps",
        "restarts": "attempts, their first causal errors, retry budget",
        "problem": "evidence that could not be obtained or parsed",
    }
