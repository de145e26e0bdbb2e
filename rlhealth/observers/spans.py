"""The step-time phase table as a containment tree of ``timing/*`` spans.

A trainer's spans nest: ``policy_train`` runs inside ``train_critic_and_policy``, which in the
asynchronous trainer runs inside ``run_training``, inside ``step``. Each span is measured against
the nearest container the run recorded (``within``), so siblings sum toward their container and
nothing is charged to the step twice. The ``unattributed`` row is the part of a step no direct
child covers; where the direct children sum past the step (a child run alongside it rather than
inside it) an ``overlap`` row carries the excess and has no share. Spans that run between steps
(checkpoints, evaluation) have no container and no share; a span the tree does not declare is
listed without one.
"""
from __future__ import annotations

from math import fsum

import math
from statistics import median

STEP = "step"

CONTAINERS: dict[str, str | None] = {
    "step": None,
    "generate": "step",
    "wait_for_generation_buffer": "step",
    "postprocess_generator_output": "step",
    "postprocess_trajectory_batch": "step",
    "convert_to_training_input": "step",
    "run_training": "step",
    "fwd_logprobs_values_reward": "run_training",
    "apply_reward_kl_penalty": "run_training",
    "compute_advantages_and_returns": "run_training",
    "dump_data_batch": "run_training",
    "train_critic_and_policy": "run_training",
    "critic_train": "train_critic_and_policy",
    "policy_train": "train_critic_and_policy",
    "policy_critic_overlap_train": "train_critic_and_policy",
    "sync_weights": "step",
    "offload_policy_model_to_cpu": "step",
    "init_weight_sync_state": None,
    "save_checkpoints": None,
    "cleanup_old_checkpoints": "save_checkpoints",
    "save_hf_model": None,
    "eval": None,
    "update_ref_with_policy": None,
}
"""Which span contains which (SkyRL's trainers, the deepest tree among them); ``None``: no span
contains it. A span whose container a run did not record resolves to the nearest one it did."""


def container(name: str, recorded: set[str]) -> str | None:
    parent = CONTAINERS[name]
    while parent is not None and parent not in recorded:
        parent = CONTAINERS[parent]
    return parent


def _r(x: float | None) -> float | None:
    return round(x, 2) if x is not None else None


def span_table(steps: list[dict[str, float]]) -> list[dict]:
    """Rows of the phase table from per-step ``{span: seconds}`` (finite values only; a span
    absent from a step did not run on it). Without a ``step`` span: every span flat, no shares."""
    recorded = {k for row in steps for k in row}
    values = {k: [row[k] for row in steps if k in row] for k in recorded}

    def mean(name: str) -> float:
        return fsum(values[name]) / len(values[name])

    def row(name: str, within: str | None, share: float | None) -> dict:
        v = values[name]
        return {"phase": name, "within": within, "declared": name in CONTAINERS, "median_s": _r(median(v)),
                "mean_s": _r(mean(name)), "last_s": _r(v[-1]), "n": len(v),
                "share_of_within": round(share, 3) if share is not None else None}

    def share(name: str, parent: str) -> float | None:
        # a step on which the span did not run is one on which it took no time: the children and
        # the remainder of a container then sum to it
        parts = [r.get(name, 0.0) / r[parent] for r in steps if r.get(parent, 0.0) > 0]
        return fsum(parts) / len(parts) if parts else None

    if STEP not in recorded:
        return [row(k, None, None) for k in sorted(recorded)]
    children: dict[str | None, list[str]] = {}
    for name in recorded & set(CONTAINERS):
        if name != STEP:
            children.setdefault(container(name, recorded), []).append(name)
    for siblings in children.values():
        siblings.sort(key=lambda n: (-mean(n), n))
    rows = [row(STEP, None, None)]

    def subtree(parent: str) -> None:
        for child in children.get(parent, []):
            rows.append(row(child, parent, share(child, parent)))
            subtree(child)

    subtree(STEP)
    direct = children.get(STEP, [])
    timed = [r for r in steps if STEP in r]
    rest = [r[STEP] - fsum(r.get(c, 0.0) for c in direct) for r in timed]
    mean_rest = fsum(rest) / len(rest)
    remainder = {"within": STEP, "declared": True, "median_s": None, "last_s": None, "n": len(rest)}
    if mean_rest < 0:
        rows.append({"phase": "overlap", **remainder, "mean_s": _r(-mean_rest), "share_of_within": None})
    else:
        parts = [x / r[STEP] for x, r in zip(rest, timed) if r[STEP] > 0]
        rows.append({"phase": "unattributed", **remainder, "mean_s": _r(mean_rest),
                     "share_of_within": round(fsum(parts) / len(parts), 3) if parts else None})
    for root in children.get(None, []):
        rows.append(row(root, None, None))
        subtree(root)
    for name in sorted(recorded - set(CONTAINERS), key=lambda n: (-mean(n), n)):
        rows.append(row(name, None, None))
    return rows


def step_rows(metrics_by_step: list[dict]) -> list[dict[str, float]]:
    """Per-step ``{span: seconds}`` from metric records (``timing/<span>``, finite numbers)."""
    out = []
    for metrics in metrics_by_step:
        out.append({k[7:]: float(v) for k, v in metrics.items()
                    if k.startswith("timing/") and isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v)})
    return out


def stacked_parts(steps: list[dict[str, float]]) -> dict[str, list[float | None]]:
    """The step's direct children per step plus its ``unattributed`` remainder (what stacks to the
    step without counting a nested span twice); empty without a ``step`` span."""
    recorded = {k for row in steps for k in row}
    if STEP not in recorded:
        return {}
    direct = sorted(n for n in recorded & set(CONTAINERS) if n != STEP and container(n, recorded) == STEP)
    parts: dict[str, list[float | None]] = {n: [r.get(n) for r in steps] for n in direct}
    parts["unattributed"] = [max(0.0, r[STEP] - fsum(r.get(n, 0.0) for n in direct)) if STEP in r else None
                             for r in steps]
    return parts
