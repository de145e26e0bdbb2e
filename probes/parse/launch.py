"""The launch of a job, from what the probes read: the resolved configuration file, the launch
command line (Slurm batch script, container command and args) and the scheduler's job record.

Pure functions; each value comes with where it was read (``"<capture-relative file>:<line>"`` or
``"<file>: <config key>"``), so ``job.json`` can name its sources. Mode is classified by the one
run classifier (``rlhealth.mode``); model parameters are read
from the model name (``Qwen3-8B`` -> 8, ``Qwen3-30B-A3B`` -> 30 total, 3 active).
"""
from __future__ import annotations

import json
import re
import shlex
from typing import Any


from rlhealth.mode import classify_mode
from rlhealth.probes.parse import COUNT, read_count

CONFIG_FILES = ["resolved_config.yaml", "resolved_config.yml", "resolved_config.json", ".hydra/config.yaml",
                "launch_config.yaml", "launch_config.yml", "launch_config.json", "config.yaml"]
"""A run's configuration files, in the order they are looked for (probes and the audit alike)."""

MAX_CONFIG_BYTES = 1024 * 1024
MAX_LAUNCH_ARGS = 4000
PARAMS = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)[Bb](?:-A(\d+(?:\.\d+)?)[Bb])?(?![A-Za-z0-9])")
# config key suffixes naming the policy model, in priority order
MODEL_KEYS = ("policy.model.path", "trainer.policy.model.path", "model.path", "model_path", "model_name",
              "pretrain", "model")
MODEL_FLAGS = ("--model", "--model-path", "--model_path", "--pretrain")
MAX_RETRIES_FLAG = re.compile(rf"^--max[-_]retries(?:=({COUNT}))?$")
MAX_RETRIES_ASSIGN = re.compile(rf"^(?:export\s+)?(?:IRIS_)?MAX_RETRIES=({COUNT})$")
# placement settings (config key suffix -> PlacementInfo field)
PLACEMENT_KEYS = {
    "colocate_all": "colocate_all",
    "num_inference_engines": "num_inference_engines",
    "inference_engine_tensor_parallel_size": "inference_tp",
    "n_concurrent_trials": "n_concurrent_trials",
    "max_num_seqs": "max_num_seqs",
    "policy_num_gpus_per_node": "policy_gpus_per_node",
    "policy_num_nodes": "policy_nodes",
}
_GRES_GPU = re.compile(rf"gres/gpu(?::([A-Za-z0-9_-]+))?=({COUNT})")


def flatten(obj, prefix: str = "") -> dict:
    """A nested mapping as one level with dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``)."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out.update(flatten(v, key))
            else:
                out[key] = v
    return out


def parse_config(text: str, name: str) -> tuple[dict | None, str | None]:
    """(mapping, error) of a configuration file's text (JSON for ``.json``, else YAML)."""
    if name.endswith(".json"):
        parse, errors = json.loads, ValueError
    else:
        import yaml     # only for a YAML file: a diagnosis without one never imports PyYAML

        parse, errors = yaml.safe_load, (ValueError, yaml.YAMLError)
    try:
        doc = parse(text)
    except errors as exc:
        return None, f"does not parse: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if not isinstance(doc, dict):
        return None, f"not a mapping (top level is {type(doc).__name__})"
    return doc, None


def script_args(text: str) -> list[tuple[int, str]]:
    """Tokens of a shell script's command lines with their 1-based line numbers: comments,
    ``#SBATCH`` lines and blank lines skipped, backslash continuations joined, unbalanced quotes
    split on whitespace."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = lineno
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full, pending = pending + line, ""
        try:
            tokens = shlex.split(full, comments=True)
        except ValueError:
            tokens = full.split()
        out += [(start, t) for t in tokens]
        if len(out) >= MAX_LAUNCH_ARGS:
            break
    return out[:MAX_LAUNCH_ARGS]


def params_from_name(name: str) -> tuple[float, float] | None:
    """(total, active) billions of parameters from a model name; None when the name has no size."""
    m = None
    for m in PARAMS.finditer(name.rsplit("/", 1)[-1]):
        pass
    if m is None:
        return None
    total = float(m.group(1))
    return total, float(m.group(2)) if m.group(2) else total


def model_from(flat: dict, config_source: str | None, args: list[tuple[str, int | None, str]]) -> dict | None:
    """``{"name", "total_params_b", "active_params_b", "source"}`` from the config keys, else the
    launch arguments (``--model X``, ``...model.path=X``); None when no model name with a size is found."""
    candidates: list[tuple[str, str]] = []
    for suffix in MODEL_KEYS:
        for key in sorted(flat):
            if (key == suffix or key.endswith("." + suffix)) and isinstance(flat[key], str) and flat[key].strip():
                candidates.append((flat[key].strip(), f"{config_source}: {key}"))
    for i, (token, line, source) in enumerate(args):
        where = f"{source}:{line}" if line else source
        if token in MODEL_FLAGS and i + 1 < len(args):
            candidates.append((args[i + 1][0], where))
        elif "=" in token:
            key, _, value = token.lstrip("+-").partition("=")
            if any(key == s or key.endswith("." + s) for s in MODEL_KEYS) or key in ("model", "model-path"):
                candidates.append((value.strip("'\""), where))
    for name, source in candidates:
        sizes = params_from_name(name)
        if sizes:
            return {"name": name, "total_params_b": sizes[0], "active_params_b": sizes[1], "source": source}
    return None


def max_retries_from(args: list[tuple[str, int | None, str]]) -> tuple[int, str] | None:
    """The gang retry budget from the launch arguments: ``--max-retries N``, ``--max-retries=N``
    (``--max_retries``), or a ``MAX_RETRIES=N`` assignment in a launch script."""
    for i, (token, line, source) in enumerate(args):
        where = f"{source}:{line}" if line else source
        m = MAX_RETRIES_FLAG.match(token)
        if m:
            retries = read_count(m.group(1) or (args[i + 1][0] if i + 1 < len(args) else ""))
            if retries is not None:
                return retries, where
        m = MAX_RETRIES_ASSIGN.match(token)
        if m:
            return int(m.group(1)), where
    return None


def mode_from(config: dict | None, config_source: str | None, args: list[tuple[str, int | None, str]]) -> tuple[str, str] | None:
    """(mode, why) by the one run classifier (``rlhealth.mode``: configuration structure, never
    values) over the resolved configuration and the launch arguments; None when neither exists."""
    launch = shlex.join(t for t, _, _ in args) if args else None
    mode, why = classify_mode(config if isinstance(config, dict) else None, launch)
    if mode not in ("agentic", "standard"):
        return None
    where = " + ".join(x for x in (config_source if isinstance(config, dict) else None,
                                   ", ".join(sorted({src for _, _, src in args})) if args else None) if x)
    return mode, f"{where}: {why}"


def placement_from(flat: dict) -> dict[str, Any]:
    """Placement settings found in the configuration (by key suffix), with the key each came from."""
    out: dict[str, Any] = {}
    for key in sorted(flat):
        for suffix, field in PLACEMENT_KEYS.items():
            if (key == suffix or key.endswith("." + suffix)) and field not in out and not isinstance(flat[key], (dict, list)):
                out[field] = (flat[key], key)
    return out


def gres_gpus(tres: str | None) -> tuple[str | None, int | None]:
    """``cpu=8,mem=64G,node=2,gres/gpu:h100=8`` -> (``"h100"``, 8) (type None when untyped)."""
    if not tres:
        return None, None
    found = _GRES_GPU.findall(tres)
    if not found:
        return None, None
    typed = [f for f in found if f[0]]
    kind, count = (typed or found)[0]
    return (kind or None), int(count)


_CONFIG_PATH = re.compile(r"(?:^|=)(/[A-Za-z0-9_./+@,:-]+\.(?:ya?ml|json))$")
_SHELL_SCRIPT_FLAGS = ("-c", "-lc", "-ec")


def container_args(pod: dict, container: str) -> list[str]:
    """A container's command and args as tokens (a ``sh -c '<script>'`` script split into its
    words), plus ``NAME=value`` for the environment variables that carry a retry budget."""
    out: list[str] = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") != container:
            continue
        words = [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
        for i, word in enumerate(words):
            if i > 0 and words[i - 1] in _SHELL_SCRIPT_FLAGS:
                out += [t for _, t in script_args(word)]
            else:
                out.append(word)
        for env in c.get("env") or []:
            if isinstance(env, dict) and isinstance(env.get("value"), str) and MAX_RETRIES_ASSIGN.match(f"{env.get('name')}={env['value']}"):
                out.append(f"{env['name']}={env['value']}")
    return out[:MAX_LAUNCH_ARGS]


def config_paths(tokens: list[str]) -> list[str]:
    """Absolute configuration-file paths (``.yaml``/``.yml``/``.json``) named by launch tokens, in
    order, without duplicates, only paths the read-only allow-list can name."""
    seen: list[str] = []
    for token in tokens:
        m = _CONFIG_PATH.search(token)
        if m and ".." not in m.group(1).split("/") and m.group(1) not in seen:
            seen.append(m.group(1))
    return seen
