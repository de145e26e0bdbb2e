"""Progress on stderr: drawn on a terminal, silent when piped (triage, bundle scans, live probe steps)."""
from __future__ import annotations

import io
import os
import pty
import subprocess
from pathlib import Path

from rlhealth import progress as P

from corpus import INCIDENTS_DIR, incident_dirs, rlhealth_argv


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_only_on_a_terminal():
    tty, pipe = FakeTTY(), io.StringIO()
    for stream in (tty, pipe):
        with P.Progress("work", 4, stream=stream, min_interval_s=0) as p:
            for i in range(1, 5):
                p.update(i, f"item {i}")
    assert pipe.getvalue() == ""
    drawn = tty.getvalue()
    assert "work: [####################] 4/4 item 4" in drawn and drawn.endswith("\r")


def test_short_work_never_flashes_a_line():
    tty = FakeTTY()
    with P.Progress("scan", 3, stream=tty, delay_s=60) as p:
        p.update(1, "x")
    assert tty.getvalue() == ""


def test_bundle_scan_reports_files_and_bytes(monkeypatch):
    from rlhealth.catalog import load_catalog
    from rlhealth.probes.bundle import read_bundle

    tty = FakeTTY()
    monkeypatch.setattr(P, "SCAN_DELAY_S", 0.0)
    monkeypatch.setattr(P, "SCAN_INTERVAL_S", 0.0)
    monkeypatch.setattr("sys.stderr", tty)
    bundle = next(d for d in incident_dirs() if "baseline-healthy-agentic" in d.name) / "bundle"
    read_bundle(bundle, load_catalog())
    drawn = tty.getvalue()
    total = P.human_bytes(sum(p.stat().st_size for p in [bundle / "finelog.log", *(bundle / "pod_logs").iterdir()]))
    assert "scan: [" in drawn and "file 1/2 " in drawn and "file 2/2 " in drawn
    assert f"scan: [####################] {total} / {total}, file 2/2 " in drawn    # bytes, to the end
    assert "trials: [" in drawn                                                   # then the trial directories
    assert drawn.endswith("\r")                                                    # the line is wiped at the end


def test_scan_progress_moves_inside_one_large_file(monkeypatch, tmp_path):
    """A single large log moves the bar block by block (the 1.2 GB bundle showed nothing)."""
    tty = FakeTTY()
    monkeypatch.setattr(P, "SCAN_INTERVAL_S", 0.0)
    log = tmp_path / "big.log"
    log.write_bytes(b"INFO routine line\n" * 1_000_000)        # 18 MB: three 8 MiB blocks
    p = P.ScanProgress([log], stream=tty, delay_s=0)
    from rlhealth.catalog import load_catalog
    from rlhealth.probes.bundle import _file_info, scanner_for
    from rlhealth.probes.extractors import extraction

    catalog = load_catalog()
    into = extraction(catalog, {}, None)
    into.begin(_file_info("big.log", 0, None, None))
    p.start_file("big.log")
    into.scan(scanner_for(catalog), log, p.advance)
    p.close()
    drawn = [seg.strip() for seg in tty.getvalue().split("\r") if seg.strip()]
    assert [d.split("] ")[1].split(",")[0] for d in drawn] == ["0 B / 17.2 MiB", "8.0 MiB / 17.2 MiB",
                                                              "16.0 MiB / 17.2 MiB", "17.2 MiB / 17.2 MiB"]


def test_capture_steps_go_to_the_current_progress(tmp_path):
    from rlhealth.probes.capture import CaptureWriter, ProbeRecord

    tty = FakeTTY()
    p = P.Progress("probe", stream=tty)
    P.set_current(p)
    try:
        w = CaptureWriter(tmp_path, backend="iris", cluster="c", job_id="/u/j")
        w.record(ProbeRecord(name="pod list", api="GET /pods", started_at="t", finished_at="t"))
    finally:
        P.set_current(None)
    assert "probe: 1 probe steps; last: pod list" in tty.getvalue()


def test_triage_draws_a_bar_on_a_terminal_only():
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(rlhealth_argv("triage", str(INCIDENTS_DIR), "--now", "2026-08-01T15:30:00Z"),
                              stdout=subprocess.PIPE, stderr=slave, check=False, cwd="/", timeout=300)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    err = b"".join(chunks).decode()
    assert "triage: [" in err and f"/{len(incident_dirs())} " in err
    assert "triage: [" not in proc.stdout.decode()
