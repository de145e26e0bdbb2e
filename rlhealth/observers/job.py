"""job: identity, controller state, evidence ages, mode and launch configuration."""
from __future__ import annotations

import json
import math
import re
import shlex

from rlhealth.facts import Evidence, JobMeasured
from rlhealth.mode import classify_mode
import rlhealth.observers.gpu_type as gpu_type
from rlhealth.observers.base import Observation, as_count, as_dict, as_list, rounded
from rlhealth.observers.signatures import current_attempt
from rlhealth.probes.backends import backend_for_layout
from rlhealth.probes.bundle import BundleRead
from rlhealth.packaged import packaged_yaml
from rlhealth.probes.parse import COUNT
from rlhealth.probes.parse.launch import parse_config, script_args
from rlhealth.probes.parse.timestamps import iso
from rlhealth.probes.parse.vllm import eager_from_config
from rlhealth.probes.textio import quote

MODEL_PATH_RE = re.compile(r"(?:model_path|model\.path|--model|pretrain|model_name)[\"']?\s*[=: ]\s*[\"']?([A-Za-z0-9_./-]+)")
PARAMS_RE = re.compile(r"(\d+(?:\.\d+)?)[Bb](?:-A(\d+(?:\.\d+)?)[Bb])?\b")
INT_SETTING = "{key}[\"']?\\s*[=:]\\s*[\"']?({count})"
STATE_ALIASES = {"terminated": "killed", "worker failed": "worker_failed", "awaiting placement": "pending",
                 "completed": "succeeded", "timeout": "failed", "cancelled": "killed", "unknown": None}


def config_parts(read: BundleRead) -> list[tuple[str, str, str]]:
    """The launch configuration as ``(text, where it came from, file)``: the capture's resolved
    configuration, the manifest's entrypoint, else the task containers' command, args and env."""
    parts = []
    cap = read.capture_dir.relative_to(read.root).as_posix() if read.capture_dir else ""
    if read.job_info and read.job_info.get("resolved_config"):
        parts.append((json.dumps(read.job_info["resolved_config"], sort_keys=True), "capture job.json resolved_config",
                      f"{cap}/job.json"))
    job = (read.manifest or {}).get("job") if isinstance(read.manifest, dict) else None
    if isinstance(job, dict) and job.get("entrypoint"):
        parts.append((str(job["entrypoint"]), "manifest.json job.entrypoint", "manifest.json"))
    pod_args = pod_launch_args(read)
    if pod_args and not parts:
        parts.append((pod_args, "pods.json container command/args", f"{cap}/pods.json"))
    return parts


def config_text(read: BundleRead) -> tuple[str, str]:
    """(launch configuration text, where it came from)."""
    parts = config_parts(read)
    return "\n".join(t for t, _, _ in parts), " + ".join(w for _, w, _ in parts)


def launch_text(read: BundleRead) -> str:
    """The launch command as written: manifest job.entrypoint, else the task containers' args."""
    job = (read.manifest or {}).get("job") if isinstance(read.manifest, dict) else None
    if isinstance(job, dict) and job.get("entrypoint"):
        return str(job["entrypoint"])
    return pod_launch_args(read)


def pod_launch_args(read: BundleRead) -> str:
    """The task containers' command, args and env values as the API returned them."""
    items = read.pods.get("items") if isinstance(read.pods, dict) else None
    parts: list[str] = []
    for pod in items if isinstance(items, list) else []:
        spec = as_dict(pod.get("spec")) if isinstance(pod, dict) else {}
        for container in as_list(spec.get("containers")):
            if not isinstance(container, dict):
                continue
            parts += [str(x) for x in as_list(container.get("command")) + as_list(container.get("args"))]
            parts += [str(e.get("value")) for e in as_list(container.get("env")) if isinstance(e, dict) and e.get("value")]
    return " ".join(parts)


def controller_state(read: BundleRead) -> tuple[str | None, str, Evidence | None]:
    """(state, where it came from, the quoted evidence); the newer of capture and manifest wins."""
    cap_state = read.state.get("state") if isinstance(read.state, dict) else None
    if not isinstance(cap_state, str) or not cap_state.strip():
        cap_state = None        # a state that is no string is no state
    man_job = (read.manifest or {}).get("job") if isinstance(read.manifest, dict) else None
    man_state = man_job.get("state") if isinstance(man_job, dict) else None
    if isinstance(man_state, str):
        man_state = man_state.strip().lower()
        man_state = STATE_ALIASES.get(man_state, man_state)
    else:
        man_state = None        # a state that is no string is no state
    cap_rel = read.capture_dir.relative_to(read.root).as_posix() if read.capture_dir else None
    cap_newer = read.captured_at is not None and (read.synced_at is None or read.captured_at >= read.synced_at)
    if cap_state and (cap_newer or not man_state):
        return cap_state, "capture", Evidence(source=f"{cap_rel}/state.json", text=quote(f'"state": "{cap_state}"'))
    if man_state:
        return man_state, "manifest", Evidence(source="manifest.json", text=quote(f'"job": {{"state": "{man_state}"}}'))
    return None, "none", None


def _mode(read: BundleRead, source: str, mode_override: str | None) -> tuple[str | None, str]:
    """Mode by the structure of the launch configuration (rlhealth.mode), else from the launch log."""
    if mode_override:
        return mode_override, "--mode"
    if read.job_info and read.job_info.get("mode_hint") in ("agentic", "standard"):
        return read.job_info["mode_hint"], "capture job.json mode_hint"
    resolved = (read.job_info or {}).get("resolved_config")
    mode, why = classify_mode(resolved if isinstance(resolved, dict) else None, launch_text(read) or None)
    if mode != "unknown":
        return mode, f"{why} ({source})"
    carried = _mode_from_launch_material(read)
    if carried is not None:
        return carried
    if read.generator_init is not None:
        return "agentic", f"launch log {read.generator_init.source}:{read.generator_init.line}"
    if read.metric_records and min(r.step for r in read.metric_records) <= 1 and read.source_rev is not None:
        return "standard", (f"launch log {read.source_rev.source}: the trainer started "
                            f"({read.source_rev.text[-40:].strip()}) and stepped without initializing an "
                            "agent-harness generator")
    return None, "undetermined"


def _mode_from_launch_material(read: BundleRead) -> tuple[str, str] | None:
    """Mode from the launch material the bundle carries when its manifest has no entrypoint (a
    Jupiter bundle): a resolved configuration file, else a Slurm batch script that launches the
    trainer (a token names one of rules/mode.yaml ``launch_script_markers``); agentic wins."""
    markers = tuple(str(m).lower() for m in (packaged_yaml("mode.yaml").get("launch_script_markers") or []))
    found: list[tuple[str, str, str]] = []
    for rel, text in read.launch_material:
        if rel.endswith((".json", ".yaml", ".yml")):
            config, error = parse_config(text, rel)
            if error is None:
                mode, why = classify_mode(config, None)
                found.append((mode, why.replace("resolved configuration", f"resolved configuration {rel}")))
            continue
        tokens = [tok for _, tok in script_args(text)]
        if not any(m in tok.lower() for tok in tokens for m in markers):
            continue
        mode, why = classify_mode(None, shlex.join(tokens))
        found.append((mode, why.replace("launch command", f"Slurm launch script {rel}")))
    found = [f for f in found if f[0] != "unknown"]
    if not found:
        return None
    return next((f for f in found if f[0] == "agentic"), found[0])


def observe(obs: Observation, *, max_age_s: float, mode_override: str | None, given=None) -> None:
    read = obs.read
    manifest = read.manifest if isinstance(read.manifest, dict) else {}
    capture = read.capture if isinstance(read.capture, dict) else {}
    state, state_source, state_ev = controller_state(read)
    pods_listed = None
    if isinstance(read.pods, dict) and isinstance(read.pods.get("items"), list):
        pods_listed = len(read.pods["items"])
    newest = read.newest_evidence
    text, source = config_text(read)
    mode, mode_source = _mode(read, source, mode_override)
    info = as_dict(read.job_info)
    model = as_dict(info.get("model"))
    placement = as_dict(info.get("placement"))
    active_b, model_name, model_source = model.get("active_params_b"), model.get("name"), model.get("source")
    if isinstance(active_b, str):
        try:
            active_b = float(active_b)      # "8" reads as 8 (as the fact's validation would)
        except ValueError:
            active_b = None
    if isinstance(active_b, bool) or not isinstance(active_b, (int, float)) or not math.isfinite(active_b) or active_b <= 0:
        active_b = None         # garbled: unknown
    model_name = model_name if isinstance(model_name, str) else None
    model_source = model_source if isinstance(model_source, str) else None
    if active_b is None and text:
        m = MODEL_PATH_RE.search(text)
        if m:
            model_name = m.group(1)
            p = PARAMS_RE.search(model_name)
            if p:
                active_b = float(p.group(2) or p.group(1))
                model_source = f"model path in {source}"
    if active_b is None and read.engine_model is not None:
        served, occ = read.engine_model
        p = PARAMS_RE.search(served)
        if p:
            model_name, active_b = served, float(p.group(2) or p.group(1))
            model_source = f"vLLM engine init line {occ.source}:{occ.line}"
    total_b = model.get("total_params_b") if model_source == model.get("source") and model_source else None
    try:
        total_b = float(total_b) if isinstance(total_b, (int, float)) and not isinstance(total_b, bool) else None
    except OverflowError:
        total_b = None          # an integer too large for a float: garbled
    if total_b is not None and (not math.isfinite(total_b) or total_b <= 0):
        total_b = None
    obs.model_observed = {"name": model_name, "source": model_source, "active_params_b": active_b, "total_params_b": total_b,
                          "from_job_json": bool(model_source) and model_source == model.get("source")}
    gpu_fields = gpu_type.observe(obs, gpu_type.sightings(obs, config_parts(read), given))
    given_model = getattr(given, "model", None) if given is not None else None
    if given_model is not None and active_b is None:
        model_name, model_source = given_model.name, "given (--model)"
        active_b = given_model.active_params_b
        if active_b is None:
            p = PARAMS_RE.search(given_model.name)
            active_b = float(p.group(2) or p.group(1)) if p else None

    def setting(key: str) -> int | None:
        if placement.get(key) is not None:
            return as_count(placement[key], default=None)
        m = re.search(INT_SETTING.format(key=key, count=COUNT), text)
        return int(m.group(1)) if m else None

    n_trials = setting("n_concurrent_trials")
    if n_trials is None and read.generator_init is not None:
        m = re.search(rf"Concurrent trials: ({COUNT})", read.generator_init.text)
        n_trials = int(m.group(1)) if m else None
    eager = eager_from_config(text) if text else None
    eager_source = source if eager is not None else None
    if eager is None and read.eager_lines:
        value, occ = read.eager_lines[-1]
        eager, eager_source = value, f"{occ.source}:{occ.line}"
    evidence = [state_ev] if state_ev else []
    if read.capture_dir is not None:
        cap_rel = read.capture_dir.relative_to(read.root).as_posix()
        evidence.append(Evidence(source=f"{cap_rel}/capture.json", text=quote(f'"captured_at": "{iso(read.captured_at)}"')))
    if read.synced_at is not None:
        evidence.append(Evidence(source="manifest.json", text=quote(f'"synced_at": "{manifest.get("synced_at")}"')))
    fact = JobMeasured(
        fact_id="job", evidence=tuple(evidence),
        job_id=str(capture.get("job_id") or manifest.get("job_id") or read.root.name),
        cluster=str(capture.get("cluster") or manifest.get("cluster") or "unknown"),
        backend=str(capture.get("backend") or backend_for_layout(read.layout).name),
        layout=read.layout, state=state, state_source=state_source,
        evidence_age_s=rounded(max(0.0, obs.now - newest)) if newest is not None else None,
        evidence_time=iso(newest), evaluation_time=iso(obs.now),
        evidence_ahead_s=rounded(newest - obs.now) if newest is not None and newest > obs.now else None, max_age_s=max_age_s,
        capture_age_s=rounded(obs.now - read.captured_at) if read.captured_at is not None and read.capture_dir else None,
        has_manifest=read.manifest is not None, has_capture=read.capture_dir is not None, pods_listed=pods_listed,
        gpu_poll_rows=len(read.gpu_polls), stack_samples=len(read.stacks), log_files=len(read.log_files),
        mode=mode, mode_source=mode_source, model_name=model_name, model_source=model_source,
        active_params_b=active_b, **gpu_fields, n_concurrent_trials=n_trials,
        max_num_seqs=setting("max_num_seqs"), num_inference_engines=setting("num_inference_engines"),
        enforce_eager=eager, enforce_eager_source=eager_source, current_attempt=current_attempt(obs))
    obs.add(fact)
    obs.job = fact.model_dump()

