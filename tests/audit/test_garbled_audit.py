"""Garbled evidence never fails an audit: a generated standard and agentic run with a share of the
numbers in every text file replaced by garbage ("1e999", 40 nines, "1.2.3"...) or a share of the
members of every JSON file replaced by a value of another type is audited to a record (complete or
blocked), never an internal failure. Each audit runs in a process limited to 2 GiB of address space:
a step of 10**40 once made the audit enumerate every step up to it."""
from __future__ import annotations

import json
import random
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

GARBLED = ["1.2.3", ".", "..", "-", "1e999", "-1e999", "nan", "inf", "-0", "9" * 40, "0x1f", "١٢", "1,5", "", "+", "1.", ".5"]
_NUMBER = re.compile(rb"(?<![A-Za-z])[0-9]+(?:\.[0-9]+)?")
_ODD = [None, 0, -1, 1.5, 1e308, -1e308, "", "x", "NaN", "2026-13-45T99:99:99Z", [], {}, [1, "a"], {"a": None}, True]
BINARY = (".safetensors", ".bin", ".pt", ".distcp")


def _retyped(value, rng, share):
    if rng.random() < share:
        return rng.choice(_ODD)
    if isinstance(value, dict):
        return {k: _retyped(v, rng, share) for k, v in value.items()}
    if isinstance(value, list):
        return [_retyped(v, rng, share) for v in value]
    return value


def _text_files(*roots: Path):
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            if path.is_file() and not path.is_symlink() and path.suffix not in BINARY and path.stat().st_size < 2_000_000:
                yield path


def _garble_numbers(rng, *roots):
    for path in _text_files(*roots):
        data = path.read_bytes()
        if b"\0" not in data[:1000]:
            path.write_bytes(_NUMBER.sub(lambda m: rng.choice(GARBLED).encode() if rng.random() < 0.25 else m.group(0), data))


def _retype_members(rng, share, *roots):
    for path in _text_files(*roots):
        if path.suffix not in (".json", ".jsonl"):
            continue
        lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
        out = []
        for line in lines:
            try:
                out.append(json.dumps(_retyped(json.loads(line), rng, share)).encode())
            except ValueError:
                out.append(line)
        path.write_bytes(b"\n".join(out) + b"\n")


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _audit(run: Path, bundle: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "rlhealth", "audit", str(run), "--bundle", str(bundle), "--format", "json",
                           "--now", "2026-08-02T00:00:00Z"], capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_memory, cwd=run.parent)   # not the source tree: the installed package
    return json.loads(proc.stdout)


@pytest.mark.parametrize("kind", ["standard", "agentic"])
@pytest.mark.parametrize("spoil", ["numbers-1", "numbers-2", "members-3-0.05", "members-4-0.15", "members-5-0.35"])
def test_garbled_run_is_audited(tmp_path, B, kind, spoil):
    run, bundle = B.make_run(tmp_path / f"run-{kind}", mode=kind, entrypoint_style=(kind == "agentic"))
    what, seed, *share = spoil.split("-")
    rng = random.Random(int(seed))
    if what == "numbers":
        _garble_numbers(rng, run, bundle)
    else:
        _retype_members(rng, float(share[0]), run, bundle)
    record = _audit(run, bundle)
    assert record["status"] in ("complete", "blocked"), record.get("error")
