"""Garbled numbers never fail a diagnosis: every incident bundle, with a share of the numbers in
its logs and JSON files replaced by what broken writers and hostile files hold ("1.2.3", ".",
"1e999", "nan", digits of another script, an empty string), still diagnoses to a verdict whose
report renders. (Found this way: a stats line or a phase line with "1.2.3" raised ValueError, a
restart count of 1e999 OverflowError, a timing metric without a number TypeError.)"""
from __future__ import annotations

import json
import random
import re
import shutil

import pytest

from rlhealth.cli import parse_now
from rlhealth.diagnose import diagnose
from rlhealth.probes import bundle as bundle_mod
from rlhealth.render import render

from corpus import incident_dirs, load_expected

GARBLED = ["1.2.3", ".", "..", "-", "1e999", "-1e999", "nan", "inf", "-0", "9" * 40, "0x1f", "١٢", "1,5", "", "+", "1.", ".5"]
_NUMBER = re.compile(rb"(?<![A-Za-z])[0-9]+(?:\.[0-9]+)?")
MAX_FILE_BYTES = 2_000_000


def _garble(data: bytes, rng: random.Random, share: float) -> bytes:
    return _NUMBER.sub(lambda m: rng.choice(GARBLED).encode() if rng.random() < share else m.group(0), data)


@pytest.mark.parametrize("seed", range(3))
def test_every_incident_survives_garbled_numbers(tmp_path, seed):
    rng = random.Random(seed)
    failed = []
    for d in incident_dirs():
        expected = load_expected(d)
        bundle = tmp_path / d.name
        shutil.copytree(d / "bundle", bundle, symlinks=True)
        files = [p for p, _ in bundle_mod._log_files(bundle, None)] + sorted(bundle.rglob("*.json"))[:50]
        for path in files:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                continue
            path.write_bytes(_garble(path.read_bytes(), rng, 0.3 if path.suffix != ".json" else 0.2))
        try:
            report = diagnose(bundle, now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"))
            json.loads(render(report, "json"))
            render(report, "markdown")
        except Exception as exc:  # noqa: BLE001 - collected: every failing incident is named
            failed.append(f"{d.name}: {type(exc).__name__}: {exc}")
    assert failed == []
