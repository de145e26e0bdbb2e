"""The audit's knowledge as data: ``rules/audit.yaml`` through the installed package."""
from __future__ import annotations

from functools import lru_cache

from rlhealth.packaged import packaged_yaml


@lru_cache(maxsize=1)
def audit_rules() -> dict:
    doc = packaged_yaml("audit.yaml")
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ValueError("rules/audit.yaml: expected a mapping with version: 1")
    return doc


def threshold(name: str) -> float:
    return audit_rules()["thresholds"][name]
