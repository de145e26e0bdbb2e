"""Pure parsers for what the Iris/CoreWeave live probe reads through the Kubernetes API.

Nothing here talks to a cluster: every function takes text or already-decoded JSON and
returns plain data, so each normalized capture file can be re-derived from ``raw/``.

Pod identification follows the cluster's own naming (marin-artifacts §4.3):
- label ``iris.job_id`` == ``<user>.<job>`` (truncated by Kubernetes at 63 characters),
- label ``kueue.x-k8s.io/pod-group-name`` starting ``iris-pg-<sha256("/<user>/<job>")[:16]>-<attempt>``,
- or, for pods carrying neither label, a name that contains the job's short name.
A pod whose identity labels name a *different* job is never taken on a name match.
Pod name schemes: ``iris-<user>-<job>-<rank>-<hash>-<gen>`` (single-node RL) and
``iris-<user>-<job>-<hash>-<rank>`` (leafgroup / multi-node).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from rlhealth.probes.parse import COUNT, read_count
from rlhealth.probes.parse.nvidia_smi import gpu_class, parse_gpu_inventory  # noqa: F401 (re-exported)
from rlhealth.probes.parse.roles import RoleTable, gpu_roles, process_roles  # noqa: F401 (re-exported)

JOB_ID_RE = re.compile(r"^/([^/\s]+)/([^/\s]+)$")
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
JOB_LABEL = "iris.job_id"
TASK_CONTAINER = "task"


# --------------------------------------------------------------------------- job identity

def split_job_id(job_id: str) -> tuple[str, str]:
    """``/<user>/<job>`` -> (user, job); ValueError otherwise (marin-artifacts §1.1)."""
    m = JOB_ID_RE.match(job_id or "")
    if not m or m.group(1) in (".", "..") or m.group(2) in (".", ".."):
        raise ValueError(f"not an Iris job id /<user>/<job>: {job_id!r}")
    return m.group(1), m.group(2)


def job_label_value(job_id: str) -> str:
    user, job = split_job_id(job_id)
    return f"{user}.{job}"


def pod_group_prefix(job_id: str) -> str:
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:16]
    return f"iris-pg-{digest}-"


def short_name(job_id: str) -> str:
    return split_job_id(job_id)[1].lower()


def _labels(pod: dict) -> dict[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def match_reason(pod: dict, job_id: str) -> str | None:
    """Why ``pod`` belongs to ``job_id`` ("label", "pod-group", "name"), or None."""
    labels = _labels(pod)
    name = ((pod.get("metadata") or {}).get("name") or "").lower()
    want = job_label_value(job_id)
    label = labels.get(JOB_LABEL)
    if label is not None:
        if label == want or (len(want) > 63 and label == want[:63]):
            return "label"
    group = labels.get(POD_GROUP_LABEL)
    prefix = pod_group_prefix(job_id)
    if group is not None and group.startswith(prefix) and group[len(prefix):].isdigit():
        return "pod-group"
    if label is not None or group is not None:
        return None  # identity labels name another job
    if short_name(job_id) in name:
        return "name"
    return None


# --------------------------------------------------------------------------- pod facts

_SINGLE = re.compile(rf"^-(?P<rank>{COUNT})-(?P<hash>[0-9a-z]+)-(?P<gen>{COUNT})$")
_LEAF = re.compile(rf"^-(?P<hash>[0-9a-z]+)-(?P<rank>{COUNT})$")


def parse_pod_name(name: str, job_short: str) -> dict:
    """Rank and retry generation from a pod name: ``{"rank", "generation", "scheme"}`` (None if unknown).

    The part after the job's short name is parsed, so a job name ending in digits
    (``rl-run-2``) is not mistaken for a rank.
    """
    lname, short = name.lower(), job_short.lower()
    idx = lname.rfind(short)
    rest = lname[idx + len(short):] if idx >= 0 else None
    candidates = [rest] if rest is not None else []
    if rest is None:  # matched by label only: try the trailing segments
        segs = lname.split("-")
        candidates = ["-" + "-".join(segs[-3:]), "-" + "-".join(segs[-2:])]
    for text in candidates:
        m = _SINGLE.match(text)
        if m:
            return {"rank": int(m["rank"]), "generation": int(m["gen"]), "scheme": "single-node"}
        m = _LEAF.match(text)
        if m:
            return {"rank": int(m["rank"]), "generation": None, "scheme": "leafgroup"}
    return {"rank": None, "generation": None, "scheme": None}


def _task_env(pod: dict, key: str) -> str | None:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == TASK_CONTAINER:
            for env in c.get("env") or []:
                if env.get("name") == key and isinstance(env.get("value"), str):
                    return env["value"]
    return None


def _container_status(pod: dict, name: str = TASK_CONTAINER) -> dict:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == name:
            return cs
    return {}


@dataclass
class PodInfo:
    name: str
    phase: str
    rank: int | None
    generation: int
    match: str
    node: str | None
    created: str | None
    started: str | None
    deleting: bool
    restart_count: int
    last_terminated: dict | None       # lastState.terminated of container task
    terminated: dict | None            # state.terminated of container task
    waiting_reason: str | None
    gpus_requested: int | None
    pod_reason: str | None             # status.reason (e.g. Evicted)

    @property
    def running(self) -> bool:
        return self.phase == "Running" and not self.deleting


def pod_info(pod: dict, job_id: str) -> PodInfo | None:
    """Normalized facts about one pod of ``job_id`` (None if the pod is not the job's)."""
    reason = match_reason(pod, job_id)
    if reason is None:
        return None
    meta, status, spec = pod.get("metadata") or {}, pod.get("status") or {}, pod.get("spec") or {}
    name = meta.get("name") or ""
    parsed = parse_pod_name(name, short_name(job_id))
    generation = parsed["generation"]
    group = _labels(pod).get(POD_GROUP_LABEL, "")
    prefix = pod_group_prefix(job_id)
    if generation is None and group.startswith(prefix):
        generation = read_count(group[len(prefix):])
    rank = parsed["rank"]
    if rank is None:  # IRIS_TASK_ID=/user/job/<rank>[:<attempt>] (marin-artifacts §4.2)
        task_id = _task_env(pod, "IRIS_TASK_ID") or ""
        m = re.search(rf"/({COUNT})(?::\d+)?$", task_id)
        rank = int(m.group(1)) if m else None
    cs = _container_status(pod)
    gpus = None
    for c in spec.get("containers") or []:
        if c.get("name") == TASK_CONTAINER:
            gpus = read_count(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu"))
    return PodInfo(
        name=name, phase=status.get("phase") or "Unknown", rank=rank, generation=generation or 0,
        match=reason, node=spec.get("nodeName"), created=meta.get("creationTimestamp"),
        started=status.get("startTime"), deleting=bool(meta.get("deletionTimestamp")),
        restart_count=read_count(cs.get("restartCount")) or 0,
        last_terminated=(cs.get("lastState") or {}).get("terminated"),
        terminated=(cs.get("state") or {}).get("terminated"),
        waiting_reason=((cs.get("state") or {}).get("waiting") or {}).get("reason"),
        gpus_requested=gpus, pod_reason=status.get("reason"))


def job_pods(pod_list: dict, job_id: str) -> list[PodInfo]:
    """All pods of the job in a PodList, sorted by (generation, rank, name)."""
    infos = [i for i in (pod_info(p, job_id) for p in pod_list.get("items") or []) if i]
    return sorted(infos, key=lambda i: (i.generation, -1 if i.rank is None else i.rank, i.name))


def newest_generation(pods: list[PodInfo]) -> list[PodInfo]:
    """Pods of the newest retry generation only."""
    if not pods:
        return []
    gen = max(p.generation for p in pods)
    return [p for p in pods if p.generation == gen]


def filter_pod_list(pod_list: dict, job_id: str) -> dict:
    """The PodList with only the job's items (metadata, kind, apiVersion untouched)."""
    out = {k: v for k, v in pod_list.items() if k != "items"}
    out["items"] = [p for p in pod_list.get("items") or [] if match_reason(p, job_id)]
    return out


def events_for(event_list: dict, pod_names: Iterable[str]) -> list[dict]:
    names = set(pod_names)
    return [e for e in event_list.get("items") or []
            if (e.get("involvedObject") or {}).get("name") in names]


# --------------------------------------------------------------------------- in-pod command output

def parse_ps(text: str) -> list[dict]:
    """``ps -eo pid,args --no-headers -ww`` -> ``[{"pid", "args"}]`` (a PID header line is skipped)."""
    rows = []
    for line in text.splitlines():
        m = re.match(rf"^\s*({COUNT})\s+(.*\S)\s*$", line)
        if m:
            rows.append({"pid": int(m.group(1)), "args": m.group(2)})
    return rows


_LS_FULL_ISO = re.compile(
    rf"^(?P<mode>[-dlcbps][-rwxsStT]{{9}})[.+@]?\s+\d+\s+\S+\s+\S+\s+(?P<size>{COUNT})\s+"
    r"(?P<date>\d{4}-\d{2}-\d{2})\s+(?P<time>\d{2}:\d{2}:\d{2})(?:\.\d+)?\s+(?P<tz>[+-]\d{4})\s+(?P<name>.+)$")


def parse_ls_full_iso(text: str) -> list[dict]:
    """``ls -la --time-style=full-iso -- DIR`` -> ``[{"name", "size", "mtime", "type"}]`` (no . / ..)."""
    rows = []
    for line in text.splitlines():
        m = _LS_FULL_ISO.match(line.rstrip())
        if not m:
            continue
        name = m["name"]
        if m["mode"][0] == "l" and " -> " in name:
            name = name.split(" -> ", 1)[0]
        if name in (".", ".."):
            continue
        tz = m["tz"]
        try:
            mtime = datetime.fromisoformat(f"{m['date']}T{m['time']}{tz[:3]}:{tz[3:]}")
        except ValueError:      # a garbled date (day 99, other scripts' digits): no row, as no match
            continue
        rows.append({"name": name, "size": int(m["size"]), "mtime": mtime,
                     "type": {"-": "file", "d": "dir", "l": "link"}.get(m["mode"][0], "other")})
    return rows


# --------------------------------------------------------------------------- GPU product labels

def node_list(bodies: Iterable[bytes | str]) -> dict:
    """``nodes.json``: a NodeList of the nodes read (``raw/nodes/<node>.json``, one Node each) with
    only their names and labels, sorted by name; a body that is not a Node is skipped."""
    items = []
    for body in bodies:
        try:
            node = json.loads(body)
        except ValueError:
            continue
        meta = node.get("metadata") if isinstance(node, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        items.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": meta["name"], "labels": dict(sorted(labels.items()))}})
    return {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
            "items": sorted(items, key=lambda n: n["metadata"]["name"])}


def gpu_label_sightings(text: str, keys: Iterable[str]) -> list[tuple[int, str, str]]:
    """``(line, key, value)`` for every GPU product label in a PodList or NodeList as written
    (pretty-printed or compact JSON): a node's ``metadata.labels``, a pod's ``nodeSelector`` and the
    ``In`` expressions of its *required* node affinity (``{"key": "gpu.nvidia.com/class",
    "operator": "In", "values": ["H100_NVLINK_80GB"]}``, the first value); a preferred affinity
    guarantees nothing and is not read. ``keys``: the label keys that name a GPU product
    (rules/sets.yaml). The line is the first (1-based) that holds the quoted value; a text that is
    not JSON yields nothing."""
    wanted = set(keys)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return []

    def obj(value: Any) -> dict:
        return value if isinstance(value, dict) else {}

    def seq(value: Any) -> list:
        return value if isinstance(value, list) else []

    found: list[tuple[str, str]] = []
    for item in seq(obj(doc).get("items")):
        item = obj(item)
        labels = obj(item.get("metadata")).get("labels") if item.get("kind") == "Node" else None
        spec = obj(item.get("spec"))
        for mapping in (labels, spec.get("nodeSelector")):
            found += [(k, v) for k, v in obj(mapping).items() if k in wanted and isinstance(v, str) and v]
        required = obj(obj(obj(spec.get("affinity")).get("nodeAffinity"))
                       .get("requiredDuringSchedulingIgnoredDuringExecution"))
        for term in seq(required.get("nodeSelectorTerms")):
            for expr in seq(obj(term).get("matchExpressions")):
                expr = obj(expr)
                values = seq(expr.get("values"))
                if expr.get("key") in wanted and expr.get("operator") == "In" and values and isinstance(values[0], str):
                    found.append((expr["key"], values[0]))
    out = set()
    for key, value in found:
        at = text.find(json.dumps(value, ensure_ascii=False))
        if at < 0:
            at = text.find(json.dumps(value))
        out.add((text.count("\n", 0, at) + 1 if at >= 0 else 1, key, value))
    return sorted(out)
