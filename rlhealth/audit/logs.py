"""Attempt chain, training metrics, step budget, first causal errors and source revision from logs.

The judgements are the diagnosis's own (one judgement, two commands):
  * the first causal error of each attempt comes from the signature catalog
    (``rules/signatures``) through ``probes.bundle.scan_log_file`` and
    ``rlhealth.first_error.first_errors_by_attempt``: earliest primary error, not the loudest; benign
    noise and WARNING-tagged tracebacks never count;
  * metrics are read by ``probes.parse.trainer`` in every serialization the diagnosis reads
    (``WANDB_MIRROR`` JSON and the legacy python-dict blocks);
  * attempts split at the diagnosis's Iris boundary extractor (``x_boundary``).
What only the audit needs -- revisions per attempt, logged checkpoint saves, resume points, and the
metric data it refuses (``baddata``: malformed metric lines, non-numeric or missing rewards, by file,
line and value) -- is a second streaming pass over the same files (reference marin-artifacts §5.4, log-formats §8.3).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from rlhealth.audit.baddata import MetricDataCheck, refusals
from rlhealth.audit.baddata import reward_keys as baddata_reward_keys
from rlhealth.audit.safefs import Root
from rlhealth.catalog import load_catalog
from rlhealth.first_error import first_causes
from rlhealth.probes.bundle import EXTRACTORS, scan_log_file
from rlhealth.probes.parse import COUNT
from rlhealth.probes.parse import trainer as tp
from rlhealth.redact import redact

BOUNDARY = re.compile(EXTRACTORS["x_boundary"])
REVISION = [
    ("log: [rl-iris] MarinSkyRL now at", re.compile(r"\[rl-iris\] MarinSkyRL now at ([0-9a-fA-F]{7,40})\b")),
    ("log: HEAD is now at", re.compile(r"\bHEAD is now at ([0-9a-fA-F]{7,40})\b")),
]
SAVED = re.compile(rf"Successfully saved checkpoint for global_step_({COUNT})")
RESUMED = tp.RESUMED_RE
MAX_TEXT = 500


def quote(text: str) -> str:
    t = redact(text.strip())
    return t if len(t) <= MAX_TEXT else t[: MAX_TEXT - 1] + "…"


@dataclass
class Attempt:
    index: int
    source: str
    start_line: int
    end_line: int = 0
    first_error: dict | None = None
    max_step: int | None = None
    steps_at_start: int | None = None  # highest metric step seen before this attempt began
    resumed_from: int | None = None

    def as_dict(self, budget: int | None) -> dict:
        redundant = budget is not None and self.steps_at_start is not None and self.steps_at_start >= budget
        return {"attempt": self.index, "source": self.source, "start_line": self.start_line,
                "end_line": self.end_line, "max_step": self.max_step, "resumed_from": self.resumed_from,
                "first_error": self.first_error, "after_budget_complete": redundant}


@dataclass
class LogFacts:
    files: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    metrics: dict[int, dict] = field(default_factory=dict)  # step -> metrics (first occurrence wins)
    metric_source: dict[int, str] = field(default_factory=dict)
    metric_ts: dict[int, float | None] = field(default_factory=dict)
    serializations: dict[str, int] = field(default_factory=dict)  # wandb-json / python-dict -> steps
    malformed: int = 0
    duplicate_steps: int = 0
    progress: tuple[int, int] | None = None
    progress_quote: dict | None = None
    revisions: list[dict] = field(default_factory=list)
    saved_steps: set[int] = field(default_factory=set)
    refused: dict = field(default_factory=lambda: {"findings": [], "counts": {}})  # baddata.refusals


def scan_logs(root_files: list[tuple[Root, Path, bool]], reward_keys: tuple[str, ...] = ()) -> LogFacts:
    """``root_files``: (root, path, split_by_boundary) in chronological order. A file that is not
    split is one attempt (an HPC chain link); a split file starts a new attempt at each boundary.
    ``reward_keys``: the reward metrics whose values are checked (``baddata``)."""
    facts = LogFacts()
    data = MetricDataCheck(reward_keys or baddata_reward_keys(None))
    for root, path, split in root_files:
        src = root.display(path)
        real = root.resolve(path)
        if real is None:
            continue
        facts.files.append(src)
        file_attempts = _chain_pass(facts, root, path, src, split, data)
        data.end_file()
        _catalog_pass(facts, real, src, split, file_attempts)
    facts.refused = refusals(data)
    high = None
    for a in facts.attempts:  # chronological: steps already logged when each attempt began
        a.steps_at_start = high
        if a.max_step is not None:
            high = a.max_step if high is None else max(high, a.max_step)
    return facts


def _chain_pass(facts: LogFacts, root: Root, path: Path, src: str, split: bool, data: MetricDataCheck) -> list[Attempt]:
    made: list[Attempt] = []
    cur: Attempt | None = None
    for n, line in root.lines(path):
        data.feed(src, n, line)
        if cur is None or (split and BOUNDARY.search(line) and cur.start_line != n):
            if cur is not None:
                cur.end_line = n - 1
            cur = Attempt(len(facts.attempts), src, n)
            facts.attempts.append(cur)
            made.append(cur)
        cur.end_line = n
        sp = tp.parse_step_progress(line) if "Training Step Progress" in line else None
        if sp is not None:
            facts.progress = sp
            facts.progress_quote = {"source": src, "line": n, "text": quote(line)}
        for label, rx in REVISION:
            m = rx.search(line)
            if m:
                facts.revisions.append({"source": f"{src}:{n}", "kind": label, "value": m[1].lower(), "attempt": cur.index})
        m = SAVED.search(line)
        if m:
            facts.saved_steps.add(int(m[1]))
        m = RESUMED.search(line)
        if m and cur.resumed_from is None:
            cur.resumed_from = int(m[1])
    return made


def _attempt_at(attempts: list[Attempt], line: int) -> Attempt | None:
    for a in attempts:
        if a.start_line <= line <= a.end_line:
            return a
    return attempts[-1] if attempts else None


def _catalog_pass(facts: LogFacts, real: Path, src: str, split: bool, attempts: list[Attempt]) -> None:
    read = scan_log_file(real, src, attempt=attempts[0].index if attempts else 0, split_at_boundaries=split,
                         catalog=load_catalog())
    facts.malformed += read.malformed_metric_lines
    for rec in sorted(read.metric_records, key=lambda r: r.line):
        a = _attempt_at(attempts, rec.line)
        if a is not None:
            a.max_step = rec.step if a.max_step is None else max(a.max_step, rec.step)
        if rec.step in facts.metrics:
            facts.duplicate_steps += 1
            continue
        facts.metrics[rec.step] = dict(rec.metrics)
        facts.metric_source[rec.step] = f"{src}:{rec.line}"
        facts.metric_ts[rec.step] = rec.ts
        facts.serializations[rec.serialization] = facts.serializations.get(rec.serialization, 0) + 1
    for cause in first_causes(read.signatures, read.events).values():
        occ, sig_id, transient = cause.occ, cause.signature, cause.transient
        a = _attempt_at(attempts, occ.line)
        if a is None or (a.first_error is not None and a.first_error["line"] <= occ.line):
            continue
        sig = read.signatures[sig_id].signature if sig_id in read.signatures else None
        a.first_error = {"source": src, "line": occ.line, "text": quote(occ.text), "signature": sig_id,
                         "severity": sig.severity if sig else (cause.event.grade if cause.event else None),
                         "family": sig.family if sig else None, "transient": bool(transient)}
