"""The rule engine frees what each run allocates in C, and runs asked for off the main thread all
happen on one engine thread (one malloc arena)."""
from __future__ import annotations

import ctypes
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

import rlhealth.examples as examples
from rlhealth import engine
from rlhealth.catalog import load_catalog
from rlhealth.observers import observe
from rlhealth.probes.bundle import read_bundle

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


def _malloc_in_use() -> int:
    """Bytes malloc has handed out and not had back, over every arena (glibc ``mallinfo2``)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def _facts():
    catalog = load_catalog()
    read = read_bundle(Path(examples.__file__).parent / "colocated-wedge", catalog, now_epoch=NOW.timestamp())
    return catalog, observe(read, catalog, now=NOW.timestamp(), max_age_s=1800).facts


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallinfo2"),
                    reason="glibc's mallinfo2")
def test_a_rule_run_returns_its_c_memory():
    catalog, facts = _facts()
    for _ in range(3):
        engine.run_rules(catalog.rules, facts, catalog.thresholds, catalog.sets)
    before = _malloc_in_use()
    runs = 10
    for _ in range(runs):
        engine.run_rules(catalog.rules, facts, catalog.thresholds, catalog.sets)
    per_run = (_malloc_in_use() - before) / runs
    # a run's durable state node (message, frame and action pools) is several MiB when not freed
    assert per_run < 64 * 1024, f"{per_run / 1024:.0f} KiB of malloc'd memory kept per rule run"


def test_runs_off_the_main_thread_happen_on_one_engine_thread(monkeypatch):
    catalog, facts = _facts()
    expected = engine.run_rules(catalog.rules, facts, catalog.thresholds, catalog.sets)
    seen: set[str] = set()
    fire = engine._Run.fire

    def recording_fire(self, rule, closure):
        seen.add(threading.current_thread().name)
        return fire(self, rule, closure)
    monkeypatch.setattr(engine._Run, "fire", recording_fire)
    results = []
    for _ in range(3):     # a new caller thread each time, as a server's worker threads come and go
        t = threading.Thread(target=lambda: results.append(
            engine.run_rules(catalog.rules, facts, catalog.thresholds, catalog.sets)))
        t.start()
        t.join()
    assert len(seen) == 1 and next(iter(seen)).startswith("rlhealth-engine")
    assert [(r.derived, r.fired) for r in results] == [(expected.derived, expected.fired)] * 3
