"""`rlhealth triage`: every bundle under a root, diagnosed in a process pool, the same verdicts as
one-by-one `diagnose`, most urgent first; both syncdown layouts are found."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from rlhealth.usage import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.triage import find_bundles, sort_rows

from corpus import INCIDENTS_DIR, incident_dirs, rlhealth_argv

NOW = "2026-08-01T15:30:00Z"


def run(*args):
    return subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, check=False, cwd="/")


def test_triage_of_the_incident_corpus_matches_one_by_one_diagnose():
    out = run("triage", str(INCIDENTS_DIR), "--now", NOW, "--format", "json", "--jobs", "2")
    doc = json.loads(out.stdout)
    rows = doc["jobs"]
    bundles = sorted(str(d / "bundle") for d in incident_dirs())
    assert sorted(r["path"] for r in rows) == bundles
    verdicts = {r["verdict"] for r in rows}
    assert verdicts == {"KILL", "ERROR", "NO-KILL"}
    assert out.returncode == 10  # the most urgent verdict
    for row in rows:
        report = diagnose(Path(row["path"]), now=parse_now(NOW))
        assert (row["job_id"], row["verdict"], row["confidence"]) == (report.job.id, report.verdict, report.confidence), row["path"]
        assert row["gates"] == {g: report.gates[g].status for g in report.gates}
        assert row["next_action_kind"] == report.next_action_machine["kind"]
    assert rows == sort_rows(rows)
    order = [r["verdict"] for r in rows]
    assert order == sorted(order, key=["KILL", "ERROR", "NO-KILL"].index)
    # text form: one line per job after the summary line, same order
    text = run("triage", str(INCIDENTS_DIR), "--now", NOW).stdout.splitlines()
    assert text[0].startswith(f"RL-JOB-TRIAGE — {INCIDENTS_DIR} — {len(bundles)} job bundles: ")
    assert [line.rsplit("  ", 1)[-1] for line in text[1:]] == [r["path"] for r in rows]


def test_both_syncdown_layouts_are_found_and_nothing_else(tmp_path):
    src = {d.name: d / "bundle" for d in incident_dirs()}
    iris = tmp_path / "jobs" / "cw-us-east-02a" / "alice" / "rl-qwen8b-tb"
    jupiter = tmp_path / "jobs" / "jsc-jupiter" / "slurm" / "48212"
    live_only = tmp_path / "jobs" / "cw-us-east-02a" / "bob" / "live"
    shutil.copytree(next(v for k, v in src.items() if "colocated-wedge" in k), iris)
    shutil.copytree(next(v for k, v in src.items() if "baseline-healthy-jupiter" in k), jupiter)
    shutil.copytree(next(v for k, v in src.items() if "live-capture-only" in k), live_only)
    (tmp_path / "jobs" / "cw-us-east-02a" / "carol" / "empty-job").mkdir(parents=True)
    (tmp_path / ".hidden" / "x").mkdir(parents=True)
    (tmp_path / ".hidden" / "x" / "manifest.json").write_text("{}")
    (tmp_path / "loop").symlink_to(tmp_path)
    assert find_bundles(tmp_path) == sorted([iris, jupiter, live_only])
    assert find_bundles(iris) == [iris]
    doc = json.loads(run("triage", str(tmp_path), "--now", "2026-08-01T15:25:00Z", "--format", "json").stdout)
    assert [(Path(r["path"]).name, r["verdict"]) for r in doc["jobs"]][0] == ("rl-qwen8b-tb", "KILL")
    assert {r["job_id"] for r in doc["jobs"]} >= {"/alice/rl-qwen8b-tb", "/slurm/48212"}


def test_an_empty_root_is_an_error_exit_and_no_progress_when_piped(tmp_path):
    out = run("triage", str(tmp_path))
    assert out.returncode == 20 and "no job bundle found" in out.stdout
    assert out.stderr == ""  # the progress bar is for terminals only


def test_the_pool_submits_the_costliest_bundles_first(tmp_path):
    from rlhealth.triage import estimated_cost, longest_first

    small, logs, trials = (tmp_path / n for n in ("a-small", "b-logs", "c-trials"))
    for b in (small, logs, trials):
        b.mkdir()
        (b / "manifest.json").write_text("{}")
    (logs / "pod_logs").mkdir()
    (logs / "pod_logs" / "p.log").write_bytes(b"x\n" * 4_000_000)      # 8 MB of log: ~0.02 s
    for i in range(400):                                                 # 400 trials: ~0.03 s + the reader
        (trials / "trace_jobs" / f"t{i}").mkdir(parents=True)
    (trials / "trace_jobs" / "t0" / "result.json").write_text("{}")      # never read by the estimate
    costs = {b.name: estimated_cost(str(b)) for b in (small, logs, trials)}
    assert costs["a-small"] < costs["b-logs"] < costs["c-trials"], costs
    assert longest_first([str(small), str(logs), str(trials)]) == [str(trials), str(logs), str(small)]
    # equal estimates keep path order (deterministic submission)
    twin = tmp_path / "a-twin"
    shutil.copytree(small, twin)
    assert longest_first([str(small), str(twin)]) == sorted([str(small), str(twin)])
