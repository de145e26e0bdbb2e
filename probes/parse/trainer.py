"""Trainer-log parsers: metric records, step progress, phase timers, buffers.

Every serialization of the SkyRL / MarinSkyRL trainer (marin-artifacts §2, log-formats §8.1):
``WANDB_MIRROR kind=train step=N metrics={json}`` (current), legacy python-dict blocks
(``{'async/...': ..., 'trainer/global_step': N}``, possibly pprint-wrapped over many
lines, floats quoted), ``Training Step Progress: N / M``, SkyRL ``Timer`` lines
(``Started: 'phase'`` / ``Finished: 'phase', time cost: 12.3s``), and the generation-buffer
bar. These functions take one already-matched line; they never scan files themselves.
"""
from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from rlhealth.probes.parse import COUNT, DECIMAL, read_count

WANDB_RE = re.compile(rf"WANDB_MIRROR\s+kind=(?P<kind>\S+)\s+step=(?P<step>{COUNT})\s+metrics=(?P<payload>.*)$")
STEP_PROGRESS_RE = re.compile(rf"Training Step Progress:\s*({COUNT})\s*/\s*({COUNT})")
STEP_PROGRESS_TQDM_RE = re.compile(rf"Training Step Progress:\s*\d+%\|[^|]*\|\s*({COUNT})/({COUNT})")
PHASE_RE = re.compile(rf"\b(Started|Finished): '(?P<phase>[A-Za-z0-9_./-]+)'(?:, time cost: (?P<cost>{DECIMAL})s)?")
GEN_BUFFER_RE = re.compile(rf"Generation Buffer Progress:\s*(?:\d+%\|[^|]*\|\s*)?({COUNT})\s*/\s*({COUNT})")
DICT_END_RE = re.compile(rf"'trainer/global_step':\s*({COUNT})\s*,?\s*\}}")
BATCH_COMPLETE_RE = re.compile(
    rf"Batch generation complete: ({COUNT})/({COUNT}) successful, ({COUNT}) failed instances, ({COUNT}) masked")
EXC_BREAKDOWN_RE = re.compile(r"Exception breakdown: (\{.*\})")
USE_TIS_RE = re.compile(r"(?:\btrainer\.algorithm\.use_tis\s*=|\buse_tis[\"']?\s*[:=])\s*(true|false)\b", re.I)
RESUMED_RE = re.compile(rf"Resumed training from global_step ({COUNT})")

# Semantic metric names: alias lists in priority order (marin-artifacts §2.4).
METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    "reward": ("reward/avg_raw_reward", "loss/avg_final_rewards"),
    "entropy": ("policy/policy_entropy", "policy_entropy"),
    "policy_loss": ("policy/policy_loss", "policy_loss", "policy/final_loss"),
    "grad_norm": ("policy/raw_grad_norm", "raw_grad_norm", "policy/grad_norm", "grad_norm"),
    "tis_exact_match": ("generate/tis/exact_match_fraction", "tis/exact_match_fraction", "policy/tis/exact_match_fraction"),
    "tis_log_ratio_abs_mean": ("policy/tis/log_ratio_abs_mean", "tis/log_ratio_abs_mean"),
    "tis_imp_ratio_mean": ("policy/tis/imp_ratio_mean", "tis/imp_ratio_mean"),
    "log_ratio_abs_max": ("policy/log_ratio_abs_max", "log_ratio_abs_max"),
    "gen_avg_tokens": ("generate/avg_num_tokens",),
    "step_time_s": ("timing/step",),
}

_READ_METRIC_KEYS = frozenset(k for aliases in METRIC_ALIASES.values() for k in aliases) | {"trainer/global_step"}
_PASS_AT_RE = re.compile(r"reward/avg_pass_at_\d+")


def diagnosis_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics of a record that a diagnosis reads, in record order: every alias of
    ``METRIC_ALIASES`` (what ``metric`` looks up), the ``reward/avg_pass_at_N`` fallback,
    ``timing/*`` phase durations and the step. A record keeps these instead of its whole payload
    (often hundreds of metrics), so memory per step stays bounded."""
    return {k: v for k, v in metrics.items() if k in _READ_METRIC_KEYS or k.startswith("timing/") or _PASS_AT_RE.fullmatch(k)}


class MetricRecord(BaseModel):
    """One training-step metric record, with where it was read."""
    model_config = ConfigDict(frozen=True)
    step: int
    metrics: dict[str, float]
    source: str
    line: int
    ts: float | None = None
    serialization: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def numeric_metrics(payload: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in payload.items():
        num = _number(value)
        if num is not None:
            out[str(key)] = num
    return out


def wandb_mirror_payload(text: str) -> tuple[str, int, dict[str, Any] | None] | None:
    """``(kind, step, payload)`` of a WANDB_MIRROR line, the payload as written (values not yet
    made numbers); payload None if it is not a JSON object."""
    m = WANDB_RE.search(text)
    if not m:
        return None
    kind, step = m.group("kind"), int(m.group("step"))
    try:
        payload = json.loads(m.group("payload").strip())
    except ValueError:
        return kind, step, None
    if not isinstance(payload, dict):
        return kind, step, None
    return kind, step, payload


def parse_wandb_mirror(text: str) -> tuple[str, int, dict[str, float] | None] | None:
    """``(kind, step, metrics)`` of a WANDB_MIRROR line; metrics None if the payload is malformed."""
    found = wandb_mirror_payload(text)
    if found is None or found[2] is None:
        return found
    kind, step, payload = found
    metrics = numeric_metrics(payload)
    metrics.setdefault("trainer/global_step", float(step))
    return kind, step, metrics


def parse_dict_block(block_text: str) -> dict[str, float] | None:
    """Parse a legacy python-dict metrics block (single quotes, quoted floats)."""
    payload = dict_block_payload(block_text)
    if payload is None:
        return None
    metrics = numeric_metrics(payload)
    if "trainer/global_step" in metrics and read_count(metrics["trainer/global_step"]) is None:
        return None     # a step of 1e999, NaN or thousands of digits: no record
    return metrics


def dict_block_payload(block_text: str) -> dict[str, Any] | None:
    """The payload of a legacy python-dict metrics block as written (values not yet made
    numbers); None if the block does not parse or carries no ``trainer/global_step``."""
    start = block_text.rfind("{'")
    if start < 0:
        return None
    body = block_text[start:]
    end = body.rfind("}")
    body = body[: end + 1]
    # strip Ray actor prefixes and loguru prefixes from continuation lines
    lines = [re.sub(r"^\s*\([^)]{1,200}\)\s?", "", ln) for ln in body.splitlines()]
    body = " ".join(ln.strip() for ln in lines)
    try:
        payload = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            payload = json.loads(re.sub(r",\s*}", "}", body.replace("'", '"')))
        except ValueError:
            return None
    if not isinstance(payload, dict) or "trainer/global_step" not in payload:
        return None
    return payload


def metric(record_metrics: dict[str, float], name: str) -> float | None:
    """The value of a semantic metric (first alias present), ignoring NaN/inf."""
    for key in METRIC_ALIASES.get(name, (name,)):
        if key in record_metrics:
            value = record_metrics[key]
            if value is None or (isinstance(value, float) and math.isnan(value)):
                return float("nan")
            return value
    if name == "reward":
        for key, value in record_metrics.items():
            if re.fullmatch(r"reward/avg_pass_at_\d+", key):
                return value
    return None


def parse_step_progress(text: str) -> tuple[int, int] | None:
    m = STEP_PROGRESS_RE.search(text) or STEP_PROGRESS_TQDM_RE.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_phase(text: str) -> tuple[str, str, float | None] | None:
    """``("Started"|"Finished", phase, cost_s)``."""
    m = PHASE_RE.search(text)
    if not m:
        return None
    cost = m.group("cost")
    return m.group(1), m.group("phase"), float(cost) if cost else None


def parse_gen_buffer(text: str) -> tuple[int, int] | None:
    m = GEN_BUFFER_RE.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_batch_complete(text: str) -> dict[str, int] | None:
    m = BATCH_COMPLETE_RE.search(text)
    if not m:
        return None
    ok, total, failed, masked = (int(g) for g in m.groups())
    return {"successful": ok, "total": total, "failed": failed, "masked": masked}


def parse_exception_breakdown(text: str) -> dict[str, int] | None:
    m = EXC_BREAKDOWN_RE.search(text)
    if not m:
        return None
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return {str(k): int(v) for k, v in value.items()
            if isinstance(v, int) or (isinstance(v, float) and math.isfinite(v))}    # 1e999, nan: no count


def parse_use_tis(text: str) -> bool | None:
    m = None
    for m in USE_TIS_RE.finditer(text):
        pass
    return None if m is None else m.group(1).lower() == "true"
