"""identity: what job was judged -- model and its class (dense / MoE, total and active parameters),
GPU type, engine geometry (engines x TP / EP), stage (bring-up, inference, training) -- each with
where it was read (a ``file:line`` of the evidence, a configuration source, or ``given``), and the
dispatcher's given ``--model`` / ``--gpu`` beside what was observed.

The observer measures (the class from the parameter counts, the ratio of given to observed
parameters, the GPU class each names); whether a given input contradicts the evidence is judged by
the rule base (``identity.given_*`` in rules/rulesets/evidence.yaml).
"""
from __future__ import annotations

import math
import re

from rlhealth.facts import Evidence, IdentityMeasured
from rlhealth.observers.base import Observation, locate
from rlhealth.probes.parse.launch import PARAMS
from rlhealth.probes.parse.nvidia_smi import gpu_class
from rlhealth.probes.textio import quote

# engine geometry settings (a key's value, in the launch configuration as key=value or "key": value)
TP_RE = re.compile(r"inference_engine_tensor_parallel_size[\"'\\]*\s*[=:]\s*[\"'\\]*(\d{1,4})\b")
EP_RE = re.compile(r"inference_engine_expert_parallel_size[\"'\\]*\s*[=:]\s*[\"'\\]*(\d{1,4})\b")
INFERENCE_TP_RE = re.compile(r"\"inference_tp\"\s*:\s*(\d{1,4})\b")


def params_of(name: str | None) -> tuple[float | None, float | None]:
    """(total, active) billions from a model name (``Qwen3-8B`` -> 8, 8; ``Qwen3-30B-A3B`` -> 30, 3)."""
    m = PARAMS.search(name or "")
    if not m:
        return None, None
    total = float(m.group(1))
    return total, float(m.group(2)) if m.group(2) else total


def model_class(total: float | None, active: float | None) -> str | None:
    """``MoE`` when fewer parameters are active per token than the model has, else ``dense``."""
    if total is None or active is None:
        return None
    return "MoE" if active < total else "dense"


def _stage(obs: Observation) -> tuple[str | None, str | None, Evidence | None]:
    """bring-up before the first completed step; after it, inference while a rollout phase
    (rules/sets.yaml ``stage_inference_phases``) is open, else training."""
    trainer = next((f for f in obs.facts if f.kind == "trainer"), None)
    if trainer is None or trainer.trainer_lines + trainer.launch_lines == 0:
        return None, None, None
    if trainer.steps_completed < 1:
        return "bring-up", f"trainer progress: {trainer.steps_completed} completed steps", None
    inference = set(obs.catalog.sets.get("stage_inference_phases") or [])
    phase = trainer.open_phase
    occ = obs.read.phases_open.get(phase) if phase else None
    if phase and occ is not None:
        stage = "inference" if phase in inference else "training"
        return stage, f"{occ.source}:{occ.line} (phase {phase} open)", Evidence(source=occ.source, line=occ.line, text=quote(occ.text))
    last = obs.last_progress
    if last is not None:
        return "training", f"{last.source}:{last.line} ({trainer.steps_completed} completed steps)", \
            Evidence(source=last.source, line=last.line, text=quote(last.text))
    return "training", f"trainer progress: {trainer.steps_completed} completed steps", None


def observe(obs: Observation, given=None) -> None:
    job = obs.job or {}
    seen = obs.model_observed or {}
    name = seen.get("name")
    evidence: list[Evidence] = []
    total, active = seen.get("total_params_b"), seen.get("active_params_b")
    name_total, name_active = params_of(name)
    params_source = seen.get("source")
    if total is None and name_total is not None and (active is None or abs(active - name_active) < 1e-9):
        total, active = name_total, name_active
        params_source = "model name"
    model_source = seen.get("source")
    if name:
        found = locate(obs, re.compile(re.escape(name)))
        if found is not None:
            rel, line, text, _ = found
            model_source = f"{rel}:{line}"
            evidence.append(Evidence(source=rel, line=line, text=quote(text)))
        elif model_source and model_source.startswith("vLLM engine init line "):
            model_source = model_source[len("vLLM engine init line "):]
    gpu_observed = job.get("gpu") if job.get("gpu_source") and not str(job.get("gpu_source")).startswith("given") else None
    configured = next((f for f in obs.facts if f.kind == "engines_configured"), None)
    engines = configured.expected if configured is not None else job.get("num_inference_engines")
    tp = ep = None
    geometry_sources = [configured.source] if configured is not None else []
    placement = (obs.read.job_info or {}).get("placement") if isinstance(obs.read.job_info, dict) else None
    for key, rx in (("tp", TP_RE), ("ep", EP_RE)):
        found = locate(obs, rx)
        if found is None and key == "tp" and isinstance(placement, dict) and placement.get("inference_tp"):
            found = locate(obs, INFERENCE_TP_RE)
        if found is not None:
            rel, line, text, m = found
            value = int(m.group(1))
            tp, ep = (value, ep) if key == "tp" else (tp, value)
            if f"{rel}:{line}" not in geometry_sources:
                geometry_sources.append(f"{rel}:{line}")
    geometry = None
    if engines:
        split = "/".join(x for x in (f"TP{tp}" if tp else None, f"EP{ep}" if ep else None) if x)
        geometry = f"{engines} engine{'s' if engines != 1 else ''} x {split}" if split else \
            f"{engines} engine{'s' if engines != 1 else ''} (TP/EP not stated)"
    stage, stage_source, stage_ev = _stage(obs)
    if stage_ev is not None:
        evidence.append(stage_ev)
    g_model = getattr(given, "model", None) if given is not None else None
    g_total = g_active = None
    if g_model is not None:
        g_total, g_active = g_model.total_params_b, g_model.active_params_b
        if g_total is None:
            g_total, g_active = params_of(g_model.name)
    g_gpu = getattr(given, "gpu", None) if given is not None else None

    def ratio(a, b):
        if not a or not b:
            return None
        r = max(a / b, b / a)
        return round(r, 3) if math.isfinite(r) else None
    fact = IdentityMeasured(
        fact_id="identity", evidence=tuple(evidence), model=name, model_source=model_source,
        model_class=model_class(total, active), total_params_b=total, active_params_b=active,
        params_source=params_source, gpu=gpu_observed, gpu_source=job.get("gpu_source") if gpu_observed else None,
        engines=engines, tp=tp, ep=ep, geometry=geometry, geometry_source=", ".join(geometry_sources) or None,
        stage=stage, stage_source=stage_source,
        given_model=g_model.name if g_model is not None else None, given_class=model_class(g_total, g_active),
        given_total_params_b=g_total, given_active_params_b=g_active,
        active_params_ratio=ratio(g_active, active), total_params_ratio=ratio(g_total, total),
        given_gpu=g_gpu, given_gpu_class=gpu_class(g_gpu) if g_gpu else None)
    obs.add(fact)
    obs.identity = {
        "model": name or (g_model.name if g_model is not None else None),
        "model_source": model_source if name else ("given (--model)" if g_model is not None else None),
        "model_class": fact.model_class or (fact.given_class if not name else None),
        "total_params_b": total if name else g_total, "active_params_b": active if name else g_active,
        "params_source": params_source if name else ("given (--model)" if g_model is not None else None),
        "gpu": job.get("gpu"), "gpu_source": job.get("gpu_source"),
        "engines": engines, "tp": tp, "ep": ep, "geometry": geometry, "geometry_source": fact.geometry_source,
        "engines_source": configured.source if configured is not None else None,
        "stage": stage, "stage_source": stage_source, "conflicts": []}
