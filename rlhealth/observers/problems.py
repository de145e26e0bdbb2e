"""problem: evidence that should exist but could not be read or parsed."""
from __future__ import annotations

from rlhealth.facts import Evidence, ProblemMeasured
from rlhealth.observers.base import Observation
from rlhealth.probes.textio import quote


def observe(obs: Observation) -> None:
    for i, problem in enumerate(obs.read.problems):
        reason, _, fix = problem.reason.partition("; next action: ")
        obs.add(ProblemMeasured(fact_id=f"problem:{i}", source=problem.source, reason=reason, fix=fix.strip() or None,
                                gate=problem.gate, artifact=problem.artifact,
                                evidence=(Evidence(source=problem.source, text=quote(problem.reason), summary=True),)))
