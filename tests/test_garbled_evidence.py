"""Garbled evidence never fails a diagnosis: every incident bundle still diagnoses to a verdict
whose report renders when

- a share of the numbers in its logs and JSON files is replaced by what broken writers and hostile
  files hold ("1.2.3", ".", "1e999", "nan", digits of another script, an empty string);
- a share of the members of its JSON and JSON-lines files is replaced by a value of another type
  (null, a number where text belongs, a list where an object belongs, 1e308, a bad date...);
- a share of the numbers is replaced by a run of thousands of digits, more than ``int()`` converts.

Found this way, all failing the whole diagnosis: a stats or phase line with "1.2.3" (ValueError),
a restart count of 1e999 (OverflowError), a timing metric without a number (TypeError), a GPU
utilization of NaN (TypeError), a
controller state that is a number, a pod's state that is a list, a container command that is a
string, a GPU id that is a list, a trajectory's tool_calls that is a number, rewards whose sum
overflows, an attempt error that is a number."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.render import render

import garble
from corpus import incident_dirs, load_expected

def _garble_numbers(bundle: Path, rng: random.Random, shares: tuple[float, float] = (0.3, 0.2),
                    choices: list[str] = garble.GARBLED) -> None:
    """Every file of the bundle: logs, JSON, JSON lines, captured command outputs (``shares``: of
    the numbers of other files, of JSON files)."""
    for path in garble.files(bundle):
        share = shares[0] if path.suffix != ".json" else shares[1]
        path.write_bytes(garble.garble_numbers(path.read_bytes(), rng, share, choices))


def _retype_members(bundle: Path, rng: random.Random, share: float, choices: list = garble.ODD) -> None:
    for path in garble.files(bundle):
        if path.suffix in (".json", ".jsonl"):
            garble.retype_json_file(path, rng, share, choices)


def _failures(tmp_path: Path, spoil) -> list[str]:
    failed = []
    for d in incident_dirs():
        expected = load_expected(d)
        bundle = tmp_path / d.name
        shutil.copytree(d / "bundle", bundle, symlinks=True)
        spoil(bundle)
        try:
            report = diagnose(bundle, now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"))
            json.loads(render(report, "json"))
            render(report, "markdown")
        except Exception as exc:  # noqa: BLE001 - collected: every failing incident is named
            failed.append(f"{d.name}: {type(exc).__name__}: {str(exc)[:300]}")
        finally:
            shutil.rmtree(bundle)
    return failed


@pytest.mark.parametrize("seed", range(4))
def test_every_incident_survives_garbled_numbers(tmp_path, seed):
    rng = random.Random(seed)
    assert _failures(tmp_path, lambda bundle: _garble_numbers(bundle, rng)) == []


@pytest.mark.parametrize("run,share", [(garble.LONG_RUNS[0], 0.3), (garble.LONG_RUNS[1], 0.01)],
                         ids=["5000-digits", "100000-digits"])
def test_every_incident_survives_numbers_of_thousands_of_digits(tmp_path, run, share):
    """``int()`` refuses more than 4300 digits: a line or value holding such a number is not parsed."""
    rng = random.Random(len(run))
    assert _failures(tmp_path, lambda bundle: _garble_numbers(bundle, rng, (share, share), [run])) == []


@pytest.mark.parametrize("seed,share", [(1, 0.05), (2, 0.15), (3, 0.15), (5, 0.35)])
def test_every_incident_survives_json_members_of_another_type(tmp_path, seed, share):
    rng = random.Random(seed)
    assert _failures(tmp_path, lambda bundle: _retype_members(bundle, rng, share)) == []


def test_every_incident_survives_json_members_of_thousands_of_digits(tmp_path):
    """A JSON string of thousands of digits where a count belongs (a restart count, a GPU limit)."""
    rng = random.Random(7)
    assert _failures(tmp_path, lambda bundle: _retype_members(bundle, rng, 0.15, garble.LONG_RUNS[:1])) == []


def test_a_job_id_of_thousands_of_digits(tmp_path):
    """A Jupiter bundle whose manifest names a Slurm job id of 5,000 digits (the chain legs are
    sorted by number): the id is no leg, the diagnosis still reaches a verdict."""
    d = next(d for d in incident_dirs() if d.name.endswith("baseline-healthy-jupiter"))
    expected = load_expected(d)
    bundle = tmp_path / "bundle"
    shutil.copytree(d / "bundle", bundle, symlinks=True)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["job_id"] = "/slurm/" + "9" * 5000
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    report = diagnose(bundle, now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"))
    assert report.verdict in ("KILL", "NO-KILL", "ERROR")
    json.loads(render(report, "json"))
