"""dynamics: metric series over the metric window (newest steps) and over its most recent part."""
from __future__ import annotations

import math

from rlhealth.facts import DynamicsMeasured, Evidence
from rlhealth.observers.spans import span_table, step_rows
from rlhealth.observers.base import Observation, finite, median
from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.textio import quote

SERIES = ("reward", "entropy", "policy_loss", "grad_norm", "tis_imp_ratio_mean", "tis_log_ratio_abs_mean",
          "tis_exact_match", "log_ratio_abs_max")
QUOTED = ("reward", "entropy", "log_ratio_abs_max", "policy_loss", "grad_norm", "tis_imp_ratio_mean")


def _max(values, absolute=False):
    values = finite(values)
    return max((abs(v) if absolute else v for v in values), default=None)


def onset_step(steps: list[int], values: list[float | None], share: float) -> int | None:
    """The first step whose magnitude reaches ``share`` of the window peak (where a spike began)."""
    pairs = [(s, abs(v)) for s, v in zip(steps, values) if v is not None and not (math.isnan(v) or math.isinf(v))]
    peak = max((v for _, v in pairs), default=None)
    if not peak:
        return None
    return next(s for s, v in pairs if v >= share * peak)


def observe(obs: Observation) -> None:
    read, records = obs.read, obs.records
    steps = sorted(records)
    window = steps[-int(obs.param["dynamics_window_steps"]):]
    recent = window[-int(obs.param["dynamics_recent_window_steps"]):]
    share = obs.param["dynamics_onset_share_of_peak_fraction"]

    def series(name, which):
        return [v for v in (tp.metric(records[s].metrics, name) for s in which) if v is not None]
    full = {name: series(name, window) for name in SERIES}
    nan_metrics = sorted(n for n, v in full.items() if any(math.isnan(x) or math.isinf(x) for x in v))
    rewards = finite(full["reward"])
    imp = finite(full["tis_imp_ratio_mean"])
    evidence = []
    if window:
        def weight(s):
            m = records[s].metrics
            return tuple(-(abs(v) if v is not None and not math.isnan(v) else 0.0)
                         for v in (tp.metric(m, "log_ratio_abs_max"), tp.metric(m, "grad_norm"), tp.metric(m, "policy_loss"))) + (-s,)
        quoted = min(recent, key=weight)
        keys = [k for k in QUOTED if tp.metric(records[quoted].metrics, k) is not None]
        evidence.append(Evidence(source=records[quoted].source, line=records[quoted].line, summary=True,
                                 text=quote(f"step {quoted}: " + ", ".join(
                                     f"{k}={tp.metric(records[quoted].metrics, k):.4g}" for k in keys))))
    obs.add(DynamicsMeasured(
        fact_id="dynamics", evidence=tuple(evidence), steps=len(steps), window=len(window), recent_window=len(recent),
        nan_metrics=",".join(nan_metrics) or None,
        log_ratio_abs_max=_max(full["log_ratio_abs_max"]), policy_loss_abs_max=_max(full["policy_loss"], True),
        grad_norm_max=_max(full["grad_norm"]),
        recent_log_ratio_abs_max=_max(series("log_ratio_abs_max", recent)),
        recent_policy_loss_abs_max=_max(series("policy_loss", recent), True),
        recent_grad_norm_max=_max(series("grad_norm", recent)),
        log_ratio_onset_step=onset_step(window, [tp.metric(records[s].metrics, "log_ratio_abs_max") for s in window], share),
        policy_loss_onset_step=onset_step(window, [tp.metric(records[s].metrics, "policy_loss") for s in window], share),
        grad_norm_onset_step=onset_step(window, [tp.metric(records[s].metrics, "grad_norm") for s in window], share),
        tis_imp_ratio_mean=imp[-1] if imp else None,
        reward_first=rewards[0] if rewards else None, reward_last=rewards[-1] if rewards else None,
        reward_range=(max(rewards) - min(rewards)) if rewards else None,
        reward_points=len(rewards), use_tis=read.use_tis))
    if window:
        obs.metric_window = {"first_step": window[0], "last_step": window[-1], "steps": len(window),
                             "recent_first_step": recent[0],
                             "series": {k: [round(x, 4) for x in v[-10:]] for k, v in full.items() if v}}
        obs.phase_table = span_table(step_rows([records[s].metrics for s in window]))
    elif read.phase_costs:
        # phase timers of the trainer log: one list per phase, not per step (no tree to place them in);
        # a garbled (non-finite) duration is no duration
        costs = {k: f for k, v in read.phase_costs.items() if (f := finite(v))}
        obs.phase_table = [{"phase": k, "within": None, "declared": False, "median_s": round(median(v), 2),
                            "mean_s": round(sum(v) / len(v), 2), "last_s": round(v[-1], 2), "n": len(v),
                            "share_of_within": None}
                           for k, v in sorted(costs.items())]
