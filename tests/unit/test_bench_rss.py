"""bench/rss.py separates the diagnosing process's peak RSS from its forked readers' (which
``ru_maxrss`` from ``os.wait4`` mixes up: it is the largest of the two)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import rss  # noqa: E402

PROGRAM = """
import os, time
MIB = 1024 * 1024
parent = bytearray(40 * MIB)                 # touched (zero-filled): resident in the parent
pid = os.fork()
if pid == 0:
    child = bytearray(120 * MIB)             # a reader: 120 MiB of its own
    time.sleep(0.3)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.05)
late = bytearray(30 * MIB)                    # the parent's own peak comes after the reader is gone
del late
"""


def test_the_process_and_its_readers_are_measured_apart(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    got = rss.sample_tree([sys.executable, str(script)], interval_s=0.01)
    assert got["exact"] and got["exit"] == 0
    assert 70 <= got["main_peak_rss_mib"] < 120, got          # 40 + 30 MiB and the interpreter, not the reader's 120
    assert got["readers_peak_rss_mib"] >= 120, got             # the reader's own 120 MiB (plus what it shares)
    assert got["readers"] == 1, got
    assert got["ru_maxrss_mib"] >= got["readers_peak_rss_mib"] - 1, got   # the old figure: the largest of the tree
    assert got["tree_peak_pss_mib"] >= 150, got                # both alive at once: 40 shared + 120 private


def test_the_spawners_own_peak_is_not_the_diagnosis_peak(tmp_path):
    """``ru_maxrss`` of a spawned child holds the spawner's peak RSS (Linux records the replaced
    image's high-water mark at exec); the process's own peak, read by itself, does not. The
    spawner here is a fresh interpreter that peaks at 300 MiB, frees it, then calls sample_tree."""
    import subprocess

    script = tmp_path / "prog.py"
    script.write_text("import time\nx = bytearray(20 * 1024 * 1024)\ntime.sleep(0.05)\n")
    spawner = (f"import sys, json; sys.path.insert(0, {str(Path(rss.__file__).parent)!r}); import rss\n"
               "big = bytearray(300 * 1024 * 1024); del big\n"
               f"print(json.dumps(rss.sample_tree([sys.executable, {str(script)!r}])))\n")
    import json

    got = json.loads(subprocess.run([sys.executable, "-c", spawner], capture_output=True, text=True, check=True).stdout)
    assert got["exact"] and got["main_peak_rss_mib"] < 100, got
    assert got["ru_maxrss_mib"] >= 300, got


def test_fadvise_eviction_empties_the_page_cache_of_a_bundle(tmp_path):
    data = tmp_path / "bundle" / "pod_logs" / "p.log"
    data.parent.mkdir(parents=True)
    data.write_bytes(b"x" * (8 * 1024 * 1024))
    data.read_bytes()
    before = rss.resident_mib([str(data)])
    if before is None:        # no fincore on this machine: nothing to check against
        return
    rss.evict(tmp_path / "bundle", "fadvise")
    assert rss.resident_mib([str(data)]) < 1.0 <= before
