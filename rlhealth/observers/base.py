"""What observers share: the Observation being filled, and small measurement helpers."""
from __future__ import annotations

import json
import math
import re
import statistics
from array import array
from dataclasses import dataclass, field
from typing import Any

from rlhealth.catalog import Catalog
from rlhealth.facts import Evidence, Fact, Occurrence
from rlhealth.probes.bundle import BundleRead
from rlhealth.probes.parse import read_count
from rlhealth.probes.textio import clean_line, quote


@dataclass
class Observation:
    """All measurement facts of one diagnosis plus the context the report needs."""
    read: BundleRead
    catalog: Catalog
    now: float
    facts: list[Fact] = field(default_factory=list)
    job: dict[str, Any] = field(default_factory=dict)
    """The job measurement as a dict (identity and configuration for the report)."""
    records: dict[int, Any] = field(default_factory=dict)
    """Metric records by step (first occurrence of a step wins across the chain)."""
    last_progress: Occurrence | None = None
    duty_cycle: dict[str, Any] | None = None
    phase_table: list[dict[str, Any]] = field(default_factory=list)
    metric_window: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    max_retries: int | None = None
    first_error: Evidence | None = None
    model_observed: dict[str, Any] = field(default_factory=dict)
    """The model as the evidence states it (name, source, parameters), before any given ``--model``."""
    identity: dict[str, Any] | None = None
    """The job's identity (rlhealth/observers/identity.py) for the report."""
    coherence: Any = None
    """The coherence sample being measured apart (``coherence.measuring``), if it is."""

    @property
    def param(self) -> dict[str, float]:
        """Measurement parameters and thresholds (rules/thresholds.yaml)."""
        return self.catalog.thresholds

    @property
    def evidence_time(self) -> float:
        return self.read.newest_evidence or self.now

    def add(self, fact: Fact) -> Fact:
        self.facts.append(fact)
        return fact


def ev(occ: Occurrence | None) -> list[Evidence]:
    if occ is None:
        return []
    return [Evidence(source=occ.source, line=occ.line, text=quote(occ.text, getattr(occ, "at", None)))]


def summary(source: str, text: str) -> Evidence:
    """A restatement of several lines or a record: labelled as a summary, no line number."""
    return Evidence(source=source, text=quote(text), summary=True)


def finite(values) -> list[float]:
    """``values`` without None, NaN and infinities (other values kept as they are)."""
    isfinite = math.isfinite
    if type(values) is array:           # doubles only (trial rewards and durations)
        if isfinite(sum(values)):       # no NaN or infinity among them (a finite sum proves it)
            return values.tolist()
        return [v for v in values if isfinite(v)]
    return [v for v in values if v is not None and (not isinstance(v, float) or isfinite(v))]


def median(values) -> float | None:
    values = finite(values)
    return statistics.median(values) if values else None


def quantile(values: list[float], q: float) -> float | None:
    values = sorted(finite(values))
    if not values:
        return None
    return values[min(len(values) - 1, max(0, int(q * len(values))))]


def finite_mean(values) -> float | None:
    """The mean of ``values`` (finite numbers); None when there are none or when it overflows (a
    garbled magnitude such as 1e308: ``statistics.fmean`` raises, a plain sum is infinite)."""
    if not values:
        return None
    try:
        mean = statistics.fmean(values)
    except (OverflowError, ValueError):
        return None
    return mean if math.isfinite(mean) else None


def as_dict(value: Any) -> dict:
    """``value`` if it is a JSON object, else an empty one (a member of the wrong type in evidence
    reads as absent, never as an exception)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    """``value`` if it is a JSON array, else an empty one (see ``as_dict``)."""
    return value if isinstance(value, list) else []


def as_key(value: Any) -> Any:
    """A JSON value usable as a set member or dict key: a list or object (garbled, where an id or
    a rank belongs) by its JSON text, anything else as it is."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def as_count(value: Any, default: int | None = 0) -> int | None:
    """A count from JSON evidence (``probes.parse.read_count``: an int, a finite float truncated or
    a string of digits, of at most ``MAX_COUNT_DIGITS`` digits); anything else (garbled or hostile:
    "abc", 1e999, NaN, true, thousands of digits, a negative number) is ``default``, never an
    exception."""
    got = read_count(value)
    return default if got is None or got < 0 else got


def rounded(value: float | None, digits: int = 1) -> float | None:
    return round(value, digits) if value is not None else None


def capture_rel(read: BundleRead) -> str:
    return read.capture_dir.relative_to(read.root).as_posix() if read.capture_dir else ""


CONFIG_FILE_MAX_BYTES = 4 * 1024 * 1024
"""Configuration files larger than this are not searched line by line (a garbled or hostile file)."""


def locate(obs: Observation, pattern: re.Pattern) -> tuple[str, int, str, re.Match] | None:
    """The first line of the capture's job.json / pods.json, else manifest.json, that ``pattern``
    matches: (bundle-relative file, 1-based line, the line, the match); None when none does."""
    read = obs.read
    paths = []
    if read.capture_dir is not None:
        paths += [read.capture_dir / "job.json", read.capture_dir / "pods.json"]
    paths.append(read.root / "manifest.json")
    for path in paths:
        try:
            if not path.is_file() or path.stat().st_size > CONFIG_FILE_MAX_BYTES:
                continue
            with path.open("rb") as fh:
                for lineno, raw in enumerate(fh, start=1):
                    text = clean_line(raw)
                    m = pattern.search(text)
                    if m:
                        return path.relative_to(read.root).as_posix(), lineno, text, m
        except OSError:
            continue
    return None
