"""Deterministic builders of tiny real runs, checkpoints and exports for the audit tests.

Weights are real safetensors files written with ``safetensors.numpy.save_file``. Per layer the
tensors hold exactly 12*H^2 parameters and the embeddings + lm_head 2*V*H, so a truthful
config.json matches the 12*L*H^2 + 2*V*H estimate exactly. Credential-shaped strings are fake.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

FAKE_HF = "hf_" + "FAKEFAKEFAKEFAKEFAKEFAKE99"
FAKE_OPENAI = "sk-" + "FAKEfakeFAKEfakeFAKEfake00"
FAKE_JWT = "eyJGQUtFIjoiRkFLRSJ9" + "." + "eyJzdWIiOiJGQUtFIn0" + "." + "RkFLRXNpZ25hdHVyZQ"
FAKE_IRIS_URL = "https://iris.oa.dev/proxy/t/" + FAKE_JWT


def tensors(layers=2, hidden=8, vocab=16):
    H, V = hidden, vocab
    out = {"model.embed_tokens.weight": np.zeros((V, H), np.float32), "lm_head.weight": np.ones((V, H), np.float32)}
    for i in range(layers):
        out[f"model.layers.{i}.self_attn.qkvo.weight"] = np.full((4 * H, H), i, np.float32)
        out[f"model.layers.{i}.mlp.up_proj.weight"] = np.zeros((4 * H, H), np.float32)
        out[f"model.layers.{i}.mlp.down_proj.weight"] = np.zeros((H, 4 * H), np.float32)
    return out


def write_model(d: Path, *, layers=2, hidden=8, vocab=16, shards=2, config=None, tokenizer=True,
                total_size_delta=0, drop_shard=None):
    """A HF-style model dir: model-0000i-of-0000n.safetensors + index, config.json, tokenizer files."""
    d.mkdir(parents=True, exist_ok=True)
    ts = tensors(layers, hidden, vocab)
    names = sorted(ts)
    groups = [names[i::shards] for i in range(shards)]
    weight_map, total = {}, 0
    for i, group in enumerate(groups, 1):
        fname = f"model-{i:05d}-of-{shards:05d}.safetensors"
        save_file({n: ts[n] for n in group}, str(d / fname), metadata={"format": "pt"})
        for n in group:
            weight_map[n] = fname
            total += ts[n].nbytes
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total + total_size_delta}, "weight_map": weight_map}, indent=2, sort_keys=True))
    if drop_shard:
        (d / f"model-{drop_shard:05d}-of-{shards:05d}.safetensors").unlink()
    cfg = {"hidden_size": hidden, "num_hidden_layers": layers, "vocab_size": vocab, "model_type": "llama"}
    cfg.update(config or {})
    (d / "config.json").write_text(json.dumps(cfg, sort_keys=True))
    if tokenizer:
        (d / "tokenizer.json").write_text('{"version": "1.0"}')
        (d / "tokenizer_config.json").write_text('{"model_max_length": 128}')
    return sum(t.size for t in ts.values())


def write_fsdp_checkpoint(d: Path, world=2, drop_rank=None):
    pol = d / "policy"
    pol.mkdir(parents=True)
    for r in range(world):
        for kind in ("model", "optim", "extra_state"):
            if kind == "model" and r == drop_rank:
                continue
            (pol / f"{kind}_world_size_{world}_rank_{r}.pt").write_bytes(b"fake-torch-state")
    (pol / "fsdp_config.json").write_text(json.dumps({"fsdp_strategy": "fsdp2", "world_size": world}))
    hf = pol / "huggingface"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 16}))
    (hf / "tokenizer.json").write_text("{}")
    (d / "trainer_state.pt").write_bytes(b"x")
    (d / "data.pt").write_bytes(b"x")


BROKEN = {"policy/log_ratio_abs_max": 19.2, "policy/policy_loss": 10421.5, "policy/raw_grad_norm": 118234.0}


def step_time(step):
    """Wall time of a step's metric line: 10:00:00 + 3 min per step (2026-08-01, UTC)."""
    from datetime import datetime, timedelta, timezone
    return datetime(2026, 8, 1, 10, 0, tzinfo=timezone.utc) + timedelta(minutes=3 * step)


def wandb(step, reward, broken=False):
    metrics = {"reward/avg_raw_reward": reward, "policy/policy_loss": -0.01, "policy/log_ratio_abs_max": 0.42,
               "policy/raw_grad_norm": 0.06, "trainer/global_step": step}
    if broken:
        metrics.update(BROKEN)
    return (step_time(step).strftime("%Y-%m-%d %H:%M:%S.000") + " | INFO     | skyrl_train.trainer:_log_metrics_stdout:1951 - WANDB_MIRROR kind=train "
            f"step={step} metrics=" + json.dumps(metrics, sort_keys=True))


REWARDS = {s: 0.1 + 0.01 * ((s * 7) % 13) for s in range(1, 201)}


def finelog_lines(budget=80, rewards=None, fail_at=None, tail_attempt_error=False, sha="0123abcd4567", broken_from=None):
    """One attempt to ``fail_at`` (with a primary error then a louder cascade), a resumed attempt to
    the budget, and optionally a redundant tail attempt that errors after the budget completed."""
    rewards = rewards or REWARDS
    lines = ["task=/alice/rl-run/0 | [iris setup] step 1/2", f"[rl-iris] MarinSkyRL now at {sha}",
             "2026-08-01 10:00:00.000 | WARNING  | x - ValueError: benign warning tagged WARNING"]
    end1 = fail_at or budget
    for s in range(1, end1 + 1):
        lines.append(f"Training Step Progress: {s} / {budget}")
        lines.append(wandb(s, rewards[s], broken=broken_from is not None and s >= broken_from))
        if s % 20 == 0:
            lines.append(f"Successfully saved checkpoint for global_step_{s} to: /ckpts/global_step_{s}")
    if fail_at:
        lines += ["(skyrl_entrypoint pid=12) Traceback (most recent call last):",
                  '(skyrl_entrypoint pid=12)   File "trainer.py", line 10, in train',
                  "(skyrl_entrypoint pid=12)     raise RuntimeError('boom')",
                  f"(skyrl_entrypoint pid=12) RuntimeError: primary failure in step {fail_at + 1} token={FAKE_HF}",
                  "[rank2]:[E0513 04:11:09.123 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: LOUD cascade",
                  "torch.distributed.DistBackendError: NCCL cascade (survivor)"]
        lines += ["task=/alice/rl-run/0 | [iris setup] step 1/2", f"[rl-iris] MarinSkyRL now at {sha}",
                  f"Resumed training from global_step {fail_at - fail_at % 20}"]
        for s in range(fail_at - fail_at % 20 + 1, budget + 1):
            lines.append(f"Training Step Progress: {s} / {budget}")
            lines.append(wandb(s, rewards[s], broken=broken_from is not None and s >= broken_from))
            if s % 20 == 0:
                lines.append(f"Successfully saved checkpoint for global_step_{s} to: /ckpts/global_step_{s}")
    if tail_attempt_error:
        lines += ["task=/alice/rl-run/0 | [iris setup] step 1/2", f"[rl-iris] MarinSkyRL now at {sha}",
                  f"Resumed training from global_step {budget}",
                  "(skyrl_entrypoint pid=99) Traceback (most recent call last):",
                  '(skyrl_entrypoint pid=99)   File "trainer.py", line 88, in train',
                  "(skyrl_entrypoint pid=99) AssertionError: global_step 81 overshoots max_steps"]
    return lines


def make_run(root: Path, *, mode="standard", state="succeeded", budget=80, ckpt_steps=(20, 40, 60, 80),
             export_steps=(20, 40, 60, 80), fail_at=None, tail_attempt_error=False, entrypoint_style=False,
             broken_from=None):
    """RUN dir + BUNDLE dir. Returns (run, bundle)."""
    run, bundle = root / "run", root / "bundle"
    run.mkdir(parents=True)
    bundle.mkdir(parents=True)
    cfg = {"trainer": {"max_steps": budget, "ckpt_interval": 20, "run_name": "rl-qwen-harbor-tb-agentic-NAME",
                       "resume_mode": "latest", "policy": {"model": {"path": "Qwen/Qwen3-8B"}}},
           "generator": {"backend": "vllm"}}
    entry = ["python", "-m", "cloud.iris.training_driver", "--skyrl-ref", "0123abcd4567",
             "trainer.run_name=rl-standard-NAME", f"trainer.max_steps={budget}"]
    if mode == "agentic":
        cfg["terminal_bench_config"] = {"agent_api_base": FAKE_IRIS_URL, "trials_dir": "s3://b/tmp/ttl=14d/x/trace_jobs"}
        cfg["generator"]["harbor"] = {"n_concurrent_trials": 32}
        entry += ["--trials_dir", "s3://b/tmp/ttl=14d/x/trace_jobs", f"terminal_bench_config.agent_api_base={FAKE_IRIS_URL}"]
    if not entrypoint_style:
        (run / "resolved_config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    manifest = {"bundle_format": 1, "cluster": "cw-test", "job_id": "/alice/rl-run", "kind": "rl",
                "synced_at": "2026-08-01T12:00:00+00:00",
                "job": {"job_id": "/alice/rl-run", "state": state, "entrypoint": json.dumps({"argv": entry}, separators=(",", ":"))}}
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    (bundle / "finelog.log").write_text("\n".join(finelog_lines(budget, fail_at=fail_at, tail_attempt_error=tail_attempt_error, broken_from=broken_from)) + "\n")
    ck = run / "ckpts"
    ck.mkdir()
    for s in ckpt_steps:
        write_fsdp_checkpoint(ck / f"global_step_{s}")
    if ckpt_steps:
        (ck / "latest_ckpt_global_step.txt").write_text(str(max(ckpt_steps)))
    for s in export_steps:
        write_model(run / "exports" / f"global_step_{s}" / "policy")
    if mode == "agentic":
        tj = bundle / "trace_jobs"
        for i in range(3):
            t = tj / f"task-{i}__Ab3dE9f"
            (t / "verifier").mkdir(parents=True)
            (t / "result.json").write_text(json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}}))
            (t / "verifier" / "test-stdout.txt").write_text("ok")
    return run, bundle


def make_published(d: Path, *, secrets=False, coverage=0.97, traces_link=True, logs=True):
    write_model(d, shards=1)
    readme = "# Model\n\nTrained with RL.\n"
    if traces_link:
        readme += "\n## Training Traces\n\nSee https://huggingface.co/datasets/alice/rl-run-traces for traces.\n"
    if logs:
        (d / "training_logs").mkdir()
        (d / "training_logs" / "trainer.log").write_text("step 1 ok\nstep 2 ok\n")
        (d / "training_logs" / "metrics.json").write_text(json.dumps({"reward": [0.1, 0.2]}, indent=2))
    if secrets:
        readme += f"\nDownload with token {FAKE_HF}\n"
        with open(d / "training_logs" / "trainer.log", "a") as f:
            f.write(f"calling {FAKE_IRIS_URL}/v1/chat\n")
        (d / "training_logs" / "metrics.json").write_text(json.dumps({"reward": [0.1], "api_key": FAKE_OPENAI}, indent=2))
    (d / "README.md").write_text(readme)
    if coverage is not None:
        (d / "trace_export_manifest.json").write_text(json.dumps({"result_coverage": coverage, "rows": 97, "result_json_files": 100}))
    return d


@pytest.fixture
def std_run(tmp_path):
    return make_run(tmp_path / "rl-qwen-harbor-tb-agentic-NAME", mode="standard")


@pytest.fixture
def agentic_run(tmp_path):
    return make_run(tmp_path / "rl-standard-NAME", mode="agentic", entrypoint_style=True)


@pytest.fixture
def B():
    """This module's builders (tests cannot import conftest under --import-mode=importlib)."""
    import sys
    return sys.modules[__name__]


def run_cli(argv, capsys):
    from rlhealth.cli import main
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def cli(capsys):
    def _run(*argv, fmt="json"):
        code, out, err = run_cli(["audit", *map(str, argv), "--format", fmt, "--now", "2026-08-02T00:00:00Z"], capsys)
        if fmt == "json" and out.strip():
            return code, json.loads(out), err
        return code, out, err
    return _run


@pytest.fixture(scope="session")
def schema():
    from importlib import resources
    return json.loads(resources.files("rlhealth").joinpath("schema/audit.schema.json").read_text())


# ------------------------------------------------------------------ agentic hand-off fixtures
def trace_row(i, content=None):
    """One exported trace row as MarinSkyRL's export writes it (ShareGPT conversations)."""
    return {"trial_name": f"task-{i}__Zx{i:04d}", "episode": "episode-0",
            "conversations": [{"role": "user", "content": f"solve task {i}"},
                              {"role": "assistant", "content": content or f"done with task {i}"}]}


def write_rows(p: Path, rows: list[dict]):
    """A real parquet shard (pyarrow) holding ``rows``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = pa.schema([("trial_name", pa.string()), ("episode", pa.string()),
                        ("conversations", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), str(p))
    return p


def make_trace_root(d: Path, *, job="rl-run", trials=40, objects_skipped=0, rows=None, shards=1,
                    stale_shard=False, list_shards=True, sync_manifest=True):
    """The trace rebuild of seed 002 step 5: <job>_trace_jobs.tar, its sync manifest, the extracted
    trace_jobs/ and a --stage-only staged dataset tree (trace_export_manifest.json + data/train-*.parquet)."""
    import tarfile
    d.mkdir(parents=True, exist_ok=True)
    tj = d / "trace_jobs"
    for i in range(trials):
        t = tj / f"task-{i}__Zx{i:04d}"
        (t / "agent").mkdir(parents=True)
        (t / "result.json").write_text(json.dumps({"trial_name": t.name, "verifier_result": {"rewards": {"reward": i % 2}}}))
    with tarfile.open(d / f"{job}_trace_jobs.tar", "w") as tar:
        tar.add(tj, arcname=".")
    if sync_manifest:
        skipped = [{"key": f"task-{i}__Zx{i:04d}/agent/big.bin", "size": 200 << 20, "reason": "non_log_size_limit"}
                   for i in range(objects_skipped)]
        (d / f"{job}_trace_jobs.manifest.json").write_text(json.dumps(
            {"prefix": f"s3://bucket/{job}/trace_jobs", "objects_copied": trials * 2, "objects_skipped": skipped}, indent=2))
    rows = trials if rows is None else rows
    stage = d / "staging"
    (stage / "data").mkdir(parents=True)
    names = [f"train-{i:05d}.parquet" for i in range(shards)]
    for i, n in enumerate(names):
        write_rows(stage / "data" / n, [trace_row(r) for r in range(rows) if r % shards == i])
    if stale_shard:
        write_rows(stage / "data" / f"train-{shards:05d}.parquet", [trace_row(999)])
    doc = {"result_count": trials, "row_count": rows, "result_coverage": round(rows / max(1, trials), 4)}
    if list_shards:
        doc["shards"] = names
    (stage / "trace_export_manifest.json").write_text(json.dumps(doc, sort_keys=True))
    return d


def make_campaign(p: Path, **over):
    doc = {"model_repo": "alice/rl-run-80-0B", "trace_dataset": "alice/rl-run-traces",
           "selection_policy": "ema-reward:alpha=1/3", "base_model": "Qwen/Qwen3-8B",
           "tracker_url": "https://wandb.ai/alice/rl-run", "registration": {"authorized": False},
           "reclaim": {"authorized": False}}
    doc.update(over)
    p.write_text(json.dumps(doc, indent=2, sort_keys=True))
    return p


def make_agentic_handoff(root: Path, *, clean=True):
    """A terminal agentic run ready for hand-off: chain, checkpoints, exports, monitor mirror (sample),
    trace rebuild, published-model download and campaign record. ``clean=False``: the sync skipped
    objects and the export's coverage is below the gate."""
    run, bundle = make_run(root, mode="agentic", fail_at=50)
    (bundle / "trace_jobs" / "sync_selection.json").write_text(json.dumps(
        {"selection": "latest_object_store_last_modified_across_active_rl_jobs", "trace_sync_limit": 500,
         "available_traces": 412, "selected_traces": 3, "omitted_traces": 409}))
    traces = make_trace_root(root / "traces", trials=40, objects_skipped=0 if clean else 3, rows=40 if clean else 30)
    pub = make_published(root / "pub", coverage=1.0 if clean else 0.75)
    campaign = make_campaign(root / "campaign.yaml")
    return run, bundle, traces, pub, campaign


def write_distcp_checkpoint(d: Path, *, world=2, chunks=2, drop=None, optimizer=True):
    """A Megatron/torch distributed checkpoint: __<rank>_<i>.distcp shards, metadata.json and a
    ``.metadata`` pickle laid out like torch.distributed.checkpoint.metadata.Metadata (storage_data
    maps every chunk to its shard's relative_path). torch is not installed here: the classes are
    stand-ins registered under torch's module names only while pickling."""
    import pickle
    import sys
    import types
    from dataclasses import dataclass as dc

    names = ["torch", "torch.distributed", "torch.distributed.checkpoint", "torch.distributed.checkpoint.metadata"]
    saved = {n: sys.modules.get(n) for n in names}
    mod = types.ModuleType("torch.distributed.checkpoint.metadata")

    @dc(frozen=True)
    class MetadataIndex:
        fqn: str
        offset: tuple = ()
        index: int | None = None

    @dc
    class _StorageInfo:
        relative_path: str
        offset: int
        length: int

    @dc
    class Metadata:
        state_dict_metadata: dict
        planner_data: object = None
        storage_data: object = None

    for cls in (MetadataIndex, _StorageInfo, Metadata):
        cls.__module__ = mod.__name__
        cls.__qualname__ = cls.__name__
        setattr(mod, cls.__name__, cls)
    pol = d / "policy"
    pol.mkdir(parents=True)
    keys = ["model.decoder.layers.0.weight", "model.decoder.layers.1.weight"]
    if optimizer:
        keys += ["optimizer.state.exp_avg.model.decoder.layers.0.weight", "optimizer.state.exp_avg_sq.model.decoder.layers.0.weight"]
    storage = {}
    for rank in range(world):
        for i in range(chunks):
            rel = f"__{rank}_{i}.distcp"
            storage[MetadataIndex(keys[(rank + i) % len(keys)], (rank,), i)] = _StorageInfo(rel, 0, 24)
            if (rank, i) != drop:
                (pol / rel).write_bytes(b"\x00" * 24)
    try:
        for n in names[:-1]:
            sys.modules[n] = types.ModuleType(n)
        sys.modules[names[-1]] = mod
        data = pickle.dumps(Metadata({k: None for k in keys}, None, storage), protocol=4)
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
    (pol / ".metadata").write_bytes(data)
    (pol / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1}))
    hf = pol / "huggingface"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 16}))
    (hf / "tokenizer.json").write_text("{}")
    (d / "trainer_state.pt").write_bytes(b"x")
    (d / "data.pt").write_bytes(b"x")


def snapshot(root):
    """(mode, size, mtime, sha256) of every entry below ``root``: proves a command wrote nothing."""
    import hashlib
    import os

    out = {}
    for dp, dns, fns in os.walk(root):
        for n in sorted(dns + fns):
            p = os.path.join(dp, n)
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out
