"""Declared checkpoint-selection policies.

Grammar (``--policy``)::

    POLICY  := NAME [":" PARAM ("," PARAM)*]
    PARAM   := KEY "=" VALUE            VALUE := integer | decimal | integer "/" integer | metric key

Policies:
  ema-reward   trailing EMA of a reward metric (reference marin-artifacts §6.5). Parameters:
               alpha (default 1/3, 0 < alpha <= 1), save_every (default: the run's ckpt_interval,
               else 20), min_step (default 2*save_every), metric (default reward/avg_raw_reward).
               EMA_1 = r_1, EMA_n = alpha*r_n + (1-alpha)*EMA_(n-1) over every step with the metric,
               in step order (first occurrence of a step across the restart chain wins). Eligible
               steps: multiples of save_every, >= min_step, <= latest_ckpt_global_step, carrying a
               valid saved artifact (an export when exports exist), with a metric value. The
               eligible step with the maximum EMA wins (ties: the earlier step).
  last-valid   the highest step carrying a valid saved artifact. No parameters.
  fixed        a declared step: ``fixed:step=N``; chosen only if step N has a valid artifact.

Anything else is a usage error. With no policy, nothing is selected ("unresolved").
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from rlhealth.probes.parse import COUNT

DEFAULT_METRIC = "reward/avg_raw_reward"
NAMES = ("ema-reward", "last-valid", "fixed")


class PolicyError(ValueError):
    pass


@dataclass
class Policy:
    name: str
    params: dict = field(default_factory=dict)
    text: str = ""


def _number(key: str, v: str) -> float:
    try:
        if re.fullmatch(r"\d+/\d+", v):
            return float(Fraction(v))
        return float(v)
    except (ValueError, ZeroDivisionError) as exc:
        raise PolicyError(f"{key}={v!r} is not a number or fraction") from exc


def parse_policy(text: str | None) -> Policy | None:
    if text is None:
        return None
    t = text.strip()
    name, _, rest = t.partition(":")
    name = name.strip().lower()
    if name not in NAMES:
        raise PolicyError(f"unknown policy {name!r}; known: {', '.join(NAMES)} (e.g. ema-reward:alpha=1/3)")
    params: dict = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise PolicyError(f"policy parameter {part!r} is not KEY=VALUE")
        params[key] = value
    allowed = {"ema-reward": {"alpha", "save_every", "min_step", "metric"}, "last-valid": set(), "fixed": {"step"}}[name]
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise PolicyError(f"policy {name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed)) or 'none'}")
    out: dict = {}
    if name == "ema-reward":
        alpha = _number("alpha", params.get("alpha", "1/3"))
        if not 0 < alpha <= 1:
            raise PolicyError("alpha must be in (0, 1]")
        out["alpha"] = alpha
        out["alpha_text"] = params.get("alpha", "1/3")
        for k in ("save_every", "min_step"):
            if k in params:
                if not re.fullmatch(COUNT, params[k]) or (k == "save_every" and int(params[k]) == 0):
                    raise PolicyError(f"{k} must be a positive integer")
                out[k] = int(params[k])
        out["metric"] = params.get("metric", DEFAULT_METRIC)
    elif name == "fixed":
        if "step" not in params or not re.fullmatch(COUNT, params["step"]):
            raise PolicyError("fixed needs step=<integer>")
        out["step"] = int(params["step"])
    return Policy(name, out, t)


def ema_series(rewards: list[tuple[int, float]], alpha: float) -> dict[int, float]:
    ema: dict[int, float] = {}
    prev = None
    for step, r in sorted(rewards):
        prev = r if prev is None else alpha * r + (1 - alpha) * prev
        ema[step] = prev
    return ema


def select(policy: Policy, valid_steps: set[int], metrics: dict[int, dict], latest: int | None,
           default_save_every: int | None) -> dict:
    """Apply ``policy``; returns {status, step|None, rationale, table, save_every?, metric?}."""
    if policy.name == "last-valid":
        if not valid_steps:
            return {"status": "no-eligible-step", "step": None, "rationale": "no valid saved artifact", "table": []}
        s = max(valid_steps)
        return {"status": "selected", "step": s, "rationale": f"highest step with a valid saved artifact: {s}", "table": []}
    if policy.name == "fixed":
        s = policy.params["step"]
        if s in valid_steps:
            return {"status": "selected", "step": s, "rationale": f"declared step {s} has a valid saved artifact", "table": []}
        return {"status": "no-eligible-step", "step": None, "table": [],
                "rationale": f"declared step {s} has no valid saved artifact (valid: {sorted(valid_steps) or 'none'})"}
    # ema-reward
    alpha, metric = policy.params["alpha"], policy.params["metric"]
    save_every = policy.params.get("save_every") or default_save_every or 20
    min_step = policy.params.get("min_step", 2 * save_every)
    rewards = []
    bad = []
    for step in sorted(metrics):
        v = metrics[step].get(metric)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            bad.append(step)
            continue
        rewards.append((step, float(v)))
    ema = ema_series(rewards, alpha)
    reward_of = dict(rewards)
    table = []
    best = None
    for step in sorted(set(ema) | set(valid_steps)):
        reasons = []
        if step % save_every:
            reasons.append(f"not a multiple of save_every={save_every}")
        if step < min_step:
            reasons.append(f"below min_step={min_step}")
        if latest is not None and step > latest:
            reasons.append(f"above latest_ckpt_global_step={latest}")
        if step not in valid_steps:
            reasons.append("no valid saved artifact")
        if step not in ema:
            reasons.append(f"no {metric} value")
        eligible = not reasons
        if step in valid_steps or eligible or step % save_every == 0:
            table.append({"step": step, "reward": reward_of.get(step), "ema": None if step not in ema else round(ema[step], 6),
                          "eligible": eligible, "reason": "; ".join(reasons)})
        if eligible and (best is None or ema[step] > ema[best]):
            best = step
    base = {"table": table, "save_every": save_every, "min_step": min_step, "metric": metric,
            "non_numeric_steps": bad}
    if bad:
        return {**base, "status": "no-eligible-step", "step": None,
                "rationale": f"{metric} is not numeric at step(s) {bad[:5]}; the EMA is undefined (§6.5 raises ValueError)"}
    if best is None:
        return {**base, "status": "no-eligible-step", "step": None, "rationale": "NO STEP CHOSEN: no eligible step"}
    return {**base, "status": "selected", "step": best,
            "rationale": f"CHOSEN STEP: {best} (max EMA {ema[best]:.6f} of {metric}, alpha={policy.params['alpha_text']}, "
                         f"over {len(rewards)} metric step(s); eligible = multiples of {save_every}, >= {min_step}"
                         + (f", <= latest {latest}" if latest is not None else "") + ", valid artifact)"}
