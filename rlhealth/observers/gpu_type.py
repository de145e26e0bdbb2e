"""gpu_type: the GPU type from every place the evidence names it, with where each was read.

Sources (kinds, rules/sets.yaml ``gpu_source_precedence``): nvidia-smi product names (the capture's
raw GPU inventories, nvidia-smi lines in logs), the GPU product labels of the job's pods / nodes,
the live probe's job.json, the launch configuration's words, the dispatcher's ``--gpu``. Names map
to hardware classes through rules/tables/gpu_names.csv. The job's GPU is the first kind in the
precedence that names one; the device kinds (``gpu_device_sources``) naming different classes is
measured as a disagreement, which the rule base judges.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rlhealth.facts import Evidence, GpuTypeMeasured
from rlhealth.observers.base import Observation, capture_rel, summary
from rlhealth.probes.parse.nvidia_smi import gpu_class, gpu_class_or_none
from rlhealth.probes.textio import quote

GPU_WORD_RE = re.compile(r"\b(GH200|GB200|H200|B200|H100|A100)\b")
KIND_LABELS = {"nvidia_smi": "nvidia-smi", "node_label": "node label", "job_json": "job.json",
               "launch_config": "launch configuration", "given": "given (--gpu)"}


@dataclass(frozen=True)
class Sighting:
    kind: str
    name: str
    gpu: str
    where: str
    evidence: Evidence

    def describe(self) -> str:
        return f"{KIND_LABELS.get(self.kind, self.kind)} '{self.name}' at {self.where}"


def sightings(obs: Observation, config_parts: list[tuple[str, str, str]], given=None) -> list[Sighting]:
    """Every place the evidence names the GPU, in reading order within a kind."""
    read = obs.read
    out: list[Sighting] = []
    for kind, name, occ in read.gpu_names:
        out.append(Sighting(kind, name, gpu_class(name), f"{occ.source}:{occ.line}",
                            Evidence(source=occ.source, line=occ.line, text=quote(occ.text, occ.at))))
    info = read.job_info if isinstance(read.job_info, dict) else {}
    hardware = info.get("hardware") if isinstance(info.get("hardware"), dict) else {}
    if isinstance(hardware.get("gpu"), str) and hardware["gpu"].strip():
        name = hardware["gpu"].strip()
        sources = info.get("sources") if isinstance(info.get("sources"), dict) else {}
        rel = f"{capture_rel(read)}/job.json"
        read_from = f" (read from {sources['hardware.gpu']})" if isinstance(sources.get("hardware.gpu"), str) else ""
        out.append(Sighting("job_json", name, gpu_class_or_none(name) or name, f"{rel} hardware.gpu{read_from}",
                            summary(rel, f'"hardware": {{"gpu": "{name}"}}{read_from}')))
    for text, where, rel in config_parts:
        m = GPU_WORD_RE.search(text)
        if m:
            out.append(Sighting("launch_config", m.group(1), gpu_class(m.group(1)), where,
                                summary(rel, f"GPU named in the launch configuration ({where}): {m.group(1)}")))
            break
    if given is not None and getattr(given, "gpu", None):
        out.append(Sighting("given", given.gpu, gpu_class(given.gpu), "given (--gpu)",
                            Evidence(source="given", text=quote(f"--gpu {given.gpu}"), summary=True)))
    return out


def observe(obs: Observation, found: list[Sighting]) -> dict:
    """Adds the gpu_type measurement; returns the job's GPU fields (gpu, gpu_source, gpu_classes,
    gpu_disagreement) for the job measurement."""
    sets = obs.catalog.sets
    precedence = list(sets.get("gpu_source_precedence") or [])
    device = set(sets.get("gpu_device_sources") or [])
    ranked = sorted(found, key=lambda s: precedence.index(s.kind) if s.kind in precedence else len(precedence))
    if not ranked:
        return {"gpu": None, "gpu_source": None, "gpu_classes": None, "gpu_disagreement": None}
    chosen = ranked[0]
    device_classes = sorted({s.gpu for s in found if s.kind in device})
    disagreement = None
    if len(device_classes) > 1:
        first_by_class = {}
        for s in ranked:
            if s.kind in device:
                first_by_class.setdefault(s.gpu, s)
        disagreement = "; ".join(f"{first_by_class[c].describe()} names {c}" for c in device_classes)
    evidence, seen = [], set()
    for s in ranked:
        if (s.kind, s.gpu) not in seen and len(evidence) < 4:
            seen.add((s.kind, s.gpu))
            evidence.append(s.evidence)
    obs.add(GpuTypeMeasured(
        fact_id="gpu_type", evidence=tuple(evidence), gpu=chosen.gpu, source_kind=chosen.kind,
        source=chosen.describe(), kinds_named=len({s.kind for s in found}), device_classes=len(device_classes),
        classes=", ".join(device_classes) or None, disagreement=disagreement))
    return {"gpu": chosen.gpu, "gpu_source": chosen.describe(),
            "gpu_classes": ",".join(device_classes) if disagreement else None, "gpu_disagreement": disagreement}
