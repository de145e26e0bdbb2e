"""std_rollouts: standard-run rollout metrics (reward, generation length, Harbor batch errors)."""
from __future__ import annotations

import math

from rlhealth.facts import Evidence, StdRolloutsMeasured
from rlhealth.observers.base import Observation, ev
from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.textio import quote


def observe(obs: Observation) -> None:
    read, records = obs.read, obs.records
    infra = obs.catalog.trial_exceptions.get("infra") or {}
    steps = sorted(records)
    rewards = [(st, tp.metric(records[st].metrics, "reward")) for st in steps]
    rewards = [(st, r) for st, r in rewards if r is not None and not math.isnan(r)]
    gen_tokens = [g for g in (tp.metric(records[st].metrics, "gen_avg_tokens") for st in steps) if g is not None]
    top_exc, top_n = (max(read.exc_breakdown.items(), key=lambda kv: kv[1]) if read.exc_breakdown else (None, 0))
    total_exc = sum(read.exc_breakdown.values())
    batch_total = sum(b["total"] for b, _ in read.batch_complete)
    batch_ok = sum(b["successful"] for b, _ in read.batch_complete)
    evidence = []
    if rewards:
        st = rewards[-1][0]
        evidence.append(Evidence(source=records[st].source, line=records[st].line,
                                 text=quote(f"step {st}: reward {rewards[-1][1]}"), summary=True))
    evidence += ev(read.exc_breakdown_occ)
    obs.add(StdRolloutsMeasured(
        fact_id="std_rollouts", evidence=tuple(evidence), reward_steps=len(rewards),
        zero_reward_steps=sum(1 for _, r in rewards if r == 0), last_reward=rewards[-1][1] if rewards else None,
        gen_token_steps=len(gen_tokens), max_gen_tokens=max(gen_tokens) if gen_tokens else None,
        batch_exception=top_exc, batch_exception_infra=top_exc in infra,
        batch_exception_fraction=round(top_n / total_exc, 3) if total_exc else 0.0,
        batch_success_fraction=round(batch_ok / batch_total, 3) if batch_total else None,
        batch_infra_cause=(infra.get(top_exc) or {}).get("cause"), batch_infra_fix=(infra.get(top_exc) or {}).get("fix")))
