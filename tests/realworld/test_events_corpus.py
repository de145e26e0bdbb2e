"""Real failure excerpts (tests/realworld/events_corpus.yaml) read as log events.

Each excerpt goes through ``rlhealth.probes.events.read_events``: the events found, in order, must
be those listed (kind, type, message, quoted line, thread, signal, exit status, chained causes,
process). The first causal error the diagnosis quotes for the excerpt (the bundle reader's scan
and ``rlhealth.first_error.first_causes``) must be on the listed line.
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from rlhealth.catalog import load_catalog
from rlhealth.first_error import first_causes
from rlhealth.probes.bundle import scan_signatures
from rlhealth.probes.events import read_events

CORPUS = Path(__file__).with_name("events_corpus.yaml")
ENTRIES = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))["entries"]
REFERENCE = datetime(2026, 8, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()
KINDS = {"exception", "cpp_abort", "fatal_signal", "exit_status", "kernel", "nccl_warn", "slurm", "fatal_log",
         "logged_error", "comm_error", "runtime_error", "kernel_record", "k8s_event", "ray_exit"}


def test_corpus_size_and_sources():
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert len(ENTRIES) >= 40
    for e in ENTRIES:
        assert str(e.get("source") or "").strip(), e["id"]
        assert e["text"].strip() and e["events"], e["id"]
        assert all(ev["kind"] in KINDS for ev in e["events"]), e["id"]
    kinds = {ev["kind"] for e in ENTRIES for ev in e["events"]}
    assert kinds >= {"exception", "cpp_abort", "fatal_signal", "exit_status", "kernel", "nccl_warn", "slurm"}, kinds
    assert any(ev.get("thread") == "background" for e in ENTRIES for ev in e["events"])


def check_event(got, want: dict, where: str) -> None:
    assert got.kind == want["kind"], (where, got)
    assert got.exc_type == want["exc_type"], (where, got)
    if "message" in want:
        assert want["message"] in (got.message or ""), (where, got.message)
    if "quote" in want:
        assert want["quote"] in got.text, (where, got.text)
    if "line" in want:
        assert got.line == want["line"], (where, got)
    assert got.thread == want.get("thread", "main"), (where, got.thread)
    assert got.signal == want.get("signal"), (where, got.signal)
    assert got.exit_status == want.get("exit_status"), (where, got.exit_status)
    for cause in want.get("causes") or []:
        assert cause in got.causes, (where, got.causes)
    if "process" in want:
        assert got.process == want["process"], (where, got.process)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_events(entry):
    events = read_events(entry["text"].splitlines(), reference_epoch=REFERENCE)
    assert len(events) == len(entry["events"]), [repr(e) for e in events]
    for got, want in zip(events, entry["events"]):
        check_event(got, want, entry["id"])


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_first_causal_error_line(entry, tmp_path):
    log = tmp_path / "excerpt.log"
    log.write_text(entry["text"], encoding="utf-8")
    read = scan_signatures([(log, "excerpt.log")], load_catalog(), REFERENCE)
    causes = first_causes(read.signatures, read.events)
    first = causes.get(1) or causes.get(-1)
    want = entry["first_cause_line"]
    if want is None:
        assert first is None, (first.occ.line, first.occ.text)
        return
    assert first is not None, [repr(e) for e in read.events.events()]
    assert first.occ.line in (want if isinstance(want, list) else [want]), (first.occ.line, first.occ.text)
