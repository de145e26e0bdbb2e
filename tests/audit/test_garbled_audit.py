"""Garbled evidence never fails an audit: a generated standard and agentic run with a share of the
numbers in every text file replaced by garbage ("1e999", 40 nines, "1.2.3"...) or a share of the
members of every JSON file replaced by a value of another type is audited to a record (complete or
blocked), never an internal failure. Each audit runs in a process limited to 2 GiB of address space:
a step of 10**40 once made the audit enumerate every step up to it."""
from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import garble

BINARY = (".safetensors", ".bin", ".pt", ".distcp")


def _garble_numbers(rng, *roots):
    for path in garble.files(*roots, skip_suffixes=BINARY):
        data = path.read_bytes()
        if b"\0" not in data[:1000]:
            path.write_bytes(garble.garble_numbers(data, rng, 0.25))


def _retype_members(rng, share, *roots):
    for path in garble.files(*roots):
        if path.suffix in (".json", ".jsonl"):
            garble.retype_json_file(path, rng, share)


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


def test_a_metric_step_of_ten_to_the_forty_is_audited(tmp_path, B):
    """The gap count of the metric window, not an enumeration of every step up to 10**40."""
    run, bundle = B.make_run(tmp_path / "run-standard", mode="standard")
    step = 10 ** 40
    with open(bundle / "finelog.log", "a") as log:
        log.write("2026-08-01 20:00:00.000 | INFO     | skyrl_train.trainer:_log_metrics_stdout:1951 - WANDB_MIRROR "
                  f"kind=train step={step} metrics=" + json.dumps({"reward/avg_raw_reward": 0.5, "trainer/global_step": step}) + "\n")
    record = _audit(run, bundle)
    assert record["status"] in ("complete", "blocked"), record.get("error")
    assert record["metrics"]["last_step"] == step and record["metrics"]["missing_count"] == step - 81
