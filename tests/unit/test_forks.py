"""rlhealth.forks.Forked: a value computed in a forked child is the value computed here; a child
that does not deliver costs only the computation here."""
from __future__ import annotations

import os

import pytest

import rlhealth.forks as F
from rlhealth import coherence


@pytest.fixture
def forking(monkeypatch):
    monkeypatch.setattr(F, "cpus", lambda: 2)
    monkeypatch.setattr(F, "may_fork", lambda: True)        # idle threads other tests left behind


def _pid_and(value):
    return os.getpid(), value


def test_the_value_comes_from_a_child(forking):
    job = F.Forked(_pid_and, [1, 2, 3])
    assert job.forked
    pid, value = job.result()
    assert value == [1, 2, 3] and pid != os.getpid()


def test_no_fork_without_a_second_cpu(monkeypatch):
    monkeypatch.setattr(F, "cpus", lambda: 1)
    job = F.Forked(_pid_and, "x")
    assert not job.forked
    assert job.result() == (os.getpid(), "x")


def _dies():
    if os.getpid() != PARENT:
        os._exit(3)         # the child dies without delivering
    return "computed here"


PARENT = os.getpid()


def test_a_child_that_dies_is_computed_here(forking):
    job = F.Forked(_dies)
    assert job.forked
    assert job.result() == "computed here"


def _unpicklable():
    return lambda: None


def test_an_undeliverable_value_is_computed_here(forking):
    job = F.Forked(_unpicklable)
    assert callable(job.result())


def _raises():
    raise ValueError("garbled")


def test_a_failure_is_met_here(forking):
    job = F.Forked(_raises)
    with pytest.raises(ValueError, match="garbled"):
        job.result()


def test_coherence_measured_apart_equals_measured_here(forking, monkeypatch):
    texts = ["The build failed because the test runner could not find the module; I will fix the import.",
             "тест тест 测试 测试 test test テスト テスト " * 20, "", "<|im_start|>assistant<|im_end|> done"]
    param = {"coherence_sample_chars": 4000, "coherence_dictionary_min_zipf": 3.0, "coherence_language_min_letters": 40}
    monkeypatch.setattr(coherence._detector, "cache_info", lambda: type("I", (), {"currsize": 0})())
    job = coherence.measuring(texts, param, coherence.FORK)
    assert job is not None and job.forked
    assert job.result() == coherence.measure_all(texts, **coherence.measure_params(param))
    assert coherence.measuring([], param, coherence.FORK) is None
    assert coherence.measuring(texts, param) is None     # a process that diagnoses many bundles measures here


def _slow_prepare():
    import time
    time.sleep(30)


def _prepare_marks(path):
    def prepare():
        with open(path, "w") as f:
            f.write(str(os.getpid()))
    return prepare


def test_a_standby_prepares_then_computes_in_the_child(forking, tmp_path):
    mark = tmp_path / "prepared"
    job = F.Standby(_prepare_marks(mark), _pid_and)
    assert job.forked
    pid, value = job.call({"texts": ["a", "b"]})
    assert value == {"texts": ["a", "b"]} and pid != os.getpid()
    assert mark.read_text() == str(pid)          # prepared in the child that computed
    job.close()                                  # safe after the call


def test_closing_a_standby_still_preparing_does_not_wait_for_it(forking):
    import time
    job = F.Standby(_slow_prepare, _pid_and)
    started = time.monotonic()
    job.close()
    assert time.monotonic() - started < 5
    assert job.call("x") == (os.getpid(), "x")   # closed: computed here


def test_a_standby_that_dies_is_computed_here(forking):
    job = F.Standby(lambda: os._exit(3) if os.getpid() != PARENT else None, _pid_and)
    assert job.call("y") == (os.getpid(), "y")


def test_coherence_standby_equals_measured_here(forking):
    texts = ["The build failed because the test runner could not find the module; I will fix the import.",
             "<|im_start|>assistant<|im_end|> done"]
    param = {"coherence_sample_chars": 4000, "coherence_dictionary_min_zipf": 3.0, "coherence_language_min_letters": 40}
    standby = coherence.standing_by()
    asked = coherence.measuring(texts, param, standby)
    assert asked.result() == coherence.measure_all(texts, **coherence.measure_params(param))
    assert coherence.measuring([], param, coherence.standing_by()) is None     # no sample: the child is ended


def test_coherence_after_scan_uses_the_standby_it_began(forking):
    texts = ["The build failed because the test runner could not find the module; I will fix the import."]
    param = {"coherence_sample_chars": 4000, "coherence_dictionary_min_zipf": 3.0, "coherence_language_min_letters": 40}
    expected = coherence.measure_all(texts, **coherence.measure_params(param))
    apart = coherence.AfterScan()
    apart.begin()
    standby = apart.standby
    assert standby is not None and standby.forked
    apart.begin()                                   # once only
    assert apart.standby is standby
    asked = coherence.measuring(texts, param, apart)
    assert isinstance(asked, coherence._Asked) and asked.standby is standby
    assert asked.result() == expected
    apart.close()


def test_coherence_after_scan_never_begun_forks_when_the_sample_is_known(forking, monkeypatch):
    texts = ["a short sample of agent output, in plain English words"]
    param = {"coherence_sample_chars": 4000, "coherence_dictionary_min_zipf": 3.0, "coherence_language_min_letters": 40}
    monkeypatch.setattr(coherence._detector, "cache_info", lambda: type("I", (), {"currsize": 0})())
    job = coherence.measuring(texts, param, coherence.AfterScan())
    assert isinstance(job, F.Forked) and job.forked
    assert job.result() == coherence.measure_all(texts, **coherence.measure_params(param))
    apart = coherence.AfterScan()
    apart.begin()
    assert coherence.measuring([], param, apart) is None      # no sample: its child is ended
    assert apart.standby._child is None
    apart.close()


def _deliver_then_linger(send, fn, args):
    _REAL_DELIVER(send, fn, args)
    import time
    time.sleep(30)          # a child whose exit takes long after it delivered


_REAL_DELIVER = F._deliver


def test_a_delivered_value_does_not_wait_for_the_child_to_exit(forking, monkeypatch):
    import multiprocessing
    import time
    monkeypatch.setattr(F, "_deliver", _deliver_then_linger)
    job = F.Forked(_pid_and, "z")
    proc = job._child[0]
    started = time.monotonic()
    pid, value = job.result()
    assert value == "z" and pid == proc.pid != os.getpid()
    assert time.monotonic() - started < 10
    assert proc in multiprocessing.active_children()     # still running, collected later
    proc.terminate()
    proc.join()
    assert proc not in multiprocessing.active_children()
