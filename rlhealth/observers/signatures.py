"""signature: occurrences of each catalog signature, placed in the attempt chain and against progress."""
from __future__ import annotations

from rlhealth.facts import Occurrence, SignatureMeasured, SuppressedMeasured
from rlhealth.observers.base import Observation, ev
from rlhealth.first_error import first_causes
from rlhealth.probes.events import shapes


def progress_after(occ: Occurrence | None, last: Occurrence | None) -> bool | None:
    """A trainer progress line comes after ``occ``: by time when both carry one, else by line in
    one file. None when neither orders them (an undated line of another file): an undated event
    is never placed before or after progress. False when there is no progress line at all."""
    if occ is None or last is None:
        return False
    if occ.ts is not None and last.ts is not None:
        return last.ts > occ.ts + 1.0
    if occ.source == last.source:
        return last.line > occ.line
    return None


def current_attempt(obs: Observation) -> int:
    read = obs.read
    return max([o.attempt or 0 for a in read.signatures.values() for o in a.first_by_attempt.values()] +
               [len(read.attempt_boundaries), len(read.leg_ids)] + [0]) + (1 if read.current_leg_missing else 0)


def observe(obs: Observation) -> None:
    read = obs.read
    current = obs.job["current_attempt"]
    firsts = first_causes(read.signatures, read.events)
    first = firsts.get(current) or firsts.get(-1)
    first_sig = first.signature if first is not None else None
    for sig_id in sorted(read.signatures):
        agg = read.signatures[sig_id]
        sig = agg.signature
        cur = [o for k, o in agg.first_by_attempt.items() if k in (current, -1)]
        cur_first = min(cur, key=lambda o: (o.ts if o.ts is not None else float("inf"), o.line)) if cur else None
        cur_last = agg.last if agg.last is not None and (agg.last.attempt in (current, None)) else cur_first
        evidence = ev(cur_first or agg.first)
        if cur_last is not None and cur_first is not None and cur_last != cur_first:
            evidence += ev(cur_last)
        obs.add(SignatureMeasured(
            fact_id=f"signature:{sig_id}", evidence=tuple(evidence), sig=sig_id, family=sig.family,
            severity=sig.severity, gate=sig.gate, title=sig.title, count=agg.count, files=len(agg.files),
            in_current_attempt=cur_first is not None,
            progress_after=bool(placed := progress_after(cur_last, obs.last_progress)) if cur_first is not None else False,
            placed=placed is not None or cur_last.ts is not None if cur_first is not None else True,
            first_error=sig_id == first_sig and cur_first is not None, transient=sig.transient,
            remediation=sig.remediation, generic=sig_id in shapes()["generic"]))
    for sig_id, n in sorted(read.suppressed.items()):
        obs.add(SuppressedMeasured(fact_id=f"suppressed:{sig_id}", sig=sig_id, count=n))
