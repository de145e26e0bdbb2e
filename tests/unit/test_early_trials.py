"""The early trial reader (``EarlyTrials``): forked before the diagnosis is imported, adopted by
the bundle's ``BackgroundSummary`` once the tally parameters are known, its summary is exactly the
one-process summary; an unadopted or mismatched early reader changes nothing and leaves no process."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from rlhealth.packaged import packaged_yaml
from rlhealth.probes.parse import trials as T

ALIASES = dict(packaged_yaml("trial_exceptions.yaml").get("message_aliases") or {})
SINCE = 1785585600.0 + 1800      # 2026-08-01T12:30:00Z: the trials started before are an earlier attempt


def _trace(root: Path, n: int = 240) -> Path:
    trace = root / "trace_jobs"
    needle, alias = next(iter(ALIASES.items()))
    for i in range(n):
        d = trace / f"trial-{i:04d}"
        d.mkdir(parents=True)
        minute = i % 60
        doc = {"started_at": f"2026-08-01T12:{minute:02d}:00.000Z",
               "verifier_result": {"rewards": {"reward": (i % 5) / 4}},
               "exception_info": {"exception_type": "RuntimeError"} if i % 7 == 0 else None,
               "agent_result": {"metadata": {"n_episodes": i % 11}},
               "agent_execution": {"started_at": f"2026-08-01T12:{minute:02d}:00.000Z",
                                   "finished_at": f"2026-08-01T12:{minute:02d}:30.500Z"}}
        if i % 13 != 0:                                  # every 13th has not completed
            (d / "result.json").write_text(json.dumps(doc))
        (d / "config.json").write_text("{}")
        if i % 7 == 0:                                   # a generic type named by its exception.txt
            (d / "exception.txt").write_text(f"Traceback ...\nsomething: {needle} here\n")
    return trace


@pytest.fixture()
def forking(monkeypatch):
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(T, "PROCESS_CHUNK", 7)
    monkeypatch.setattr(T, "_cpus", lambda: 2)
    monkeypatch.setattr(T, "_may_fork", lambda: True)            # idle threads other tests left behind


def _expected(trace: Path, aliases: dict, since: float | None) -> dict:
    return asdict(T.summarize_trials(trace, aliases, 50, workers=1, since=since))


def _alive(proc) -> bool:
    return proc.is_alive()


@pytest.mark.parametrize("since", [None, SINCE])
@pytest.mark.parametrize("after", [False, True])
def test_adopted_early_reader_equals_one_process(tmp_path, forking, since, after):
    trace = _trace(tmp_path)
    expected = _expected(trace, ALIASES, since)
    plain = T.summarize_trials(trace, ALIASES, 50, workers=1, since=since)
    assert plain.exceptions[next(iter(ALIASES.values()))] > 0, "the alias must be exercised"
    assert (plain.prior_generation > 0) == (since is not None)
    early = T.EarlyTrials(trace)
    assert early.started
    proc = early._reader[0]
    summary = T.BackgroundSummary(trace, ALIASES, 50, since=since, early=early,
                                  after=(lambda: "after ran") if after else None)
    # with work for after the reads, one more reader is forked; without, the early one is the only one
    assert len(summary._readers) == (2 if after else 1)
    assert summary._readers[0][0] is proc
    assert asdict(summary.result()) == expected
    if after:
        assert "after ran" in summary.after_results
    early.discard()                                              # a no-op once adopted
    assert not _alive(proc)


def test_parameters_sent_after_the_early_reader_read_everything(tmp_path, forking):
    trace = _trace(tmp_path, 60)
    expected = _expected(trace, ALIASES, SINCE)
    early = T.EarlyTrials(trace)
    proc = early._reader[0]
    deadline = time.monotonic() + 30
    while _readable(early.tokens):                               # until every chunk is claimed
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)                                              # its last chunk read: waiting for the parameters
    summary = T.BackgroundSummary(trace, ALIASES, 50, since=SINCE, early=early)
    assert summary._readers[0][0] is proc
    assert asdict(summary.result()) == expected


def _readable(fd: int) -> bool:
    """Bytes (chunk numbers) still waiting in the pipe ``fd``."""
    import fcntl
    import struct
    import termios
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] > 0


def test_other_aliases_make_the_early_reader_step_aside(tmp_path, forking):
    """The early reader read with the packaged aliases; a summary asked with others gets the
    in-process reread's answer (the early reader sends nothing usable)."""
    trace = _trace(tmp_path)
    expected = _expected(trace, {}, None)
    assert expected != _expected(trace, ALIASES, None)
    early = T.EarlyTrials(trace)
    summary = T.BackgroundSummary(trace, {}, 50, early=early)
    assert asdict(summary.result()) == expected


def test_unadopted_early_reader_is_discarded(tmp_path, forking):
    trace = _trace(tmp_path)
    other = _trace(tmp_path / "other", 30)
    early = T.EarlyTrials(trace)
    proc = early._reader[0]
    summary = T.BackgroundSummary(other, ALIASES, 50, early=early)  # another trace: not adopted
    assert all(reader is not proc for reader, _ in summary._readers)
    assert asdict(summary.result()) == _expected(other, ALIASES, None)
    assert early.started
    early.discard()
    assert not early.started and early.tokens is None and not _alive(proc)
    early.discard()                                              # twice: still fine


def test_no_early_reader_below_the_process_threshold(tmp_path, monkeypatch):
    trace = _trace(tmp_path, 20)
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 21)
    monkeypatch.setattr(T, "_cpus", lambda: 2)
    monkeypatch.setattr(T, "_may_fork", lambda: True)
    early = T.EarlyTrials(trace)
    assert not early.started
    summary = T.BackgroundSummary(trace, ALIASES, 50, early=early)
    assert summary._readers == []
    assert asdict(summary.result()) == _expected(trace, ALIASES, None)


def test_a_dead_early_reader_is_reread_in_process(tmp_path, forking):
    trace = _trace(tmp_path)
    early = T.EarlyTrials(trace)
    proc = early._reader[0]
    proc.kill()
    proc.join()
    summary = T.BackgroundSummary(trace, ALIASES, 50, since=SINCE, early=early)
    assert asdict(summary.result()) == _expected(trace, ALIASES, SINCE)
