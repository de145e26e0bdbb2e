"""trials: the agentic trial summary from trace_jobs/ (current generation), and the duty cycle."""
from __future__ import annotations

import statistics

from rlhealth.facts import Evidence, TrialsMeasured
from rlhealth.observers.base import Observation, median, quantile, summary
from rlhealth.probes.textio import quote


def observe(obs: Observation) -> None:
    read, catalog = obs.read, obs.catalog
    infra = catalog.trial_exceptions.get("infra") or {}
    s = read.trials
    if s is None:
        obs.add(TrialsMeasured(fact_id="trials", present=False, trace_dir=read.trace_dir_exists))
        return
    finished = s.completed - s.unreadable
    top_exc, top_n = (s.exceptions.most_common(1)[0] if s.exceptions else (None, 0))
    nonzero = sum(1 for r in s.rewards if r > 0)
    evidence: list[Evidence] = []
    if top_exc and s.exception_example.get(top_exc):
        evidence.append(summary(f"trace_jobs/{s.exception_example[top_exc]}",
                                f"exception_type: {top_exc} ({top_n}/{finished} finished trials)"))
    if s.incoherent_example:
        evidence.append(Evidence(source=f"trace_jobs/{s.incoherent_example[0]}", text=quote(s.incoherent_example[1])))
    elif s.coherent_example:
        evidence.append(Evidence(source=f"trace_jobs/{s.coherent_example[0]}", text=quote(s.coherent_example[1])))
    rewards_line = (f"{nonzero}/{len(s.rewards)} trials with reward > 0; mean reward {statistics.fmean(s.rewards):.3f}"
                    if s.rewards else "no rewards read")
    prior = f" ({s.prior_generation} from earlier attempts excluded)" if s.prior_generation else ""
    evidence.append(summary("trace_jobs/", f"{s.started} trial dirs, {s.completed} with result.json; {rewards_line}{prior}"))
    for problem in s.problems[:1]:
        evidence.append(summary(problem.split(":")[0], problem))
    remedy = infra.get(top_exc) or {}
    obs.add(TrialsMeasured(
        fact_id="trials", evidence=tuple(evidence), present=True, trace_dir=True, started=s.started,
        prior_generation=s.prior_generation, completed=s.completed, unreadable=s.unreadable, finished=finished,
        rewards=len(s.rewards), nonzero_rewards=nonzero,
        mean_reward=round(statistics.fmean(s.rewards), 4) if s.rewards else None,
        top_exception=top_exc, top_exception_count=top_n,
        top_exception_fraction=round(top_n / finished, 3) if finished else 0.0,
        top_exception_infra=top_exc in infra, infra_cause=remedy.get("cause"), infra_fix=remedy.get("fix"),
        turns_mean=round(s.turns_mean, 2) if s.turns_mean is not None else None,
        coherence_sampled=s.coherence_sampled, incoherent=s.incoherent,
        incoherent_fraction=round(s.incoherent / s.coherence_sampled, 3) if s.coherence_sampled else None,
        weight_reload_markers=read.weight_reload,
        unreadable_fraction=round(s.unreadable / s.completed, 3) if s.completed else 0.0,
        newest_trial_start_age_s=round(obs.evidence_time - s.last_recorded_start, 1)
        if s.last_recorded_start is not None else None))
    medians = {p: median(v) for p, v in s.phases.items() if v}
    if medians:
        total = sum(medians.values())
        setup = s.phases.get("environment_setup")
        obs.duty_cycle = {"trials_timed": max(len(v) for v in s.phases.values()),
                          "median_s": {p: round(v, 1) for p, v in sorted(medians.items())},
                          "share": {p: round(v / total, 3) for p, v in sorted(medians.items())} if total else {},
                          "p90_environment_setup_s": round(quantile(setup, 0.9), 1) if setup else None}
