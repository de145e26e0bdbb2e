"""Attempt chain, training metrics, step budget, first causal errors and source revision from logs.

Line formats: reference marin-artifacts §2 (WANDB_MIRROR, ``Training Step Progress: N / M``, the
Iris attempt boundary ``task=<id>/0 | [iris setup] step 1/2``) and §5.4 (``[rl-iris] MarinSkyRL now
at <sha>``). Lines in one log are in time order, so the first error of an attempt is its first
error line (not the loudest); lines explicitly tagged TRACE/DEBUG/INFO/WARNING and the known benign
passthroughs of §5.3 are not errors.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from rlhealth.audit.safefs import Root
from rlhealth.redact import redact

BOUNDARY = re.compile(r"task=\S+/0(?::\d+)? \| \[iris setup\] step 1/2")
WANDB = re.compile(r"WANDB_MIRROR\s+kind=(?P<kind>\S+)\s+step=(?P<step>\d+)\s+metrics=(?P<json>.*)$")
PROGRESS = re.compile(r"Training Step Progress:\s*(\d+)\s*/\s*(\d+)")
REVISION = [
    ("log: [rl-iris] MarinSkyRL now at", re.compile(r"\[rl-iris\] MarinSkyRL now at ([0-9a-fA-F]{7,40})\b")),
    ("log: HEAD is now at", re.compile(r"\bHEAD is now at ([0-9a-fA-F]{7,40})\b")),
]
SAVED = re.compile(r"Successfully saved checkpoint for global_step_(\d+)")
RESUMED = re.compile(r"Resumed training from global_step (\d+)")
TAGGED_BENIGN = re.compile(r"(?:\|\s*(?:TRACE|DEBUG|INFO|WARNING|SUCCESS)\s*\||\b(?:TRACE|DEBUG|INFO|WARNING) \d\d-\d\d \d\d:|\[[IW]\d{4} )")
BENIGN = re.compile(r"AgentTimeoutError|ContextLengthExceededError|load_pretrained_with_retry|"
                    r"does not appear to have a file named model\.safetensors|Could not find libnccl-net\.so|"
                    r"Unknown vLLM environment variable|opCount dead")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
ERROR = re.compile(r"(?:^|[\s:\]|])(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b:|CUDA out of memory|Fatal Python error|"
                   r"\bOOMKilled\b|Watchdog caught collective operation timeout|\|\s*(?:ERROR|CRITICAL)\s*\||"
                   r"\bERROR\b|terminate called after throwing|\bSIGABRT\b|\bSIGKILL\b")
PREFIX = re.compile(r"^(?:\([^)]*\)\s*)?(?:\[rank\d+\]:\s*)?")
EXC_LINE = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?::.*)?$")
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
    _pending_tb: dict | None = None

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
    malformed: int = 0
    duplicate_steps: int = 0
    progress: tuple[int, int] | None = None
    progress_quote: dict | None = None
    revisions: list[dict] = field(default_factory=list)
    saved_steps: set[int] = field(default_factory=set)


def _is_error(line: str) -> bool:
    if TAGGED_BENIGN.search(line) or BENIGN.search(line):
        return False
    return bool(TRACEBACK.search(line) or ERROR.search(line))


def scan_logs(root_files: list[tuple[Root, Path, bool]]) -> LogFacts:
    """``root_files``: (root, path, split_by_boundary) in chronological order. A file that is not
    split is one attempt (an HPC chain link); a split file starts a new attempt at each boundary."""
    facts = LogFacts()
    for root, path, split in root_files:
        src = root.display(path)
        facts.files.append(src)
        cur: Attempt | None = None
        for n, line in root.lines(path):
            if cur is None or (split and BOUNDARY.search(line) and cur.start_line != n):
                if cur is not None:
                    _close(cur)
                    cur.end_line = n - 1
                cur = Attempt(len(facts.attempts), src, n,
                              steps_at_start=max(facts.metrics) if facts.metrics else None)
                facts.attempts.append(cur)
            cur.end_line = n
            _scan_line(facts, cur, src, n, line)
        if cur is not None:
            _close(cur)
    return facts


def _close(a: Attempt) -> None:
    if a._pending_tb is not None and a.first_error is None:
        a.first_error = a._pending_tb
    a._pending_tb = None


def _scan_line(facts: LogFacts, a: Attempt, src: str, n: int, line: str) -> None:
    if "WANDB_MIRROR" in line:
        m = WANDB.search(line)
        if m and m["kind"] == "train":
            step = int(m["step"])
            try:
                payload = json.loads(m["json"].strip())
                if not isinstance(payload, dict):
                    raise ValueError
            except ValueError:
                facts.malformed += 1
            else:
                payload.setdefault("trainer/global_step", step)
                if step in facts.metrics:
                    facts.duplicate_steps += 1
                else:
                    facts.metrics[step] = payload
                    facts.metric_source[step] = f"{src}:{n}"
                a.max_step = step if a.max_step is None else max(a.max_step, step)
        return
    m = PROGRESS.search(line)
    if m:
        facts.progress = (int(m[1]), int(m[2]))
        facts.progress_quote = {"source": src, "line": n, "text": quote(line)}
    for label, rx in REVISION:
        m = rx.search(line)
        if m:
            facts.revisions.append({"source": f"{src}:{n}", "kind": label, "value": m[1].lower(), "attempt": a.index})
    m = SAVED.search(line)
    if m:
        facts.saved_steps.add(int(m[1]))
    m = RESUMED.search(line)
    if m and a.resumed_from is None:
        a.resumed_from = int(m[1])
    # first causal error of the attempt
    if a.first_error is not None:
        return
    stripped = PREFIX.sub("", line).strip()
    if a._pending_tb is not None:
        if EXC_LINE.match(stripped):
            tb = a._pending_tb
            a.first_error = {"source": src, "line": n, "text": quote(stripped),
                             "traceback_line": tb["line"]}
            a._pending_tb = None
        elif n - a._pending_tb["line"] > 400:
            _close(a)
        return
    if not _is_error(line):
        return
    if TRACEBACK.search(line):
        a._pending_tb = {"source": src, "line": n, "text": quote(line)}
    else:
        a.first_error = {"source": src, "line": n, "text": quote(line)}
