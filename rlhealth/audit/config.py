"""Resolved launch configuration and run classification (standard vs agentic).

Sources, in priority order (the first one found is "the resolved configuration"; the manifest
entrypoint is always read too, for overrides and the source revision):
  RUN/resolved_config.{yaml,yml,json}, RUN/.hydra/config.yaml, RUN/launch_config.{yaml,yml,json},
  RUN/config.yaml, BUNDLE/rlhealth/captures/<newest>/job.json ``resolved_config``,
  BUNDLE/manifest.json ``job.entrypoint`` (compact JSON text; ``key=value`` overrides and flags).

Classification is ``rlhealth.mode.classify_mode`` (the one classifier): configuration KEYS and
command-line flags, never values such as the run name.
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlhealth.audit.safefs import Root
from rlhealth.mode import classify_mode, harness_evidence
from rlhealth.probes.parse import COUNT
from rlhealth.probes.parse.launch import CONFIG_FILES, flatten  # the run's configuration files, read as the probes read them

OVERRIDE = re.compile(r"^\+{0,2}(?P<key>[A-Za-z_][\w.\-]*(?:\.[\w\-]+)*)=(?P<value>.*)$", re.DOTALL)
SKYREF = re.compile(r"--skyrl[-_]ref(?:=|\s+)['\"]?([0-9a-fA-F]{7,40})\b")

# settings reported in the record (suffix of a flattened key -> label)
SETTINGS = {
    "max_steps": "max_steps", "total_training_steps": "max_steps", "num_training_steps": "max_steps",
    "ckpt_interval": "ckpt_interval", "save_every": "ckpt_interval", "hf_save_interval": "hf_save_interval",
    "ckpt_path": "ckpt_path", "export_path": "export_path", "resume_mode": "resume_mode",
    "run_name": "run_name", "project_name": "project_name", "policy.model.path": "model_path",
    "epochs": "epochs", "trials_dir": "trials_dir", "max_ckpts_to_keep": "max_ckpts_to_keep",
}


@dataclass
class ConfigFacts:
    source: str | None = None
    flat: dict = field(default_factory=dict)
    entrypoint_source: str | None = None
    entrypoint_overrides: dict = field(default_factory=dict)
    entrypoint_text: str = ""
    entrypoint_raw: str | None = None
    doc: dict | None = None
    problems: list = field(default_factory=list)

    @property
    def merged(self) -> dict:
        out = dict(self.entrypoint_overrides)
        out.update(self.flat)
        return out

    def settings(self) -> dict:
        out: dict = {}
        for key, value in sorted(self.merged.items()):
            for suffix, label in SETTINGS.items():
                if (key == suffix or key.endswith("." + suffix)) and label not in out and not isinstance(value, (dict, list)):
                    out[label] = value
        return out

    def mode(self) -> tuple[str, str, list[str]]:
        """(mode, mode_source, evidence key paths) from ``rlhealth.mode.classify_mode``."""
        mode, source = classify_mode(self.doc, self.entrypoint_raw)
        return mode, source, harness_evidence(self.doc, self.entrypoint_raw)[:8]


def expected_layout(has_bundle: bool) -> str:
    """Where the configuration is looked for, in order (the message of a run that cannot be classified)."""
    places = ", ".join(f"RUN/{name}" for name in CONFIG_FILES)
    bundle = ("BUNDLE/rlhealth/captures/<newest>/job.json resolved_config, BUNDLE/manifest.json job.entrypoint"
              if has_bundle else "or, with --bundle (default: RUN when it holds manifest.json or rlhealth/captures/), "
              "BUNDLE/rlhealth/captures/<newest>/job.json resolved_config and BUNDLE/manifest.json job.entrypoint")
    return f"{places}, {bundle}"


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _coerce(value: str):
    v = value.strip().strip("'\"")
    if re.fullmatch(rf"-?{COUNT}", v):
        return int(v)
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def load_config(run: Root, bundle: Root | None, manifest: dict | None, capture_dir: Path | None) -> ConfigFacts:
    facts = ConfigFacts()
    for name in CONFIG_FILES:
        p = run.path / name
        if not run.is_file(p):
            continue
        text = run.read_text(p)
        try:
            doc = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError, TypeError):
            facts.problems.append(f"{run.display(p)}: configuration file does not parse")
            continue
        if isinstance(doc, dict):
            facts.source = run.display(p)
            facts.doc = doc
            facts.flat = flatten(doc)
            break
        facts.problems.append(f"{run.display(p)}: configuration file is not a mapping")
    if facts.source is None and bundle is not None and capture_dir is not None:
        p = capture_dir / "job.json"
        text = bundle.read_text(p) if bundle.is_file(p) else None
        try:
            job = json.loads(text) if text else None
        except ValueError:
            job = None
            facts.problems.append(f"{bundle.display(p)}: not JSON")
        if isinstance(job, dict) and isinstance(job.get("resolved_config"), dict):
            facts.source = f"{bundle.display(p)} resolved_config"
            facts.doc = job["resolved_config"]
            facts.flat = flatten(job["resolved_config"])
    entry = ((manifest or {}).get("job") or {}).get("entrypoint") if isinstance((manifest or {}).get("job"), dict) else None
    if isinstance(entry, str) and entry.strip():
        try:
            doc = json.loads(entry)
        except ValueError:
            doc = entry  # not JSON: read as a command line
        texts = list(_strings(doc))
        facts.entrypoint_text = "\n".join(texts)
        facts.entrypoint_source = "bundle:manifest.json job.entrypoint"
        facts.entrypoint_raw = entry
        for t in texts:
            try:
                tokens = shlex.split(t)
            except ValueError:
                tokens = t.split()
            for i, tok in enumerate(tokens):
                if tok.startswith("--"):
                    if "=" in tok:
                        facts.entrypoint_overrides.setdefault(tok[2:].split("=", 1)[0].replace("-", "_"), _coerce(tok.split("=", 1)[1]))
                    elif i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                        facts.entrypoint_overrides.setdefault(tok[2:].replace("-", "_"), _coerce(tokens[i + 1]))
                    continue
                m = OVERRIDE.match(tok)
                if m:
                    facts.entrypoint_overrides.setdefault(m["key"], _coerce(m["value"]))
    return facts


def entrypoint_revision(facts: ConfigFacts) -> str | None:
    m = SKYREF.search(facts.entrypoint_text)
    return m[1].lower() if m else None
