"""Every real excerpt of tests/realworld/events_corpus.yaml re-wrapped in each line-prefix style
the event reader peels (every line of it): the events keep their kind, type, message, quoted line
number and, where the prefix carries a time, that time (the outermost prefix is the writer's
clock: a container runtime, a logger around the line)."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from rlhealth.probes.events import peel, read_events

CORPUS = Path(__file__).parent.parent / "realworld" / "events_corpus.yaml"
ENTRIES = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))["entries"]
REFERENCE = datetime(2026, 8, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()
AT = datetime(2026, 5, 12, 8, 1, 39, tzinfo=timezone.utc).timestamp()
"""The time every dated prefix below states (2026-05-12 08:01:39 UTC; yearless ones read
against a capture time of 2026-08-01)."""

# style -> (prefix, the time it states or None, the process key it gives or None)
STYLES = {
    "ray_actor": ("(FSDPPolicyWorker pid=5120, ip=10.0.5.13) ", None, "FSDPPolicyWorker pid=5120, ip=10.0.5.13"),
    "torchrun_rank": ("[rank3]: ", None, "rank3"),
    "container_iso": ("2026-05-12T08:01:39.331095044Z ", AT, None),
    "compose_service": ("svc-1  | ", None, "svc-1"),
    "loguru": ("2026-05-12 08:01:39.331 | ERROR    | mod:fn:12 - ", AT, None),
    "glog_bracketed": ("[E0512 08:01:39.331095 123 file.cpp:12] ", AT, None),
    "glog_bare": ("E0512 08:01:39.331095 123 file.cpp:12] ", AT, None),
    "vllm": ("ERROR 05-12 08:01:39 [file.py:710] ", AT, None),
    "python_logging": ("2026-05-12 08:01:39,331 - name - ERROR - ", AT, None),
    "slurm_srun": ("srun: ", None, None),
    "iris_finelog": ("task=/alice/rl-x/0 | ", None, None),
    "container_then_ray": ("2026-05-12T08:01:39.331095044Z (FSDPPolicyWorker pid=5120, ip=10.0.5.13) ", AT,
                           "FSDPPolicyWorker pid=5120, ip=10.0.5.13"),
    "compose_then_rank": ("svc-1  | [rank3]: ", None, "svc-1 rank3"),
}
SUFFIXES = {"lf": "", "crlf": "\r"}


def wrap(text: str, prefix: str, suffix: str = "") -> list[str]:
    return [prefix + line + suffix for line in text.splitlines()]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_peel_gives_the_body_back(style):
    prefix, _, process = STYLES[style]
    p = peel(prefix + "torch.OutOfMemoryError: CUDA out of memory.")
    assert p.body == "torch.OutOfMemoryError: CUDA out of memory."
    if process is not None:
        assert p.process == process


def test_ansi_and_crlf_are_peeled():
    p = peel("\x1b[36m(FSDPPolicyWorker pid=5120, ip=10.0.5.13)\x1b[0m torch.OutOfMemoryError: CUDA out of memory.\r\n")
    assert p.body == "torch.OutOfMemoryError: CUDA out of memory."
    assert p.process == "FSDPPolicyWorker pid=5120, ip=10.0.5.13"


@pytest.mark.parametrize("suffix", sorted(SUFFIXES))
@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_wrapped_excerpt_keeps_its_events(entry, style, suffix):
    prefix, at, process = STYLES[style]
    plain = read_events(entry["text"].splitlines(), reference_epoch=REFERENCE)
    wrapped = read_events(wrap(entry["text"], prefix, SUFFIXES[suffix]), reference_epoch=REFERENCE)
    assert plain, entry["id"]
    assert [(e.kind, e.exc_type, e.message, e.line) for e in wrapped] == \
        [(e.kind, e.exc_type, e.message, e.line) for e in plain]
    for e in wrapped:
        if at is not None:
            assert e.ts == pytest.approx(at, abs=1.0), (e, e.ts)
        if process is not None and e.kind != "slurm":
            assert e.process is not None and e.process.startswith(process), e.process
