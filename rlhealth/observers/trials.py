"""trials: the agentic trial summary from trace_jobs/ (current generation), and the duty cycle."""
from __future__ import annotations

from bisect import bisect_right
from math import fsum

import re
from collections import Counter

from rlhealth.facts import Evidence, Occurrence, StopReasonsMeasured, TrialsMeasured
import rlhealth.coherence as coherence
from rlhealth.observers.base import Observation, ev, finite_mean, median, quantile, summary
from rlhealth.probes.parse.timestamps import iso
from rlhealth.probes.parse.trials import weight_syncs
from rlhealth.probes.textio import quote


def start(obs: Observation, apart=None) -> None:
    """Start measuring the coherence sample in another process when the caller allows it
    (``coherence.measuring``'s ``apart``), before the other observers run."""
    s = obs.read.trials
    texts = [text for _, _, text in s.coherence_samples] if s is not None else []
    obs.coherence = coherence.measuring(texts, obs.param, apart)


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
    judged = judge_coherence(s.coherence_samples, obs.param, read.weight_update_first,
                             obs.coherence.result() if obs.coherence is not None else None)
    per_step = judge_steps(judged.pop("flagged"), weight_syncs(read.weight_update_lines, obs.param["weight_sync_group_s"]),
                           obs.param, read.weight_update_first)
    shown = judged.pop("evidence")     # the example output, then the change-point sync, then the first sync
    evidence.extend(shown[:1] + per_step.pop("evidence") + shown[1:])
    coherence_summary = judged.pop("summary")
    mean_reward = finite_mean(s.rewards)
    rewards_line = (f"{nonzero}/{len(s.rewards)} trials with reward > 0; mean reward "
                    + (f"{mean_reward:.3f}" if mean_reward is not None else "not computable (it overflows)")
                    if s.rewards else "no rewards read")
    prior = f" ({s.prior_generation} from earlier attempts excluded)" if s.prior_generation else ""
    evidence.append(summary("trace_jobs/", f"{s.started} trial dirs, {s.completed} with result.json; {rewards_line}{prior}"))
    if coherence_summary is not None:
        evidence.append(coherence_summary)
    for problem in s.problems[:1]:
        evidence.append(summary(problem.split(":")[0], problem))
    remedy = infra.get(top_exc) or {}
    obs.add(TrialsMeasured(
        fact_id="trials", evidence=tuple(evidence), present=True, trace_dir=True, started=s.started,
        prior_generation=s.prior_generation, completed=s.completed, unreadable=s.unreadable, finished=finished,
        rewards=len(s.rewards), nonzero_rewards=nonzero,
        mean_reward=round(mean_reward, 4) if mean_reward is not None else None,
        top_exception=top_exc, top_exception_count=top_n,
        top_exception_fraction=round(top_n / finished, 3) if finished else 0.0,
        top_exception_infra=top_exc in infra, infra_cause=remedy.get("cause"), infra_fix=remedy.get("fix"),
        turns_mean=round(s.turns_mean, 2) if s.turns_mean is not None else None,
        coherence_sampled=s.coherence_sampled, **judged, **per_step,
        weight_reload_markers=read.weight_reload, weight_updates=read.weight_updates,
        weight_reload_finished=read.weight_reload_finished,
        unreadable_fraction=round(s.unreadable / s.completed, 3) if s.completed else 0.0,
        newest_trial_start_age_s=round(obs.evidence_time - s.last_recorded_start, 1)
        if s.last_recorded_start is not None else None))
    stops = stop_reasons(s, catalog.trial_exceptions.get("stop_reasons") or {})
    if stops is not None:
        obs.add(stops)
    obs.duty_cycle = duty_cycle(s)


def _share(n: int, of: int) -> float | None:
    return round(n / of, 3) if of else None


def judge_coherence(samples, param: dict, first_sync: Occurrence | None, measured: list | None = None) -> dict:
    """Per-signal counts over the sampled agent outputs, split at the first weight broadcast.

    Each output is measured (``coherence.measure``; ``measured``: their measures, already taken,
    as ``coherence.measuring`` takes them) and flagged per signal by its named limit
    (``coherence.flags``); the share of flagged outputs is what the rules judge. Returns the
    TrialsMeasured fields plus ``evidence`` (the first flagged output, or the first coherent one;
    the first weight broadcast line) and ``summary`` (the per-signal counts, None without samples)."""
    counts = dict.fromkeys(coherence.SIGNALS, 0)
    incoherent = before = before_bad = after = after_bad = 0
    bad_example = good_example = None
    sync_ts = first_sync.ts if first_sync is not None else None
    flagged_by_start: list[tuple[float | None, bool]] = []
    if measured is None:
        measured = coherence.measure_all([text for _, _, text in samples], **coherence.measure_params(param))
    for (start, source, text), m in zip(samples, measured):
        flagged = coherence.flags(m, param)
        for signal in flagged:
            counts[signal] += 1
        incoherent += bool(flagged)
        flagged_by_start.append((start, bool(flagged)))
        snippet = " ".join(text.split())[:200]
        if flagged and bad_example is None:
            bad_example = (source, "; ".join(flagged.values()) + ": " + snippet)
        elif not flagged and good_example is None:
            good_example = (source, snippet)
        if sync_ts is not None and start is not None:
            if start < sync_ts:
                before += 1
                before_bad += bool(flagged)
            else:
                after += 1
                after_bad += bool(flagged)
    evidence: list[Evidence] = []
    shown = bad_example or good_example
    if shown:
        evidence.append(Evidence(source=f"trace_jobs/{shown[0]}", text=quote(shown[1])))
    if first_sync is not None:
        evidence.extend(ev(first_sync))
    per_signal = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "no signal"
    coherence_summary = None
    if samples:
        split = (f"; {before_bad}/{before} before the first weight sync, {after_bad}/{after} after"
                 if sync_ts is not None else "")
        coherence_summary = summary("trace_jobs/", f"coherence: {incoherent}/{len(samples)} sampled agent outputs flagged "
                                                   f"({per_signal}){split}")
    return dict(incoherent=incoherent, incoherent_fraction=_share(incoherent, len(samples)), incoherent_signals=per_signal,
                **{f"incoherent_{k}": v for k, v in counts.items()},
                sampled_before_sync=before, incoherent_before_sync=before_bad,
                incoherent_before_sync_fraction=_share(before_bad, before),
                sampled_after_sync=after, incoherent_after_sync=after_bad,
                incoherent_after_sync_fraction=_share(after_bad, after), evidence=evidence,
                summary=coherence_summary, flagged=flagged_by_start)


def judge_steps(flagged, syncs, param: dict, first_sync: Occurrence | None) -> dict:
    """Coherence per step: the sampled outputs (``(recorded start, flagged)``) grouped by the policy
    version their trial started under (before the first weight sync, between two syncs, after the
    last), each version with at least ``coherence_step_min_samples`` samples judged on its own.
    The newest judged steps whose incoherent share reaches ``salad_fraction``, consecutive, are the
    recent salad steps; the weight sync the oldest of them starts at is the change point (quoted
    when it is not the first sync, which ``judge_coherence`` already quotes)."""
    times = [ts for ts, *_ in syncs]
    per_version: dict[int, list[int]] = {}
    for start, bad in flagged:
        if start is None:
            continue
        counts = per_version.setdefault(bisect_right(times, start), [0, 0])
        counts[0] += 1
        counts[1] += bad
    minimum = int(param["coherence_step_min_samples"])
    judged = sorted(v for v, (n, _) in per_version.items() if n >= minimum)
    recent: list[int] = []
    for version in reversed(judged):
        n, bad = per_version[version]
        if bad / n < param["salad_fraction"]:
            break
        recent.append(version)
    before = [v for v in judged if not recent or v < recent[-1]]
    before_n = sum(per_version[v][0] for v in before)
    before_bad = sum(per_version[v][1] for v in before)
    recent_n = sum(per_version[v][0] for v in recent)
    recent_bad = sum(per_version[v][1] for v in recent)
    change = recent[-1] if recent else None
    newest_n, newest_bad = per_version[judged[-1]] if judged else (0, 0)
    evidence: list[Evidence] = []
    if change:
        ts, source, line, text = syncs[change - 1]
        if first_sync is None or (source, line) != (first_sync.source, first_sync.line):
            evidence.append(Evidence(source=source, line=line, text=quote(text)))
    return dict(weight_syncs=len(syncs), steps_judged=len(judged), recent_salad_steps=len(recent),
                recent_salad_sampled=recent_n, recent_salad_incoherent=recent_bad,
                recent_salad_fraction=_share(recent_bad, recent_n),
                recent_salad_since_sync=change or None,
                recent_salad_since=iso(syncs[change - 1][0]) if change else None,
                before_change_sampled=before_n, before_change_incoherent=before_bad,
                before_change_fraction=_share(before_bad, before_n),
                newest_step_sampled=newest_n, newest_step_incoherent=newest_bad,
                newest_step_fraction=_share(newest_bad, newest_n),
                newest_step_since_sync=judged[-1] if judged else None,
                step_coherence="; ".join(f"{'initial' if v == 0 else f'sync {v}'}: {per_version[v][1]}/{per_version[v][0]}"
                                         for v in judged) or None,
                evidence=evidence)



def duty_cycle(s) -> dict | None:
    """Each trial phase against the trial's own wall clock (``started_at`` to ``finished_at``).

    A share divides a phase's summed seconds by the summed wall clock, both over the trials that
    recorded their own start and finish: a trial that timed its setup and never finished would
    otherwise reach the numerator without the denominator. Medians, means and totals cover every
    trial that timed the phase. The trial time no phase covers is the ``unattributed`` row; where
    the phases sum past the wall clock (they run alongside each other) an ``overlap`` row carries
    the excess and has no share. No wall clock at all: no shares. None when no phase was timed."""
    timed = {p: v for p, v in s.phases.items() if v}
    if not timed:
        return None
    measured, unfinished, untimed = s.wall
    wall = s.wall_s if measured else 0.0
    rows = []
    medians = {}
    for phase, values in timed.items():
        inside = s.phase_in_wall_s.get(phase, 0.0)
        medians[phase] = round(median(values), 1)
        total = fsum(values)
        rows.append({"name": phase, "trials": len(values), "median_s": medians[phase],
                     "mean_s": round(total / len(values), 1), "total_s": round(total, 1),
                     "share_of_trial": round(inside / wall, 3) if wall > 0 else None})
    if wall > 0:
        rest = wall - fsum(s.phase_in_wall_s.get(p, 0.0) for p in timed)
        if rest < 0:
            rows.append({"name": "overlap", "trials": None, "median_s": None, "mean_s": None,
                         "total_s": round(-rest, 1), "share_of_trial": None})
        else:
            rows.append({"name": "unattributed", "trials": None, "median_s": None, "mean_s": None,
                         "total_s": round(rest, 1), "share_of_trial": round(rest / wall, 3)})
    setup = s.phases.get("environment_setup")
    return {"trials_timed": max(len(v) for v in timed.values()),
            "trials_with_wall_clock": measured, "trials_unfinished": unfinished, "trials_untimed": untimed,
            "wall_clock_s": round(wall, 1),
            "phases": rows,
            "median_s": {p: medians[p] for p in sorted(timed)},
            "share": {r["name"]: r["share_of_trial"] for r in rows if r["share_of_trial"] is not None},
            "p90_environment_setup_s": round(quantile(setup, 0.9), 1) if setup else None}

def normalized_stop_reason(value: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", value.strip().lower()).strip("_")


def stop_reasons(s, vocabulary: dict) -> StopReasonsMeasured | None:
    """The agent stop reasons over finished trials: each trial's stop-reason field, else its
    exception type, mapped through rules/trial_exceptions.yaml ``stop_reasons``; counts, shares,
    the top reason with its meaning and one example trial. None without a finished trial."""
    aliases = {normalized_stop_reason(str(k)): str(v) for k, v in (vocabulary.get("aliases") or {}).items()}
    counts: Counter = Counter()
    examples: dict[str, tuple[str, str]] = {}
    recorded = 0
    for (field_value, exception), n in sorted(s.stop_reasons.items(), key=lambda kv: (kv[0][0] is None, str(kv[0][0]), str(kv[0][1]))):
        if field_value:
            recorded += n
            raw, said = normalized_stop_reason(field_value), f'stop reason "{field_value}"'
            reason = aliases.get(raw, raw)
        elif exception:
            raw, said = normalized_stop_reason(exception), f"exception_type {exception} (no stop-reason field)"
            reason = aliases.get(raw, f"exception:{exception}")
        else:
            reason, said = "ended_without_exception", "no stop-reason field and no exception"
        counts[reason] += n
        examples.setdefault(reason, (s.stop_reason_example[(field_value, exception)], said))
    total = sum(counts.values())
    if not total:
        return None
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    top, top_n = ranked[0]
    meaning = (vocabulary.get("meaning") or {}).get(top) or {}
    example_file, said = examples[top]
    mix = ", ".join(f"{r} {n} ({round(100 * n / total)}%)" for r, n in ranked)
    return StopReasonsMeasured(
        fact_id="stop_reasons", finished=total, recorded=recorded, top=top, top_count=top_n,
        top_fraction=round(top_n / total, 3), mix=mix, cause=meaning.get("cause"), fix=meaning.get("fix"),
        evidence=(summary(f"trace_jobs/{example_file}", f"{said}: {top} ends {top_n}/{total} finished trials; {mix}"),))
