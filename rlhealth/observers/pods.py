"""pods: Kubernetes pod state (OOMKilled, image pull, crash loops, restarts, phases)."""
from __future__ import annotations

from rlhealth.facts import Evidence, PodsMeasured
from rlhealth.observers.base import Observation, as_count, as_dict, as_list, capture_rel
from rlhealth.probes.parse.timestamps import iso, parse_iso
from rlhealth.probes.textio import quote


def observe(obs: Observation) -> None:
    read = obs.read
    if not isinstance(read.pods, dict) or not isinstance(read.pods.get("items"), list):
        return
    oom, pull, crash, restarts, phases = [], [], [], 0, []
    oom_times: list[float] = []
    for pod in read.pods["items"]:
        if not isinstance(pod, dict):
            continue
        name = str(as_dict(pod.get("metadata")).get("name"))
        status = as_dict(pod.get("status"))
        phases.append(str(status.get("phase")))
        for cs in as_list(status.get("containerStatuses")) + as_list(status.get("initContainerStatuses")):
            if not isinstance(cs, dict):
                continue
            restarts += as_count(cs.get("restartCount"))
            for which in ("state", "lastState"):
                st = as_dict(cs.get(which))
                term = as_dict(st.get("terminated"))
                wait = as_dict(st.get("waiting"))
                if term.get("reason") == "OOMKilled":
                    finished = parse_iso(term.get("finishedAt"))
                    if finished is not None:
                        oom_times.append(finished)
                    oom.append(f'pod {name} container {cs.get("name")} {which}.terminated.reason=OOMKilled exitCode={term.get("exitCode")}')
                if wait.get("reason") in ("ImagePullBackOff", "ErrImagePull"):
                    pull.append(f'pod {name} container {cs.get("name")} state.waiting.reason={wait.get("reason")}')
                if wait.get("reason") == "CrashLoopBackOff":
                    crash.append(f'pod {name} container {cs.get("name")} state.waiting.reason=CrashLoopBackOff')
        if status.get("reason") == "Evicted":
            oom.append(f"pod {name} status.reason=Evicted {status.get('message', '')}")
    last = obs.last_progress
    progress_after = bool(oom and oom_times and len(oom_times) == len(oom) and last is not None and last.ts is not None
                          and last.ts > max(oom_times))
    texts = oom[:1] + pull[:1] + crash[:1]
    obs.add(PodsMeasured(
        fact_id="pods", evidence=tuple(Evidence(source=f"{capture_rel(read)}/pods.json", text=quote(t), summary=True)
                                       for t in texts),
        count=len(read.pods["items"]), oomkilled=len(oom), progress_after_last_oom=progress_after,
        last_oom=iso(max(oom_times)) if oom_times else None, image_pull_backoff=len(pull), crashloop=len(crash),
        restarts=restarts, running=phases.count("Running"), pending=phases.count("Pending")))
