"""gpu_health, gpu_xid and flight_recorder: what a live probe fetched from the nodes and the trainer."""
from __future__ import annotations

from rlhealth.facts import Evidence, FlightRecorderMeasured, GpuHealthMeasured, GpuXidMeasured
from rlhealth.observers.base import Observation, as_count, as_dict, as_key, as_list, capture_rel, summary
from rlhealth.probes.textio import quote


def _line(value) -> int | None:
    """A line number from JSON evidence, None unless it is a positive integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _int(value) -> int:
    return as_count(value) if isinstance(value, (int, float)) else 0


def observe(obs: Observation) -> None:
    read = obs.read
    health = read.gpu_health if isinstance(read.gpu_health, dict) else None
    hosts = [h for h in as_list(as_dict(health).get("hosts")) if isinstance(h, dict)]
    if hosts:
        gpus = [(h, g) for h in hosts for g in as_list(h.get("gpus")) if isinstance(g, dict)]
        evidence: list[Evidence] = []
        for key in ("ecc_volatile_uncorrectable", "remapping_failure", "remapped_rows_pending", "retired_pages_pending"):
            for _, g in gpus:
                if g.get(key):
                    for e in as_list(as_dict(g.get("evidence")).get(key))[:1]:
                        if isinstance(e, dict):
                            evidence.append(Evidence(source=f"{capture_rel(read)}/{e.get('source')}", line=_line(e.get("line")),
                                                     text=quote(str(e.get("text")))))
        obs.add(GpuHealthMeasured(
            fact_id="gpu_health", evidence=tuple(evidence[:3]), hosts=len(hosts), gpus=len(gpus),
            ecc_volatile_uncorrectable=sum(_int(g.get("ecc_volatile_uncorrectable")) for _, g in gpus),
            remapping_failure_gpus=sum(1 for _, g in gpus if g.get("remapping_failure") is True),
            remap_pending_gpus=sum(1 for _, g in gpus if g.get("remapped_rows_pending") is True),
            retire_pending_gpus=sum(1 for _, g in gpus if g.get("retired_pages_pending") is True)))
        by_xid: dict[str, list[tuple[str, dict]]] = {}
        for h in hosts:
            for x in as_list(h.get("xid")):
                if isinstance(x, dict) and x.get("xid") is not None:
                    by_xid.setdefault(str(x["xid"]), []).append((str(h.get("host")), x))
        for xid, events in sorted(by_xid.items()):
            first = events[0][1]
            obs.add(GpuXidMeasured(
                fact_id=f"gpu_xid:{xid}", xid=xid, count=len(events), hosts=len({host for host, _ in events}),
                evidence=(Evidence(source=f"{capture_rel(read)}/{first.get('source')}", line=_line(first.get("line")),
                                   text=quote(str(first.get("text")))),)))
    fr = read.flight_recorder if isinstance(read.flight_recorder, dict) else None
    if fr:
        stuck = [s for s in as_list(fr.get("stuck")) if isinstance(s, dict)]
        behind = [b for b in as_list(fr.get("behind")) if isinstance(b, dict)]
        groups = [g for g in as_list(fr.get("groups")) if isinstance(g, dict)]
        top = max(stuck, key=lambda s: len(as_list(s.get("ranks"))), default=None)
        fields = _suspects(groups, behind, "groups" in fr)
        text = (f"{len(as_list(top.get('ranks')))} rank(s) wait in {top.get('collective')} seq {top.get('seq')} "
                f"(process group {top.get('process_group')}); {len(behind)} rank(s) behind") if top else "no pending collective"
        if fields["suspected_ranks"]:
            text += f"; suspected rank(s): {fields['suspected_ranks']}"
        obs.add(FlightRecorderMeasured(
            fact_id="flight_recorder", evidence=(summary(f"{capture_rel(read)}/flight_recorder/summary.json", text),),
            readable_ranks=_int(fr.get("readable_ranks")),
            stuck_ranks=len({as_key(r) for s in stuck for r in as_list(s.get("ranks"))}),
            behind_ranks=len({as_key(b.get("rank")) for b in behind}),
            collective=str(top.get("collective")) if top else None, seq=_int(top.get("seq")) if top else None,
            **fields))


def _ranks(value) -> list[int]:
    return sorted({r for r in as_list(value) if isinstance(r, int) and not isinstance(r, bool) and r >= 0})


def _suspects(groups: list[dict], behind: list[dict], has_groups: bool) -> dict:
    """The ranks the summary singles out (absent from or lagging in the stuck collective of their
    group) and their nodes; a summary written before per-group analysis names its ``behind`` ranks."""
    if not has_groups:
        absent = _ranks([b.get("rank") for b in behind])
        return dict(suspected=len(absent), absent_ranks=len(absent),
                    suspected_ranks=_capped([f"{r} (never reached the collective)" for r in absent]))
    said: dict[int, str] = {}
    nodes: dict[int, str] = {}
    absent: set[int] = set()
    lagging: set[int] = set()
    no_dump: set[int] = set()
    main = max(groups, key=lambda g: (len(as_list(g.get("suspected"))), len(as_list(g.get("members")))), default=None)
    for g in groups:
        what = f"{g.get('collective')} seq {g.get('seq')} of process group {g.get('process_group')}"
        for r in _ranks(g.get("lagging")):
            lagging.add(r)
            said.setdefault(r, f"enqueued {what}, never started it")
        for r in _ranks(g.get("absent")):
            absent.add(r)
            said.setdefault(r, f"never enqueued {what}")
        no_dump.update(_ranks(g.get("no_dump")))
        for key, node in as_dict(g.get("suspected_nodes")).items():
            if str(key).isdigit() and isinstance(node, str) and node:
                nodes.setdefault(int(key), node)
    suspected = sorted(absent | lagging)
    return dict(process_group=str(main.get("process_group")) if main else None,
                members=len(_ranks(main.get("members"))) if main else None,
                suspected=len(suspected), absent_ranks=len(absent), lagging_ranks=len(lagging), no_dump_ranks=len(no_dump),
                suspected_ranks=_capped([f"{r} ({said[r]})" for r in suspected]),
                suspected_nodes=_capped([f"{nodes[r]} (rank {r})" for r in suspected if r in nodes]))


def _capped(items: list[str], keep: int = 8) -> str | None:
    if not items:
        return None
    return "; ".join(items[:keep]) + (f"; and {len(items) - keep} more" if len(items) > keep else "")
