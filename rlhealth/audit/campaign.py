"""The campaign record (``--campaign FILE``, YAML or JSON): the operator's authority and destinations.

Seed 002 "Authority" and "Inputs": destinations, registration policy and reclaim authority come
from current records and are never invented. Recognised keys (all optional)::

    model_repo: <namespace>/<model>          # published model destination (Hugging Face model repo)
    trace_dataset: <namespace>/<dataset>     # companion trace dataset (Hugging Face dataset repo)
    selection_policy: ema-reward:alpha=1/3   # the declared selection rule (--policy overrides it)
    base_model: <org>/<model>                # lineage, reported as recorded
    tracker_url: https://...                 # preserved tracker URL
    registration: {authorized: true|false, result: "<what the operator recorded>"}
    reclaim: {authorized: true|false, reclaimed: ["<location>", ...]}

The audit only reports what the record says (registration results, reclaimed storage); it never
registers, deletes or reclaims anything.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlhealth.audit.safefs import Root

KNOWN = {"model_repo", "trace_dataset", "selection_policy", "base_model", "tracker_url", "registration", "reclaim"}
REPO_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")


@dataclass
class Campaign:
    source: str | None = None
    model_repo: str | None = None
    trace_dataset: str | None = None
    selection_policy: str | None = None
    base_model: str | None = None
    tracker_url: str | None = None
    registration_authorized: bool = False
    registration_result: str | None = None
    reclaim_authorized: bool = False
    reclaimed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _str(doc: dict, key: str, problems: list[str], repo: bool = False) -> str | None:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip():
        problems.append(f"campaign record: {key} is not a non-empty string; ignored")
        return None
    if repo and not REPO_ID.match(v.strip()):
        problems.append(f"campaign record: {key}={v!r} is not a <namespace>/<name> repository id; ignored")
        return None
    return v.strip()


def _authority(doc: dict, key: str, problems: list[str]) -> dict:
    v = doc.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict) or not isinstance(v.get("authorized", False), bool):
        problems.append(f"campaign record: {key} must be a mapping with a boolean 'authorized'; treated as not authorized")
        return {}
    return v


def load_campaign(path: Path | None) -> Campaign:
    c = Campaign()
    if path is None:
        return c
    root = Root("campaign", path.parent)
    c.source = root.display(path)
    text = root.read_text(path, limit=1 << 20) if root.is_file(path) else None
    if text is None:
        c.problems.append(f"{c.source}: not a readable regular file")
        return c
    try:
        doc = json.loads(text) if path.name.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        c.problems.append(f"{c.source}: does not parse")
        return c
    if not isinstance(doc, dict):
        c.problems.append(f"{c.source}: not a mapping")
        return c
    unknown = sorted(set(map(str, doc)) - KNOWN)
    if unknown:
        c.problems.append(f"campaign record: unknown key(s) {', '.join(unknown)} ignored")
    c.model_repo = _str(doc, "model_repo", c.problems, repo=True)
    c.trace_dataset = _str(doc, "trace_dataset", c.problems, repo=True)
    c.selection_policy = _str(doc, "selection_policy", c.problems)
    c.base_model = _str(doc, "base_model", c.problems)
    c.tracker_url = _str(doc, "tracker_url", c.problems)
    reg = _authority(doc, "registration", c.problems)
    c.registration_authorized = bool(reg.get("authorized", False))
    c.registration_result = _str(reg, "result", c.problems) if reg else None
    rec = _authority(doc, "reclaim", c.problems)
    c.reclaim_authorized = bool(rec.get("authorized", False))
    reclaimed = rec.get("reclaimed") if rec else None
    if isinstance(reclaimed, list):
        c.reclaimed = [str(x) for x in reclaimed if isinstance(x, (str, int, float))]
    elif reclaimed is not None:
        c.problems.append("campaign record: reclaim.reclaimed must be a list of locations; ignored")
    return c
