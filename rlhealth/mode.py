"""One run classifier (agentic vs standard), by the structure of the resolved launch configuration.

``classify_mode(resolved_config, launch_text) -> (mode, mode_source)``: ``mode`` is ``agentic``,
``standard`` or ``unknown`` (neither input given). A run is agentic iff a configuration KEY names
an agent-harness or sandbox section from ``rules/mode.yaml``: a mapping key at any depth of
``resolved_config``, or a ``key.path=value`` override or ``--flag`` in ``launch_text`` (the
launch command / entrypoint JSON text). Values -- run names, model paths, URLs -- are never read,
so a run called ``harbor-tb-agentic`` with no harness section is standard.
"""
from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache

from rlhealth.packaged import packaged_yaml

_OVERRIDE = re.compile(r"^\+{0,2}(?P<key>[A-Za-z_][\w.\-]*)=")


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_")


@lru_cache(maxsize=1)
def load_mode_rules() -> dict:
    doc = packaged_yaml("mode.yaml")
    return {"sections": frozenset(_norm(x) for x in doc["harness_sections"]),
            "leaves": frozenset(_norm(x) for x in doc["harness_leaf_keys"]),
            "flags": frozenset(_norm(x) for x in doc["harness_flags"])}


def _key_paths(obj, prefix: str = ""):
    """(dotted key path, is_leaf) for every mapping key of ``obj`` (lists are walked too)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            yield path, not (isinstance(v, dict) and v)
            yield from _key_paths(v, path)
    elif isinstance(obj, list):
        for v in obj:
            yield from _key_paths(v, prefix)


def _matches(path: str, is_leaf: bool, rules: dict) -> bool:
    parts = [_norm(p) for p in path.split(".")]
    return any(p in rules["sections"] for p in parts) or (is_leaf and parts[-1] in rules["leaves"])


def _launch_tokens(text: str):
    """Tokens of the launch text: JSON string leaves split as command lines, else the text itself."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = text
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                yield from shlex.split(item)
            except ValueError:
                yield from item.split()
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def harness_evidence(resolved_config: dict | None, launch_text: str | None) -> list[str]:
    """Every configuration key path / launch flag that names an agent harness (sorted, unique)."""
    rules = load_mode_rules()
    found: set[str] = set()
    if isinstance(resolved_config, dict):
        hits = [p for p, leaf in _key_paths(resolved_config) if _matches(p, leaf, rules)]
        # the section itself, not every key under it
        found.update(p for p in hits if not any(p.startswith(q + ".") for q in hits))
    if launch_text:
        for tok in _launch_tokens(launch_text):
            if tok.startswith("--"):
                flag = tok[2:].split("=", 1)[0]
                if _norm(flag) in rules["flags"]:
                    found.add("--" + flag)
                continue
            m = _OVERRIDE.match(tok)
            if m and _matches(m["key"], True, rules):
                found.add(m["key"])
    return sorted(found)


def classify_mode(resolved_config: dict | None, launch_text: str | None) -> tuple[str, str]:
    """(mode, mode_source): see the module docstring."""
    if not isinstance(resolved_config, dict) and not launch_text:
        return "unknown", "no resolved configuration and no launch command"
    evidence = harness_evidence(resolved_config, launch_text)
    where = "resolved configuration" if isinstance(resolved_config, dict) else "launch command"
    if isinstance(resolved_config, dict) and launch_text:
        where = "resolved configuration and launch command"
    if evidence:
        return "agentic", f"agent-harness key(s) in the {where}: {', '.join(evidence[:8])}"
    return "standard", f"no agent-harness or sandbox section in the {where}"
