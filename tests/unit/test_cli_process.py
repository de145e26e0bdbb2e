"""The installed ``rlhealth`` script as a process: interrupts (SIGINT, SIGTERM) mid-run, progress on
a terminal only, colour on a terminal only.

A long run is made by a hook, not by gigabytes: a ``sitecustomize`` on PYTHONPATH makes the log
scan read 1 MiB blocks and sleep after each, so a 14 MB log takes seconds and the signal lands in
the middle of the scan (the test waits for the scan's progress line before sending it).
"""
from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from rlhealth.report import load_schema

from corpus import REPO, rlhealth_argv

SCHEMA = load_schema()
EXAMPLES = REPO / "rlhealth" / "examples"
NOW = {"healthy-agentic": "2026-08-01T14:15:00Z", "colocated-wedge": "2026-08-01T15:25:00Z"}

SLOW_HOOK = '''
import os, time
_d = float(os.environ.get("RLHEALTH_TEST_SLOW_BLOCK_S") or 0)
if _d:
    import rlhealth.probes.scan as S
    _orig = S.Scanner.iter_blocks
    def _slow(self, path, block_bytes=None, sink=None):
        for item in _orig(self, path, 1 << 20, sink):
            time.sleep(_d)
            yield item
    S.Scanner.iter_blocks = _slow
if os.environ.get("RLHEALTH_TEST_READ_TRIALS_FORKED"):
    import rlhealth.probes.parse.trials as T
    T.PROCESS_MIN_TRIALS = 1     # the example's 24 trials get a forked (early) reader
'''


@pytest.fixture()
def slow(tmp_path):
    """(bundle, env): a copy of the healthy example with a 14 MB log, and an environment whose
    scan sleeps ``RLHEALTH_TEST_SLOW_BLOCK_S`` after each 1 MiB block; ``RLHEALTH_TEST_MARKER``
    finds the run's processes in /proc afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_HOOK)
    bundle = tmp_path / "bundle"
    shutil.copytree(EXAMPLES / "healthy-agentic", bundle)
    line = "2026-08-01 13:00:00 INFO routine filler line {} " + "x" * 20 + "\n"
    with open(bundle / "pod_logs" / "filler.log", "w") as f:
        f.writelines(line.format(i) for i in range(200_000))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
               RLHEALTH_TEST_SLOW_BLOCK_S="0.4", RLHEALTH_TEST_MARKER=uuid.uuid4().hex)
    env.pop("NO_COLOR", None)
    return bundle, env


def start(args, env, cwd, *, stdout=subprocess.PIPE, **kw):
    """The installed script with stderr on a fresh terminal; returns (process, terminal fd)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(rlhealth_argv(*args), stdout=stdout, stderr=slave, env=env, cwd=cwd, **kw)
    os.close(slave)
    return proc, master


def read_tty(master: int, until: bytes | None = None, timeout: float = 120) -> bytes:
    """What the terminal shows, until ``until`` appears (or EOF, or ``timeout``)."""
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (until is None or until not in buf):
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        buf += data
    return buf


def processes_with(marker: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if f"RLHEALTH_TEST_MARKER={marker}".encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("forked_trials", [False, True])
def test_sigint_mid_scan_prints_an_interrupted_json_document_and_exits_130(slow, tmp_path, forked_trials):
    bundle, env = slow
    if forked_trials:
        env = dict(env, RLHEALTH_TEST_READ_TRIALS_FORKED="1")
    proc, tty = start(["diagnose", str(bundle), "--now", NOW["healthy-agentic"], "--format", "json"], env, tmp_path)
    try:
        seen = read_tty(tty, until=b"scan: [")
        assert b"scan: [" in seen, seen                     # the scan is running: interrupt it now
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        seen += read_tty(tty, timeout=5)
    finally:
        os.close(tty)
    assert proc.returncode == 130
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] == "ERROR"
    assert doc["error"] == {"kind": "interrupted", "message": "interrupted by SIGINT", "exit_code": 130}
    assert b"rlhealth: interrupted by SIGINT" in seen and b"Traceback" not in seen
    time.sleep(0.5)
    assert processes_with(env["RLHEALTH_TEST_MARKER"]) == []   # no trial reader left behind


def test_sigterm_leaves_no_partial_output_file(slow, tmp_path):
    bundle, env = slow
    target = tmp_path / "out" / "report.md"
    target.parent.mkdir()
    target.write_text("the previous report\n")
    proc, tty = start(["diagnose", str(bundle), "--now", NOW["healthy-agentic"], "-o", str(target)], env, tmp_path)
    try:
        assert b"scan: [" in read_tty(tty, until=b"scan: [")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        seen = read_tty(tty, timeout=5)
    finally:
        os.close(tty)
    assert proc.returncode == 143
    assert out == b""                                            # markdown: nothing on stdout
    assert b"rlhealth: interrupted by SIGTERM" in seen and b"Traceback" not in seen
    assert target.read_text() == "the previous report\n"          # untouched: no part of a new one
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]   # no temporary file left


def test_output_file_is_written_whole_through_a_renamed_temporary(tmp_path):
    target = tmp_path / "report.json"
    run = subprocess.run(rlhealth_argv("diagnose", str(EXAMPLES / "colocated-wedge"), "--now", NOW["colocated-wedge"],
                                       "--format", "json", "-o", str(target)), capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 10 and run.stdout == ""
    assert json.loads(target.read_text())["verdict"] == "KILL"
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)      # not the temporary file's private mode
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_ctrl_c_on_the_terminal_reaches_every_process_and_only_the_command_answers(slow, tmp_path):
    """A terminal's Ctrl-C signals the whole process group: the forked helpers end quietly."""
    root = tmp_path / "fleet"
    for i in range(3):
        shutil.copytree(slow[0], root / f"job{i}")
    env = slow[1]
    proc, tty = start(["triage", str(root), "--now", NOW["healthy-agentic"], "--jobs", "2", "--format", "json"], env,
                      tmp_path, start_new_session=True)
    try:
        time.sleep(4)                                           # well inside the first diagnoses
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        seen = read_tty(tty, timeout=5)
    finally:
        os.close(tty)
    assert proc.returncode == 130, seen
    doc = json.loads(out)
    assert doc["schema"] == "rlhealth.triage/v1" and doc["jobs"] == []
    assert doc["error"] == {"kind": "interrupted", "message": "interrupted by SIGINT", "exit_code": 130}
    assert b"Traceback" not in seen and seen.count(b"interrupted by SIGINT") == 1
    time.sleep(0.5)
    assert processes_with(env["RLHEALTH_TEST_MARKER"]) == []


def test_sigterm_to_triage_alone_ends_its_workers_without_waiting_for_the_fleet(slow, tmp_path):
    root = tmp_path / "fleet"
    for i in range(4):
        shutil.copytree(slow[0], root / f"job{i}")
    env = slow[1]
    proc, tty = start(["triage", str(root), "--now", NOW["healthy-agentic"], "--jobs", "2"], env, tmp_path)
    try:
        time.sleep(4)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)                        # the parent only, as a supervisor would
        proc.communicate(timeout=60)
        took = time.monotonic() - began
        seen = read_tty(tty, timeout=5)
    finally:
        os.close(tty)
    assert proc.returncode == 143 and b"Traceback" not in seen
    assert took < 10, took                                      # four slowed diagnoses would take far longer
    time.sleep(0.5)
    assert processes_with(env["RLHEALTH_TEST_MARKER"]) == []


def test_scan_progress_on_a_terminal_only_and_quiet_silences_it(slow, tmp_path):
    bundle, env = slow
    env = dict(env, RLHEALTH_TEST_SLOW_BLOCK_S="0.1")
    args = ["diagnose", str(bundle), "--now", NOW["healthy-agentic"]]
    proc, tty = start(args, env, tmp_path)
    try:
        out, _ = proc.communicate(timeout=180)
        seen = read_tty(tty, timeout=5)
    finally:
        os.close(tty)
    assert proc.returncode == 0
    text = seen.decode()
    total = f" / {sum(p.stat().st_size for p in bundle.rglob('*.log')) / 2**20:.1f} MiB, file "
    drawn = [seg for seg in text.split("\r") if seg.startswith("scan: [")]
    assert all(total in seg for seg in drawn), text                        # bytes and files, on the terminal
    assert sum("file 2/3 pod_logs/filler.log" in seg for seg in drawn) >= 5  # moving inside the one large file
    assert drawn[-1].startswith("scan: [####################] ")
    assert b"\r" not in out and b"scan:" not in out and b"\x1b[" not in out      # stdout (a pipe): the report only

    proc, tty = start([*args, "--quiet"], env, tmp_path)
    try:
        proc.communicate(timeout=180)
        seen = read_tty(tty, timeout=5)
    finally:
        os.close(tty)
    assert proc.returncode == 0 and b"scan:" not in seen

    piped = subprocess.run(rlhealth_argv(*args), capture_output=True, env=env, cwd=tmp_path, timeout=180)
    assert piped.returncode == 0 and piped.stderr == b""            # no terminal: no progress at all


def _on_tty(args, env, cwd):
    """(exit status, what a terminal running the command shows: stdout and stderr both on it)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(rlhealth_argv(*args), stdout=slave, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    try:
        seen = read_tty(master, timeout=120)         # until EOF: the terminal's buffer must be drained
        proc.wait(timeout=30)
    finally:
        os.close(master)
    return proc.returncode, seen.decode().replace("\r\n", "\n")


def test_colour_for_verdicts_and_statuses_on_a_terminal_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    args = ["diagnose", str(EXAMPLES / "colocated-wedge"), "--now", NOW["colocated-wedge"]]
    code, seen = _on_tty(args, env, tmp_path)
    assert code == 10
    assert "VERDICT: \x1b[1m\x1b[31mKILL\x1b[0m" in seen
    assert "LIVENESS:  \x1b[31mFAIL\x1b[0m — " in seen and "RESOURCES: \x1b[32mPASS\x1b[0m — " in seen
    assert not any("\x1b[" in line for line in seen.splitlines() if line.lstrip().startswith(">"))  # quotes as read

    code, seen = _on_tty(["diagnose", str(EXAMPLES / "healthy-agentic")], env, tmp_path)   # wall clock: stale
    assert code == 20 and "VERDICT: \x1b[1m\x1b[33mERROR\x1b[0m" in seen

    code, seen = _on_tty(["triage", str(EXAMPLES), "--now", NOW["colocated-wedge"]], env, tmp_path)
    assert code == 10 and "\x1b[1m\x1b[31mKILL\x1b[0m" in seen and "LIV:\x1b[31mFAIL\x1b[0m" in seen

    code, seen = _on_tty(args, dict(env, NO_COLOR="1"), tmp_path)                  # NO_COLOR honoured
    assert code == 10 and "\x1b[" not in seen and "VERDICT: KILL" in seen
    code, seen = _on_tty([*args, "--format", "json"], env, tmp_path)                 # never in JSON
    assert code == 10 and "\x1b[" not in seen and json.loads(seen)["verdict"] == "KILL"
    code, seen = _on_tty([*args, "-o", str(tmp_path / "r.md")], env, tmp_path)       # never in -o files
    assert code == 10 and "\x1b[" not in (tmp_path / "r.md").read_text()
    piped = subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, env=env, cwd=tmp_path)
    assert piped.returncode == 10 and "\x1b[" not in piped.stdout                   # never into a pipe
