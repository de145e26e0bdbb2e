"""trainer: completed steps, step cadence, age of the newest trainer progress line."""
from __future__ import annotations

from rlhealth.facts import TrainerMeasured
from rlhealth.observers.base import Observation, ev, median, rounded
from rlhealth.probes.parse.timestamps import iso


def observe(obs: Observation) -> None:
    read = obs.read
    records = {}
    for rec in read.metric_records:
        records.setdefault(rec.step, rec)   # first occurrence of a step wins across the chain
    obs.records = records
    steps = sorted(records)
    last = read.last_trainer_line
    obs.last_progress = last
    step_times = [r.metrics.get("timing/step") for r in records.values() if r.metrics.get("timing/step")]
    step_times += read.phase_costs.get("step", [])
    ts_sorted = sorted(r.ts for r in records.values() if r.ts is not None)
    if not step_times and len(ts_sorted) >= 3:
        step_times = [b - a for a, b in zip(ts_sorted, ts_sorted[1:]) if b > a]
    median_step = median(step_times)
    completed = max(len(steps), read.steps_finished, (read.step_progress or (0, 0))[0])
    age = (obs.evidence_time - last.ts) if last is not None and last.ts is not None else None
    open_phase = None
    if read.phases_open:
        open_phase = max(read.phases_open.items(), key=lambda kv: (kv[1].ts or 0, kv[1].line))[0]
    genbuf_unchanged = None
    if read.genbuf_last_change is not None and read.genbuf_last_seen is not None \
            and read.genbuf_last_change.ts is not None and read.genbuf_last_seen.ts is not None:
        genbuf_unchanged = rounded(read.genbuf_last_seen.ts - read.genbuf_last_change.ts)
    activity = read.trainer_lines + read.malformed_metric_lines + read.steps_finished + (1 if read.step_progress else 0)
    evidence = ev(last)
    if not records and read.malformed_example is not None:
        evidence = ev(read.malformed_example) + evidence
    obs.add(TrainerMeasured(
        fact_id="trainer", evidence=tuple(evidence), trainer_lines=activity, metric_records=len(records),
        malformed_records=read.malformed_metric_lines, steps_completed=completed,
        last_step=steps[-1] if steps else (read.step_progress or (None, None))[0],
        total_steps=(read.step_progress or (None, None))[1],
        last_progress=iso(last.ts) if last is not None and last.ts else None,
        progress_age_s=rounded(age), median_step_s=rounded(median_step) if median_step else None,
        open_phase=open_phase, genbuf_unchanged_s=genbuf_unchanged,
        serialization=records[steps[-1]].serialization if steps else None, log_files=len(read.log_files),
        launch_lines=sum(1 for occ in (read.source_rev, read.generator_init) if occ is not None)))
