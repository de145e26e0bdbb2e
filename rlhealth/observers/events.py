"""event: the current attempt's first causal error as an event (its shape, process, thread,
whether a signature names it, whether progress followed it) and its background-thread exceptions."""
from __future__ import annotations

from rlhealth.facts import EventMeasured, Occurrence
from rlhealth.first_error import first_causes
from rlhealth.observers.base import Observation, ev
from rlhealth.observers.signatures import progress_after
from rlhealth.probes.events import LogEvent, signal_meaning

MAX_BACKGROUND_EVENTS = 3
"""Background-thread exceptions of the current attempt stated as facts (the earliest ones)."""


def _fact(fact_id: str, e: LogEvent, occ: Occurrence, count: int, obs: Observation, *, first: bool,
          named: bool, signature: str | None) -> EventMeasured:
    return EventMeasured(
        fact_id=fact_id, evidence=tuple(ev(occ)), shape=e.kind, exc_type=e.exc_type, message=e.message,
        template=e.template, role=e.role, thread=e.thread, grade=e.grade, telemetry=e.telemetry, signal=e.signal,
        signal_meaning=signal_meaning(e.signal), count=count, dated=e.ts is not None,
        progress_after=progress_after(occ, obs.last_progress), first_error=first, named=named, signature=signature)


def _occ(e: LogEvent) -> Occurrence:
    return Occurrence(source=e.source, line=e.line, text=e.text, ts=e.ts, attempt=e.attempt, at=getattr(e, "at", None))


def observe(obs: Observation) -> None:
    read = obs.read
    current = obs.job["current_attempt"]
    firsts = first_causes(read.signatures, read.events)
    first = firsts.get(current) or firsts.get(-1)
    attempts = [a for a in (current, -1) if a in read.events.attempts()]
    if first is not None and first.event is not None:
        e = first.event
        count = sum(c for a in attempts for c, f, _ in read.events.events(a) if f.template == e.template)
        obs.add(_fact("event:first", e, first.occ, max(count, 1), obs, first=True, named=first.named,
                      signature=first.signature))
    background = [(c, f) for a in attempts for c, f, _ in read.events.events(a) if f.thread == "background"]
    for i, (count, e) in enumerate(sorted(background, key=lambda r: r[1].order_key())[:MAX_BACKGROUND_EVENTS]):
        obs.add(_fact(f"event:background:{i}", e, _occ(e), count, obs, first=False,
                      named=any(n for n in e.names), signature=e.names[0] if e.names else None))
