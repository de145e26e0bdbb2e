"""gpu_health, gpu_xid and flight_recorder: what a live probe fetched from the nodes and the trainer."""
from __future__ import annotations

from rlhealth.facts import Evidence, FlightRecorderMeasured, GpuHealthMeasured, GpuXidMeasured
from rlhealth.observers.base import Observation, as_count, capture_rel, summary
from rlhealth.probes.textio import quote


def _int(value) -> int:
    return as_count(value) if isinstance(value, (int, float)) else 0


def observe(obs: Observation) -> None:
    read = obs.read
    health = read.gpu_health if isinstance(read.gpu_health, dict) else None
    hosts = [h for h in (health or {}).get("hosts") or [] if isinstance(h, dict)]
    if hosts:
        gpus = [(h, g) for h in hosts for g in h.get("gpus") or [] if isinstance(g, dict)]
        evidence: list[Evidence] = []
        for key in ("ecc_volatile_uncorrectable", "remapping_failure", "remapped_rows_pending", "retired_pages_pending"):
            for _, g in gpus:
                if g.get(key):
                    for e in ((g.get("evidence") or {}).get(key) or [])[:1]:
                        evidence.append(Evidence(source=f"{capture_rel(read)}/{e.get('source')}", line=e.get("line"),
                                                 text=quote(str(e.get("text")))))
        obs.add(GpuHealthMeasured(
            fact_id="gpu_health", evidence=tuple(evidence[:3]), hosts=len(hosts), gpus=len(gpus),
            ecc_volatile_uncorrectable=sum(_int(g.get("ecc_volatile_uncorrectable")) for _, g in gpus),
            remapping_failure_gpus=sum(1 for _, g in gpus if g.get("remapping_failure") is True),
            remap_pending_gpus=sum(1 for _, g in gpus if g.get("remapped_rows_pending") is True),
            retire_pending_gpus=sum(1 for _, g in gpus if g.get("retired_pages_pending") is True)))
        by_xid: dict[str, list[tuple[str, dict]]] = {}
        for h in hosts:
            for x in h.get("xid") or []:
                if isinstance(x, dict) and x.get("xid") is not None:
                    by_xid.setdefault(str(x["xid"]), []).append((str(h.get("host")), x))
        for xid, events in sorted(by_xid.items()):
            first = events[0][1]
            obs.add(GpuXidMeasured(
                fact_id=f"gpu_xid:{xid}", xid=xid, count=len(events), hosts=len({host for host, _ in events}),
                evidence=(Evidence(source=f"{capture_rel(read)}/{first.get('source')}", line=first.get("line"),
                                   text=quote(str(first.get("text")))),)))
    fr = read.flight_recorder if isinstance(read.flight_recorder, dict) else None
    if fr:
        stuck = [s for s in fr.get("stuck") or [] if isinstance(s, dict)]
        behind = [b for b in fr.get("behind") or [] if isinstance(b, dict)]
        top = max(stuck, key=lambda s: len(s.get("ranks") or []), default=None)
        text = (f"{len(top.get('ranks') or [])} rank(s) wait in {top.get('collective')} seq {top.get('seq')} "
                f"(process group {top.get('process_group')}); {len(behind)} rank(s) behind") if top else "no pending collective"
        obs.add(FlightRecorderMeasured(
            fact_id="flight_recorder", evidence=(summary(f"{capture_rel(read)}/flight_recorder/summary.json", text),),
            readable_ranks=_int(fr.get("readable_ranks")),
            stuck_ranks=len({r for s in stuck for r in s.get("ranks") or []}), behind_ranks=len({b.get("rank") for b in behind}),
            collective=str(top.get("collective")) if top else None, seq=_int(top.get("seq")) if top else None))
