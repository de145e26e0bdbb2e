"""The early trial reader (``EarlyTrials``), forked before the diagnosis is imported and adopted by
``BackgroundSummary``: adopted, discarded, dead, or reading with other aliases, the summary is
the one a single process reads; no reader is left behind, and none is forked while a thread runs."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
from dataclasses import asdict
from pathlib import Path

import pytest

from rlhealth.packaged import packaged_yaml
from rlhealth.probes.parse import trials as T

ALIASES = dict(packaged_yaml("trial_exceptions.yaml").get("message_aliases") or {})


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("early") / "trace_jobs"
    for i in range(120):
        d = root / f"trial-{i:04d}"
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
        if i % 7 == 0:
            continue                                          # started, not finished
        start = f"2026-08-01T12:{i % 60:02d}:{i % 59:02d}.{i:03d}Z"
        doc = {"started_at": start, "finished_at": "2026-08-01T13:00:00Z",
               "verifier_result": {"rewards": {"reward": (i % 4) / 4}},
               "exception_info": {"exception_type": "RuntimeError"} if i % 5 == 0 else None,
               "agent_result": {"metadata": {"n_episodes": i % 13, "stop_reason": "max_turns" if i % 3 else ""}},
               "environment_setup": {"started_at": start, "finished_at": "2026-08-01T12:59:00Z"}}
        (d / "result.json").write_text(json.dumps(doc))
        if i % 5 == 0:
            (d / "exception.txt").write_text("Traceback ...\nAgentTimeoutError: took too long\n")
    return root


@pytest.fixture
def forking(monkeypatch):
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(T, "PROCESS_CHUNK", 4)
    monkeypatch.setattr(T, "cpus", lambda: 2)
    monkeypatch.setattr(T, "may_fork", lambda: True)            # idle threads other tests left behind


_REAL_MAY_FORK = T.may_fork


def _sequential(trace: Path, since: float | None = None) -> dict:
    return asdict(T.summarize_trials(trace, ALIASES, 8, workers=1, since=since))


def _no_reader_left() -> None:
    """Every reader has ended (a reader that delivered is collected once it exited: soon, not at once)."""
    import time
    deadline = time.monotonic() + 10
    while [p for p in multiprocessing.active_children() if p.name.startswith("rlhealth-trials")] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [p for p in multiprocessing.active_children() if p.name.startswith("rlhealth-trials")] == []


@pytest.mark.parametrize("after", [False, True])
def test_adopted_reader_gives_the_sequential_summary(trace, forking, after):
    early = T.EarlyTrials(trace)
    assert early.started
    background = T.BackgroundSummary(trace, ALIASES, 8, since=1785587400.0, early=early,
                                     after=(lambda: os.getpid()) if after else None)
    assert not early.started and early.tokens is None           # adopted: the summary owns it now
    early.discard()                                              # a no-op after adoption
    assert len(background._readers) == (2 if after else 1)       # a reader beside it only for ``after``
    assert asdict(background.result()) == _sequential(trace, since=1785587400.0)
    if after:
        assert background.after_results[0] is None               # the early reader never runs ``after``
        assert isinstance(background.after_results[1], int)
    _no_reader_left()


@pytest.mark.parametrize("dead", [False, True])
def test_a_tally_taken_before_the_result_gives_the_sequential_summary(trace, forking, dead):
    """``take_sent`` between log files: the early reader's tally, sent once the trial queue is
    empty, is taken then (the other reader's message only when it too has begun to send); a
    reader that died is read again in-process all the same."""
    import time
    early = T.EarlyTrials(trace)
    proc, _ = early._reader
    if dead:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
    background = T.BackgroundSummary(trace, ALIASES, 8, since=1785587400.0, early=early, after=lambda: time.sleep(1.5))
    deadline = time.monotonic() + 10
    while 0 not in background._received and time.monotonic() < deadline:
        background.take_sent()
        time.sleep(0.005)
    assert (background._received[0] is None) == dead
    assert 1 not in background._received                        # still in ``after``: not waited for
    assert asdict(background.result()) == _sequential(trace, since=1785587400.0)
    assert background._received == {}
    _no_reader_left()


def test_discarded_reader_is_ended(trace, forking):
    early = T.EarlyTrials(trace)
    proc, _ = early._reader
    early.discard()
    assert not proc.is_alive() and early.tokens is None and not early.started
    early.discard()
    _no_reader_left()


def test_a_dead_early_reader_is_read_again_in_process(trace, forking):
    early = T.EarlyTrials(trace)
    proc, _ = early._reader
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    background = T.BackgroundSummary(trace, ALIASES, 8, early=early)
    assert asdict(background.result()) == _sequential(trace)
    _no_reader_left()


def test_other_aliases_are_read_again_in_process(trace, forking):
    """The early reader read with the packaged aliases; a catalog with others gets its own reads."""
    other = {"took too long": "SomethingElseError"}
    early = T.EarlyTrials(trace)
    background = T.BackgroundSummary(trace, other, 8, early=early)
    summary = background.result()
    assert asdict(summary) == asdict(T.summarize_trials(trace, other, 8, workers=1))
    assert summary.exceptions["SomethingElseError"] == 20
    _no_reader_left()


def test_another_trace_root_is_not_adopted(trace, forking, tmp_path):
    (tmp_path / "trace_jobs").mkdir()
    early = T.EarlyTrials(tmp_path / "trace_jobs")
    assert not early.started                                      # nothing to read
    early = T.EarlyTrials(trace)
    elsewhere = tmp_path / "other" / "trace_jobs"
    elsewhere.mkdir(parents=True)
    background = T.BackgroundSummary(elsewhere, ALIASES, 8, early=early)
    assert early.started                                          # not adopted: the caller discards it
    early.discard()
    assert background.result().started == 0
    _no_reader_left()


def test_no_early_fork_while_a_thread_runs(trace, forking, monkeypatch):
    monkeypatch.setattr(T, "may_fork", _REAL_MAY_FORK)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        early = T.EarlyTrials(trace)
        assert not early.started and early.tokens is None
    finally:
        stop.set()
        other.join()
    background = T.BackgroundSummary(trace, ALIASES, 8, early=early)
    assert asdict(background.result()) == _sequential(trace)


def test_diagnose_discards_the_early_reader_when_the_diagnosis_fails(trace, forking, monkeypatch):
    """``rlhealth diagnose`` forks the reader first and ends it whatever the diagnosis does."""
    from rlhealth import cli
    import rlhealth.diagnose as D

    started: list[T.EarlyTrials] = []
    real = cli._early_trials

    def early_trials(bundle):
        early = real(bundle)
        started.append(early)
        return early

    def failing(*args, **kwargs):
        assert kwargs["early_trials"] is started[0] and started[0].started
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "_early_trials", early_trials)
    monkeypatch.setattr(D, "diagnose", failing)
    assert cli.main(["diagnose", str(trace.parent), "--now", "2026-08-03T12:05:00Z", "--format", "json"]) != 0
    assert started and not started[0].started
    _no_reader_left()


def test_diagnose_adopts_the_early_reader_with_the_same_report(trace, forking, monkeypatch, capsys):
    from rlhealth import cli

    adopted = []
    real_adopt = T.EarlyTrials.adopt

    def adopt(self, *args):
        adopted.append(self)
        return real_adopt(self, *args)

    monkeypatch.setattr(T.EarlyTrials, "adopt", adopt)
    argv = ["diagnose", str(trace.parent), "--now", "2026-08-03T12:05:00Z", "--format", "json"]
    code = cli.main(argv)
    with_early = capsys.readouterr().out
    assert len(adopted) == 1
    _no_reader_left()
    monkeypatch.setattr(cli, "_early_trials", lambda bundle: None)
    assert cli.main(argv) == code
    assert capsys.readouterr().out == with_early
    assert len(adopted) == 1
