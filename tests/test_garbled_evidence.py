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
from pathlib import Path
import re
import shutil

import pytest

from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.render import render

from corpus import incident_dirs, load_expected

GARBLED = ["1.2.3", ".", "..", "-", "1e999", "-1e999", "nan", "inf", "-0", "9" * 40, "0x1f", "١٢", "1,5", "", "+", "1.", ".5",
           "\x00", "\udcff"]
_NUMBER = re.compile(rb"(?<![A-Za-z])[0-9]+(?:\.[0-9]+)?")
MAX_FILE_BYTES = 2_000_000


def _garble(data: bytes, rng: random.Random, share: float) -> bytes:
    return _NUMBER.sub(lambda m: rng.choice(GARBLED).encode("utf-8", "surrogateescape") if rng.random() < share else m.group(0), data)


_ODD = [None, 0, -1, 1.5, 1e308, -1e308, "", "x", "NaN", "2026-13-45T99:99:99Z", [], {}, [1, "a"], {"a": None}, True]


def _retyped(value, rng: random.Random, share: float):
    """``value`` with a share of its members (at any depth) replaced by a value of another type."""
    if rng.random() < share:
        return rng.choice(_ODD)
    if isinstance(value, dict):
        return {k: _retyped(v, rng, share) for k, v in value.items()}
    if isinstance(value, list):
        return [_retyped(v, rng, share) for v in value]
    return value


def _garble_numbers(bundle: Path, rng: random.Random) -> None:
    """Every file of the bundle: logs, JSON, JSON lines, captured command outputs."""
    for path in sorted(bundle.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        path.write_bytes(_garble(path.read_bytes(), rng, 0.3 if path.suffix != ".json" else 0.2))


def _retype_members(bundle: Path, rng: random.Random, share: float) -> None:
    for path in sorted(bundle.rglob("*.json")) + sorted(bundle.rglob("*.jsonl")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
        out = []
        for line in lines:
            try:
                out.append(json.dumps(_retyped(json.loads(line), rng, share)).encode())
            except ValueError:
                out.append(line)
        path.write_bytes(b"\n".join(out) + b"\n")


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
