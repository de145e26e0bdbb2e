"""Where the command line reads and writes: ``audit`` reads a bundle given as RUN as ``diagnose``
does; ``--record`` and ``--bundle-root`` never write inside the installed package; a probe that
observed nothing leaves nothing on disk (its default bundle root included)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import rlhealth
from rlhealth import cli
from rlhealth import checks as C

from corpus import rlhealth_argv

EXAMPLES = Path(rlhealth.__file__).parent / "examples"
"""The installed package's examples (what `rlhealth examples --path` prints), not the source tree's."""
NOW = "2026-08-01T15:25:00Z"


def run(*args, cwd="/", env=None):
    return subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, check=False, cwd=cwd, env=env,
                          timeout=300)


def test_audit_reads_a_bundle_given_as_run_as_diagnose_does():
    bundle = EXAMPLES / "colocated-wedge"
    diag = json.loads(run("diagnose", str(bundle), "--now", NOW, "--format", "json").stdout)
    out = run("audit", str(bundle), "--now", NOW, "--format", "json")
    rec = json.loads(out.stdout)
    assert rec["run"]["bundle"] is not None
    assert rec["mode"]["value"] == diag["mode"] == "agentic"
    assert rec["terminal_state"]["controller_state"] == "running"
    assert rec["terminal_state"]["controller_source"] == "bundle:manifest.json job.state"
    assert not any(p["code"] in ("mode-unknown", "terminal-unknown") for p in rec["problems"])
    assert out.returncode == 20 and any(p["code"] == "not-terminal" for p in rec["problems"])   # running: blocked
    text = run("audit", str(bundle), "--now", NOW).stdout
    assert "MODE: agentic" in text and "controller running" in text


def test_audit_of_a_plain_directory_names_the_layout_it_expects(tmp_path):
    (tmp_path / "finelog.log").write_text("hello\n")
    rec = json.loads(run("audit", str(tmp_path), "--now", NOW, "--format", "json").stdout)
    unknown = next(p for p in rec["problems"] if p["code"] == "mode-unknown")
    for place in ("RUN/resolved_config.yaml", "RUN/.hydra/config.yaml", "RUN/config.yaml",
                  "BUNDLE/manifest.json job.entrypoint", "--bundle"):
        assert place in unknown["message"], place


def test_record_refuses_to_write_inside_the_installed_package(tmp_path):
    bundle = EXAMPLES / "colocated-wedge"
    before = sorted(p.relative_to(bundle) for p in bundle.rglob("*"))
    out = run("diagnose", str(bundle), "--now", NOW, "--record")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"rlhealth: usage error: --record: {bundle} is inside the installed rlhealth (")
    assert sorted(p.relative_to(bundle) for p in bundle.rglob("*")) == before
    copy = tmp_path / "wedge"
    shutil.copytree(bundle, copy)
    assert run("diagnose", str(copy), "--now", NOW, "--record").returncode == 10      # a copy records
    assert (copy / "rlhealth" / "verdicts.jsonl").is_file()


def test_package_directories_are_the_package_and_site_packages():
    import sysconfig

    import rlhealth

    assert C.inside_package(EXAMPLES / "healthy-agentic") is not None
    assert C.inside_package(os.path.dirname(rlhealth.__file__)) is not None
    assert C.inside_package(os.path.join(sysconfig.get_paths()["purelib"], "x", "y")) is not None
    assert C.inside_package("/tmp/some-bundle") is None


def _isolated_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    env["HOME"] = str(home)
    return home, env


@pytest.mark.parametrize("backend_args", [
    ["--backend", "slurm", "--job", "123", "--host", "no-such-host.invalid"],
    ["--backend", "iris", "--job", "/alice/rl", "--cluster", "cw-test"],
], ids=["slurm-no-connection", "iris-no-kubeconfig"])
def test_a_probe_that_observed_nothing_leaves_nothing(tmp_path, backend_args):
    home, env = _isolated_home(tmp_path)
    out = run("probe", *backend_args, "--now", NOW, "--format", "json", "--command-timeout", "5s", cwd=tmp_path, env=env)
    assert out.returncode == 20, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "ERROR" and "next action" in json.dumps(doc)          # the report still says what to fix
    assert "the probe observed nothing" in out.stderr
    assert sorted(p.name for p in home.iterdir()) == []                              # no ~/Documents/iris-job-bundles
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


def test_a_failed_probe_keeps_what_existed_before(tmp_path):
    home, env = _isolated_home(tmp_path)
    root = tmp_path / "bundles"
    old = root / "jobs" / "jsc-jupiter" / "slurm" / "123" / "rlhealth" / "captures" / "20260101T000000Z"
    old.mkdir(parents=True)
    (old / "capture.json").write_text("{}")
    out = run("probe", "--backend", "slurm", "--job", "123", "--host", "no-such-host.invalid", "--bundle-root", str(root),
              "--now", NOW, cwd=tmp_path, env=env)
    assert out.returncode == 20
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "jobs", "jobs/jsc-jupiter", "jobs/jsc-jupiter/slurm", "jobs/jsc-jupiter/slurm/123",
        "jobs/jsc-jupiter/slurm/123/rlhealth", "jobs/jsc-jupiter/slurm/123/rlhealth/captures",
        "jobs/jsc-jupiter/slurm/123/rlhealth/captures/20260101T000000Z",
        "jobs/jsc-jupiter/slurm/123/rlhealth/captures/20260101T000000Z/capture.json"]


def test_capture_observed_reads_the_capture_record(tmp_path):
    assert not cli.capture_observed(None) and not cli.capture_observed(tmp_path)
    (tmp_path / "capture.json").write_text(json.dumps({"probes": [{"name": "ssh connect", "error": "refused"}]}))
    assert not cli.capture_observed(tmp_path)
    (tmp_path / "capture.json").write_text(json.dumps({"probes": [{"name": "ssh connect", "error": None},
                                                                   {"name": "sacct", "error": "boom"}]}))
    assert cli.capture_observed(tmp_path)
