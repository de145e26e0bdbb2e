"""The first causal error of each attempt: the earliest primary error, not the loudest.

Observation-layer judgement over what the bundle reader (``rlhealth.probes.bundle``) found: the
signatures' severities, ``explains`` (a consequence is never named ahead of its cause) and
``detail_after`` (a traceback that only quotes a line yields to a signature of that line) come
from the catalog's data. Used by the observers, the Slurm capture normalizer and the audit.
"""
from __future__ import annotations

from pathlib import Path

from rlhealth.catalog import Catalog
from rlhealth.facts import Occurrence
from rlhealth.probes.bundle import SignatureAgg, earlier, scan_signatures


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
    found = first_errors_by_attempt(scan_signatures(files, catalog).signatures).get(1)
    return (found[0], found[1]) if found else None


def first_causal_error(files: list[tuple[Path, str]], catalog: Catalog) -> Occurrence | None:
    """The first causal error across the log files of ONE attempt (e.g. a Slurm chain leg's
    .err and .out), by the signature catalog -- the same knowledge the diagnosis uses."""
    found = first_causal_signature(files, catalog)
    return found[0] if found else None
