"""``RLHEALTH_PURE_PYTHON=1`` (the C line engine not loaded: the scan's Python path) gives the
JSON report of every incident byte for byte as the native build gives it.

Each mode runs in a fresh interpreter (the variable is read when ``probes.scan`` is imported) that
diagnoses every incident in-process and prints its JSON reports (``render(report, "json")``, what
``rlhealth diagnose --format json`` writes).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpus import incident_dirs

TESTS = Path(__file__).resolve().parent

SCRIPT = r"""
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from corpus import incident_dirs, load_expected
from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.probes import scan
from rlhealth.render import render

reports = {}
for d in incident_dirs():
    expected = load_expected(d)
    os.chdir(d)
    report = diagnose(Path("bundle"), now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"))
    reports[d.name] = render(report, "json")
print(json.dumps({"engine": scan.LINE_ENGINE, "reports": reports}))
"""


def _reports(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RLHEALTH_PURE_PYTHON"}
    if pure:
        env["RLHEALTH_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(TESTS)], capture_output=True, text=True, env=env,
                          cwd="/", timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_pure_python_gives_the_native_json_on_every_incident():
    native, pure = _reports(pure=False), _reports(pure=True)
    assert pure["engine"] == "python"
    if native["engine"] != "c":
        pytest.skip("this build has no C line engine: both runs took the Python path")
    assert len(native["reports"]) == len(incident_dirs()) >= 28
    differ = [name for name, text in native["reports"].items() if pure["reports"].get(name) != text]
    assert differ == []
