"""Observers: from what the bundle reader parsed to measurement facts (one observer per fact kind).

Pure functions of (``BundleRead``, catalog, evaluation time). Each observer states what it measured
(ages, counts, rates, medians, shares, configuration values with their source) with the quoted
evidence behind it; no observer compares a measurement with a threshold: the rule base does.
Measurement windows (how many recent steps or seconds a summary covers) are named parameters in
``rules/thresholds.yaml`` (keys ending in ``_window_s`` / ``_window_steps``).
"""
from __future__ import annotations

from rlhealth.catalog import Catalog
from rlhealth.facts import GATES, REPORTED_APART, gate_slot
from rlhealth.observers.base import Observation
from rlhealth.observers import (dynamics, engines, events, gpus, hardware, identity, job, pods, problems, restarts,
                                rollouts_std, signatures, stacks, trainer, trials)
from rlhealth.probes.bundle import BundleRead

__all__ = ["Observation", "observe"]


def observe(read: BundleRead, catalog: Catalog, *, now: float, max_age_s: float,
            mode_override: str | None = None, given=None, coherence_apart=None) -> Observation:
    """``given``: the dispatcher's inputs (``rlhealth.given.Given``); they fill what the evidence
    does not state (GPU, model) and are marked as given in the measurement's source.
    ``coherence_apart``: how the coherence sample may be measured in another process
    (``rlhealth.coherence.measuring``; a ``Standby`` passed is used or ended here)."""
    obs = Observation(read=read, catalog=catalog, now=now)
    trials.start(obs, coherence_apart)
    problems.observe(obs)
    job.observe(obs, max_age_s=max_age_s, mode_override=mode_override, given=given)
    trainer.observe(obs)
    signatures.observe(obs)
    events.observe(obs)
    engines.observe(obs)
    gpus.observe(obs)
    stacks.observe(obs)
    hardware.observe(obs)
    pods.observe(obs)
    trials.observe(obs)
    rollouts_std.observe(obs)
    dynamics.observe(obs)
    restarts.observe(obs)
    identity.observe(obs, given)
    measured = list(obs.facts)
    for gate in GATES + REPORTED_APART:
        obs.facts.append(gate_slot(gate, measured))
    return obs
