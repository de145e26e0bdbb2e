"""Garbled evidence never fails a diagnosis: every incident bundle still diagnoses to a verdict
whose report renders when

- a share of the numbers in its logs and JSON files is replaced by what broken writers and hostile
  files hold ("1.2.3", ".", "1e999", "nan", digits of another script, an empty string);
- a share of the members of its JSON and JSON-lines files is replaced by a value of another type
  (null, a number where text belongs, a list where an object belongs, 1e308, a bad date...).

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

def _garble_numbers(bundle: Path, rng: random.Random) -> None:
    """Every file of the bundle: logs, JSON, JSON lines, captured command outputs."""
    for path in garble.files(bundle):
        path.write_bytes(garble.garble_numbers(path.read_bytes(), rng, 0.3 if path.suffix != ".json" else 0.2))


def _retype_members(bundle: Path, rng: random.Random, share: float) -> None:
    for path in garble.files(bundle):
        if path.suffix in (".json", ".jsonl"):
            garble.retype_json_file(path, rng, share)


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
            failed.append(f"{d.name}: {type(exc).__name__}: {exc}")
    return failed


@pytest.mark.parametrize("seed", range(4))
def test_every_incident_survives_garbled_numbers(tmp_path, seed):
    rng = random.Random(seed)
    assert _failures(tmp_path, lambda bundle: _garble_numbers(bundle, rng)) == []


@pytest.mark.parametrize("seed,share", [(1, 0.05), (2, 0.15), (3, 0.15), (5, 0.35)])
def test_every_incident_survives_json_members_of_another_type(tmp_path, seed, share):
    rng = random.Random(seed)
    assert _failures(tmp_path, lambda bundle: _retype_members(bundle, rng, share)) == []
