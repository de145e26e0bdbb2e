"""The first causal error of each attempt: the earliest primary error, not the loudest.

Observation-layer judgement over what the bundle reader (``rlhealth.probes.bundle``) found: the
signatures' severities, ``explains`` (a consequence is never named ahead of its cause) and
``detail_after`` (a traceback that only quotes a line yields to a signature of that line) come
from the catalog's data. Used by the observers, the Slurm capture normalizer and the audit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlhealth.catalog import Catalog
from rlhealth.facts import Occurrence
from rlhealth.probes.bundle import SignatureAgg, earlier, scan_signatures
from rlhealth.probes.events import EventLog, LogEvent, shapes


def first_causes(signatures: dict[str, SignatureAgg], events: EventLog | None) -> dict[int, FirstCause]:
    """The first causal error of each attempt from both the events (structure) and the
    signatures (names): ``attempt -> FirstCause``.

    Candidates are ranked: a primary event or a fatal/hang/transient signature (0), a marker (1),
    a consequence event or a secondary signature (2). A signature occurrence inside an event's
    lines is that event (its quote is the event's quoted line, its name the signature); inside a
    consequence event it ranks as one. Within a rank the earlier by time wins; when time cannot
    order them (undated, other files) a named signature's occurrence is kept first, then an
    event. Background telemetry exceptions and NCCL WARN lines (``note``) never compete.
    """
    named = first_errors_by_attempt(signatures)
    out: dict[int, FirstCause] = {}
    attempts = set(named) | (events.attempts() if events is not None else set())
    for attempt in attempts:
        cands: list[tuple[int, int, Occurrence, str | None, bool, LogEvent | None]] = []
        if attempt in named:
            occ, sig_id, transient = named[attempt]
            ev = events.containing(attempt, occ.source, occ.line) if events is not None else None
            rank = _SEVERITY_RANK[signatures[sig_id].signature.severity]
            if ev is not None:
                if ev.grade == "consequence":
                    rank = max(rank, 2)
                occ = _event_occurrence(ev)
            cands.append((rank, 0, occ, sig_id, transient, ev))
        if events is not None:
            for grades, rank in ((("primary",), 0), (("consequence",), 2)):
                ev = events.first(attempt, grades)
                if ev is not None:
                    cands.append((rank, 1, _event_occurrence(ev), _name_of(ev, signatures), False, ev))
        best = None
        for cand in cands:
            if best is None or cand[0] < best[0] or (cand[0] == best[0] and _before(cand[2], best[2])):
                best = cand
        if best is None:
            continue
        rank, _, occ, sig_id, transient, ev = best
        if sig_id is None and ev is not None:
            sig_id = _name_of(ev, signatures)
        generic = shapes()["generic"]
        out[attempt] = FirstCause(occ=occ, signature=sig_id, transient=transient, event=ev,
                                  named=sig_id is not None and sig_id not in generic)
    return out


_SEVERITY_RANK = {"fatal": 0, "hang": 0, "transient": 0, "marker": 1, "secondary": 2}


def _before(a: Occurrence, b: Occurrence) -> bool:
    """``a`` strictly before ``b``: by time when both are dated, else by line within one file."""
    if a.ts is not None and b.ts is not None:
        return a.ts < b.ts
    return a.source == b.source and a.line < b.line


def _event_occurrence(ev: LogEvent) -> Occurrence:
    return Occurrence(source=ev.source, line=ev.line, text=ev.text, ts=ev.ts, attempt=ev.attempt, at=getattr(ev, "at", None))


def _name_of(ev: LogEvent, signatures: dict[str, SignatureAgg]) -> str | None:
    """The signature naming an event: the first specific one matched on its lines, else a generic
    one, else None."""
    generic = shapes()["generic"]
    names = [n for n in ev.names if n in signatures and signatures[n].signature.severity != "benign"]
    specific = [n for n in names if n not in generic]
    return (specific or names or [None])[0]


@dataclass(frozen=True)
class FirstCause:
    """An attempt's first causal error: its quoted occurrence, the signature naming it (None: no
    signature does), whether that name is transient, the event it is (None: a signature's line
    that has no event shape) and whether a specific (not generic) signature names it."""
    occ: Occurrence
    signature: str | None
    transient: bool
    event: LogEvent | None
    named: bool


def first_errors_by_attempt(signatures: dict[str, SignatureAgg]) -> dict[int, tuple[Occurrence, str, bool]]:
    """The first causal error of each attempt: ``attempt -> (occurrence, signature id, transient)``.

    The earliest primary error (a fatal, hang or transient signature; a traceback quotes its
    exception line) wins; a marker (a wall-clock time limit) only when no primary exists; a
    survivor (secondary: TCPStore cascades, a cancellation) only when nothing else does. Benign
    noise never counts. Attempt -1 holds files without an attempt of their own.
    """
    ranks = {"fatal": 0, "hang": 0, "transient": 0, "marker": 1, "secondary": 2}
    candidates = {sig_id: agg for sig_id, agg in signatures.items() if agg.signature.severity in ranks}
    explained = _explained(candidates)
    best: dict[int, tuple[int, Occurrence, str, bool]] = {}
    for sig_id in sorted(candidates):
        agg = candidates[sig_id]
        rank = ranks[agg.signature.severity]
        for attempt, occ in agg.first_by_attempt.items():
            if (sig_id, attempt) in explained:
                continue
            prior = best.get(attempt)
            if prior is None or rank < prior[0] or (rank == prior[0] and earlier(occ, prior[1])) or (
                    rank == prior[0] and _same_line(occ, prior[1]) and _quotes_other_line(candidates[prior[2]])
                    and not _quotes_other_line(agg)):
                best[attempt] = (rank, occ, sig_id, agg.signature.transient)
    return {k: (v[1], v[2], v[3]) for k, v in best.items()}


def _same_line(a: Occurrence, b: Occurrence) -> bool:
    return a.source == b.source and a.line == b.line


def _quotes_other_line(agg: SignatureAgg) -> bool:
    """A signature that quotes another line (a traceback quoting its exception line) is generic:
    on that same line a signature matching the line itself names the error."""
    return agg.signature.detail_after is not None


def _explained(candidates: dict[str, SignatureAgg]) -> set[tuple[str, int]]:
    """``(signature id, attempt)`` pairs whose first occurrence is a consequence of another
    candidate signature of that attempt (the catalog's ``explains``): not timestamped strictly
    before the explaining signature's first occurrence. If that would leave an attempt with no
    candidate at all (explanations in a cycle), the attempt keeps all of them."""
    out: set[tuple[str, int]] = set()
    for explainer_id, explainer in candidates.items():
        for target in explainer.signature.explains:
            agg = candidates.get(target)
            if agg is None or target == explainer_id:
                continue
            for attempt, occ in agg.first_by_attempt.items():
                cause = explainer.first_by_attempt.get(attempt)
                if cause is None:
                    continue
                if occ.ts is not None and cause.ts is not None and occ.ts < cause.ts:
                    continue
                out.add((target, attempt))
    for attempt in {a for agg in candidates.values() for a in agg.first_by_attempt}:
        present = {sig_id for sig_id, agg in candidates.items() if attempt in agg.first_by_attempt}
        if present and all((sig_id, attempt) in out for sig_id in present):
            out -= {(sig_id, attempt) for sig_id in present}
    return out


def first_causal_signature(files: list[tuple[Path, str]], catalog: Catalog) -> tuple[Occurrence, str] | None:
    """The first causal error across the log files of ONE attempt and its signature id."""
    read = scan_signatures(files, catalog)
    found = first_causes(read.signatures, read.events).get(1)
    return (found.occ, found.signature) if found else None


def first_causal_error(files: list[tuple[Path, str]], catalog: Catalog) -> Occurrence | None:
    """The first causal error across the log files of ONE attempt (e.g. a Slurm chain leg's
    .err and .out), by the signature catalog -- the same knowledge the diagnosis uses."""
    found = first_causal_signature(files, catalog)
    return found[0] if found else None
