"""Signature occurrences: per signature of the catalog, the count, a few kept occurrences, the
last, and the first per attempt (``SignatureAgg``); lines a signature's pattern matched inside a
longer word, or that a suppressing signature, a skip rule or a background telemetry thread's
exception covers, are counted as suppressed instead."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlhealth.facts import Occurrence
from rlhealth.probes import events as events_mod
from rlhealth.probes.extract import LOGGED_TRACE_PREFIX, Extractor, PendingOccurrence, settled
from rlhealth.probes.scan import strip_actor_prefix

if TYPE_CHECKING:
    from rlhealth.catalog import Catalog, Signature
    from rlhealth.probes.extractors.failures import Events

MAX_KEPT_OCCURRENCES = 3
MAX_FIRST_CHAINS = 8
"""Per signature and attempt, how many record-early occurrences a part scanned on its own keeps a
first-occurrence fold for (``_ChainedAgg``); a merge that would need one more is undecidable."""
_EXCEPTION_LINE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt|Abort)\b.*")


def earlier(a: Occurrence, b: Occurrence) -> bool:
    """True when ``a`` happened before ``b``: by timestamp, else by line within one file."""
    if a.ts is not None and b.ts is not None and a.ts != b.ts:
        return a.ts < b.ts
    if a.source == b.source:
        return a.line < b.line
    return False   # no common clock across files: keep the first seen


@dataclass
class SignatureAgg:
    """Occurrences of one signature: count, a few kept, first per attempt."""
    signature: Signature
    count: int = 0
    kept: list[Occurrence] = field(default_factory=list)
    last: Occurrence | None = None
    first_by_attempt: dict[int, Occurrence] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)

    def add(self, occ: Occurrence) -> None:
        self.count += 1
        self.files.add(occ.source)
        if len(self.kept) < MAX_KEPT_OCCURRENCES:
            self.kept.append(occ)
        self.last = occ
        key = occ.attempt if occ.attempt is not None else -1
        prior = self.first_by_attempt.get(key)
        if prior is None or earlier(occ, prior):
            self.first_by_attempt[key] = occ

    @property
    def first(self) -> Occurrence | None:
        best = None
        for occ in self.kept + ([self.last] if self.last else []):
            if best is None or earlier(occ, best):
                best = occ
        return best


class _ChainedAgg(SignatureAgg):
    """The ``SignatureAgg`` of a part scanned on its own, which still knows what
    ``first_by_attempt`` becomes when the part's occurrences come after those of earlier parts.

    In order, an occurrence replaces the first P held so far (from an earlier file, so another
    source) only if both have timestamps and it is earlier; P therefore only decides where the
    in-part fold starts: at the first occurrence timestamped before P. That occurrence sets a new
    earliest timestamp in the part ("record-early"); ``chains[attempt]`` holds, for each
    record-early occurrence in order, ``[it, the fold of ``earlier`` from it to the end]``.
    """

    def __init__(self, signature):
        super().__init__(signature)
        self.chains: dict[int, list[list]] = {}
        self.overflow: set[int] = set()

    def add(self, occ) -> None:
        super().add(occ)
        key = occ.attempt if occ.attempt is not None else -1
        chains = self.chains.get(key)
        if chains is None:
            chains = self.chains[key] = []
        for chain in chains:
            if earlier(occ, chain[1]):
                chain[1] = occ
        if occ.ts is not None and (not chains or occ.ts < chains[-1][0].ts):
            if len(chains) < MAX_FIRST_CHAINS:
                chains.append([occ, occ])
            else:
                self.overflow.add(key)

    def first_after(self, key: int, prior):
        """``first_by_attempt[key]`` had the part been routed after ``prior`` was the first;
        ``_UNDECIDED`` when the fold it needs was not kept."""
        if prior is None:
            return self.first_by_attempt[key]
        if prior.ts is None:
            return prior
        for start, first in self.chains.get(key, ()):
            if start.ts < prior.ts:
                return first
        return _UNDECIDED if key in self.overflow else prior


_UNDECIDED = object()
_TOKEN_RX: dict[tuple[str, str, bool], re.Pattern] = {}


class TokenRegexes:
    """Each signature's pattern as a Python regex (its whole-word check, ``events.token_match``),
    compiled when first asked for: a diagnosis checks only the signatures its logs matched."""

    def __init__(self, catalog: Catalog):
        self._signatures = catalog.signatures

    def __contains__(self, k: str) -> bool:
        return k in self._signatures

    def __getitem__(self, k: str) -> re.Pattern:
        sig = self._signatures[k]
        key = (k, sig.pattern, sig.caseless)
        rx = _TOKEN_RX.get(key)
        if rx is None:
            rx = _TOKEN_RX[key] = re.compile(sig.pattern, re.IGNORECASE if sig.caseless else 0)
        return rx


def token_regexes(catalog: Catalog) -> TokenRegexes:
    """Each signature's pattern as a Python regex, by signature id (compiled on first use)."""
    return TokenRegexes(catalog)


class Signatures(Extractor):
    """Every key that is no extractor's (``x_...``) is a signature id of the catalog."""

    def __init__(self, catalog: Catalog, skip: dict[str, re.Pattern], events: Events, *, chained: bool = False):
        self.catalog = catalog
        self.skip = skip
        self.events = events
        self.token_rx = token_regexes(catalog)
        self.agg_class = _ChainedAgg if chained else SignatureAgg
        self.aggs: dict[str, SignatureAgg] = {}
        self.suppressed: dict[str, int] = {}
        self._plans: dict[frozenset, tuple[list[str], frozenset]] = {}

    def __getstate__(self):
        """What a part carries to the fold: no catalog (the fold has it)."""
        for agg in self.aggs.values():
            agg.signature = None
        return {"aggs": self.aggs, "suppressed": self.suppressed}

    def claims(self, key: str) -> bool:
        return not key.startswith("x_")

    def _plan(self, keys: frozenset) -> tuple[list[str], frozenset]:
        plan = self._plans.get(keys)
        if plan is None:
            sig_keys = sorted(k for k in keys if not k.startswith("x_"))
            suppressed = frozenset(s for k in sig_keys for s in self.catalog.signatures[k].suppresses)
            plan = self._plans[keys] = (sig_keys, suppressed)
        return plan

    def feed(self, hit, keys, occ: PendingOccurrence) -> None:
        sig_keys, suppressed = self._plan(keys)
        in_event = self.events.open_event(hit)
        text = hit.text
        signatures, aggs, suppressed_counts = self.catalog.signatures, self.aggs, self.suppressed
        for k in sig_keys:
            sig = signatures[k]
            if k in self.token_rx and not events_mod.token_match(self.token_rx[k], text):
                continue            # the wording inside a longer word: no occurrence
            if k in suppressed or (k in self.skip and self.skip[k].search(text)) or (
                    in_event is not None and in_event.grade == "note" and in_event.thread == "background"):
                suppressed_counts[k] = suppressed_counts.get(k, 0) + 1
                continue
            if in_event is not None and k not in in_event.names:
                in_event.names.append(k)
            if sig.detail_after == "exception_line":
                detail = _exception_line(hit)
                if detail is not None:
                    occ_k = Occurrence(source=occ.source, line=detail[0], text=detail[1], ts=occ.ts, attempt=occ.attempt)
                    self._agg(k, sig).add(occ_k)
                    continue
            self._agg(k, sig).add(occ)

    def _agg(self, k: str, sig) -> SignatureAgg:
        agg = self.aggs.get(k)
        if agg is None:
            agg = self.aggs[k] = self.agg_class(sig)
        return agg

    def _firsts(self, later: Signatures) -> dict[tuple[str, int], Any] | None:
        firsts: dict[tuple[str, int], Any] = {}
        for k, agg in later.aggs.items():
            prior_agg = self.aggs.get(k)
            for key in agg.first_by_attempt:
                prior = prior_agg.first_by_attempt.get(key) if prior_agg is not None else None
                chosen = agg.first_after(key, prior)
                if chosen is _UNDECIDED:
                    return None
                firsts[(k, key)] = chosen
        return firsts

    def mergeable(self, later: Signatures) -> bool:
        return self._firsts(later) is not None

    def merge(self, later: Signatures) -> None:
        firsts = self._firsts(later)
        for k, agg in later.aggs.items():
            into = self.aggs.get(k)
            if into is None:
                into = self.aggs[k] = self.agg_class(self.catalog.signatures[k])
            into.count += agg.count
            into.files |= agg.files
            room = MAX_KEPT_OCCURRENCES - len(into.kept)
            if room > 0:
                into.kept.extend(agg.kept[:room])
            if agg.last is not None:
                into.last = agg.last
            for key in agg.first_by_attempt:
                into.first_by_attempt[key] = firsts[(k, key)]
        for k, n in later.suppressed.items():
            self.suppressed[k] = self.suppressed.get(k, 0) + n

    def result(self, read) -> None:
        out = {}
        for k, agg in self.aggs.items():
            done = SignatureAgg(agg.signature if agg.signature is not None else self.catalog.signatures[k], agg.count,
                                [settled(o) for o in agg.kept], settled(agg.last),
                                {a: settled(o) for a, o in agg.first_by_attempt.items()}, agg.files)
            out[k] = done
        read.signatures = out
        read.suppressed = self.suppressed


def _exception_line(hit) -> tuple[int, str] | None:
    """The exception line closing a traceback that starts at ``hit`` (same block)."""
    for offset, line in enumerate(hit.following_lines(limit=300), start=1):
        body = LOGGED_TRACE_PREFIX.sub("", strip_actor_prefix(line), count=1)
        if not body.strip() or body.startswith((" ", "\t")) or body.startswith("Traceback"):
            continue
        if _EXCEPTION_LINE_RE.match(body) or ": " in body:
            return hit.lineno + offset, line
        return None
    return None
