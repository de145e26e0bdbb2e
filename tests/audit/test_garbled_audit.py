"""Garbled evidence never fails an audit: a generated standard and agentic run with a share of the
numbers in every text file replaced by garbage ("1e999", 40 nines, "1.2.3"...) or by a run of
thousands of digits (more than ``int()`` converts), or a share of the members of every JSON file
replaced by a value of another type, is audited to a record (complete or blocked), never an
internal failure. Each audit runs in a process limited to 2 GiB of address space:
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


def _garble_numbers(rng, share, choices, *roots):
    for path in garble.files(*roots, skip_suffixes=BINARY):
        data = path.read_bytes()
        if b"\0" not in data[:1000]:
            path.write_bytes(garble.garble_numbers(data, rng, share, choices))


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
@pytest.mark.parametrize("spoil", ["numbers-1-0.25", "numbers-2-0.25", "members-3-0.05", "members-4-0.15", "members-5-0.35",
                                   "long-numbers-6-0.3"])
def test_garbled_run_is_audited(tmp_path, B, kind, spoil):
    run, bundle = B.make_run(tmp_path / f"run-{kind}", mode=kind, entrypoint_style=(kind == "agentic"))
    *what, seed, share = spoil.split("-")
    rng = random.Random(int(seed))
    if what == ["numbers"]:
        _garble_numbers(rng, float(share), garble.GARBLED, run, bundle)
    elif what == ["long", "numbers"]:
        _garble_numbers(rng, float(share), garble.LONG_RUNS, run, bundle)
    else:
        _retype_members(rng, float(share), run, bundle)
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


def test_numbers_of_thousands_of_digits_in_audit_inputs_are_not_read(tmp_path):
    """A step, rank or layer number of 5,000 digits (``int()`` refuses past 4300) in the places the
    whole-run garbling does not reach: a diagnosis report's gate evidence, a DCP .metadata pickle,
    a safetensors tensor name, a campaign's selection policy, logged save/resume lines."""
    import pickle

    import numpy as np
    from safetensors.numpy import save_file

    from rlhealth.audit import distcp, handoff, logs, policy, weights
    from rlhealth.audit.safefs import Root

    long = "9" * 5_000
    report = tmp_path / "diagnosis.json"
    report.write_text(json.dumps({"gates": {"dynamics": {
        "findings": [{"rule": "dynamics.broken_replay", "status": "FAIL"}],
        "evidence": [{"source": "finelog.log", "line": 1, "text": f"step {long}: reward 0.0"}]}}}))
    brk, problem = handoff.diagnosis_break(report)
    assert brk is None and "places no step" in problem

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "__0_0.distcp").write_bytes(b"x")
    (ckpt / ".metadata").write_bytes(pickle.dumps((distcp.DCP_CLASS + ".Metadata", "__0_0.distcp", f"__{long}_0.distcp")))
    checks, facts = distcp.validate_distcp(Root("run", tmp_path), ckpt)
    assert facts["ranks"] == [0] and {c["check"]: c["status"] for c in checks}["rank_shards"] == "pass"

    model = tmp_path / "model"
    model.mkdir()
    save_file({f"model.layers.{long}.w": np.zeros((2, 2), np.float32), "model.layers.0.w": np.zeros((2, 2), np.float32)},
              str(model / "model.safetensors"))
    (model / "config.json").write_text(json.dumps({"hidden_size": 2, "num_hidden_layers": 1, "vocab_size": 2}))
    root = Root("export", tmp_path)
    size = weights.model_size(root, model, [weights.read_header(root, model / "model.safetensors")], None, [])
    assert size["parameters"] == 8
    header = json.dumps({"w": {"dtype": "X9", "shape": [10 ** 4_000, 10 ** 4_000], "data_offsets": [0, 0]}}).encode()
    (model / "huge.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    huge = weights.read_header(root, model / "huge.safetensors")     # 10**8000 elements: past any count
    assert not huge.ok and "shape" in huge.error and weights.model_size(root, model, [huge], None, [])["parameters"] == 0

    for text in (f"fixed:step={long}", f"ema-reward:save_every={long}", f"ema-reward:min_step={long}"):
        with pytest.raises(policy.PolicyError):
            policy.parse_policy(text)

    log = tmp_path / "train.log"
    log.write_text(f"Successfully saved checkpoint for global_step_{long}\nResumed training from global_step {long}\n"
                   "Successfully saved checkpoint for global_step_20\n")
    facts = logs.scan_logs([(Root("bundle", tmp_path), log, False)])
    assert facts.saved_steps == {20} and facts.attempts[0].resumed_from is None
