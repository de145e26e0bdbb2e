"""Per-step coherence (weight syncs grouped, samples judged per policy version), engines matched to
their GPUs in live polls (pid, host, none), and the job identity's measurements (model class from
parameter counts, stage from the open trainer phase)."""
from __future__ import annotations

from pathlib import Path

from rlhealth.catalog import load_catalog
from rlhealth.observers.engines import Engine, engine_gpu_groups
from rlhealth.observers.identity import model_class, params_of
from rlhealth.observers.trials import judge_steps, weight_syncs
from rlhealth.probes.bundle import BundleRead

PARAM = load_catalog().thresholds


# ----------------------------------------------------------------------------- coherence per step
def test_coherence_weight_syncs_group_the_engines_lines_of_one_sync():
    lines = [(100.0, "e.log", 1, "update_weights a"), (100.5, "e.log", 2, "update_weights b"), (700.0, "e.log", 3, "update_weights c"),
             (701.0, "e.log", 4, "update_weights d"), (1300.0, "e.log", 5, "update_weights e")]
    syncs = weight_syncs(list(reversed(lines)), 60)
    assert [s[0] for s in syncs] == [100.0, 700.0, 1300.0]
    assert [s[2] for s in syncs] == [1, 3, 5]


def _samples(per_version: list[tuple[int, int]], syncs: list[float]) -> list[tuple[float, bool]]:
    """(sampled, incoherent) per policy version -> samples started inside that version."""
    edges = [0.0] + syncs
    out = []
    for version, (n, bad) in enumerate(per_version):
        for k in range(n):
            out.append((edges[version] + 1 + k, k < bad))
    return out


def test_coherence_recent_salad_steps_start_at_the_change_sync():
    times = [600.0, 1200.0, 1800.0, 2400.0]
    syncs = [(t, "e.log", i + 1, f"update_weights v{i + 1}") for i, t in enumerate(times)]
    flagged = _samples([(5, 0), (5, 1), (5, 0), (5, 5), (6, 6)], times)
    out = judge_steps(flagged, syncs, PARAM, None)
    assert out["steps_judged"] == 5 and out["recent_salad_steps"] == 2
    assert out["recent_salad_since_sync"] == 3 and (out["recent_salad_sampled"], out["recent_salad_incoherent"]) == (11, 11)
    assert (out["before_change_sampled"], out["before_change_incoherent"]) == (15, 1)
    assert out["step_coherence"] == "initial: 0/5; sync 1: 1/5; sync 2: 0/5; sync 3: 5/5; sync 4: 6/6"
    assert [e.line for e in out["evidence"]] == [3]        # the change-point sync is quoted


def test_coherence_a_coherent_newest_step_ends_the_salad_run():
    times = [600.0, 1200.0, 1800.0]
    syncs = [(t, "e.log", i + 1, "update_weights") for i, t in enumerate(times)]
    out = judge_steps(_samples([(5, 0), (5, 5), (5, 5), (5, 1)], times), syncs, PARAM, None)
    assert out["recent_salad_steps"] == 0 and out["recent_salad_since_sync"] is None and not out["evidence"]


def test_coherence_steps_with_too_few_samples_are_not_judged():
    times = [600.0, 1200.0]
    syncs = [(t, "e.log", i + 1, "update_weights") for i, t in enumerate(times)]
    minimum = int(PARAM["coherence_step_min_samples"])
    out = judge_steps(_samples([(5, 0), (5, 0), (minimum - 1, minimum - 1)], times), syncs, PARAM, None)
    assert out["steps_judged"] == 2 and out["recent_salad_steps"] == 0


def test_coherence_undated_samples_and_no_syncs():
    out = judge_steps([(None, True), (None, True)], [], PARAM, None)
    assert out["weight_syncs"] == 0 and out["steps_judged"] == 0 and out["step_coherence"] is None


# ----------------------------------------------------------------------------- engines <- GPU polls
def _row(host: str, gpu: int, util: float, procs: list[str], role: str = "inference") -> dict:
    return {"t": "2026-08-01T12:00:00Z", "host": host, "gpu": gpu, "util_pct": util, "mem_used_mib": 70000,
            "mem_total_mib": 81559, "role": role, "processes": procs}


def _engine(pid: str, ip: str, pod: str) -> Engine:
    return Engine(scope="ip", pid=pid, label=f"AsyncVLLMInferenceEngine pid={pid}, ip={ip}", ip=ip,
                  sources={f"pod_logs/{pod}.log"})


def test_engine_gpus_matched_by_pid_by_host_and_unmatched():
    read = BundleRead(root=Path("/nonexistent"))
    read.pods = {"items": [{"metadata": {"name": n}, "status": {"podIP": ip}}
                           for n, ip in (("p1", "10.0.0.1"), ("p2", "10.0.0.2"), ("p3", "10.0.0.3"))]}
    # two engines on p1 (told apart by pid only), one on p2 known by its IP, none logging on p3
    engines = [_engine("11", "10.0.0.1", "p1"), _engine("12", "10.0.0.1", "p1"),
               Engine(scope="ip", pid="21", label="AsyncVLLMInferenceEngine pid=21, ip=10.0.0.2", ip="10.0.0.2")]
    read.gpu_polls = [r for k in range(2) for r in (
        _row("p1", 0, 80.0, ["11 ray::AsyncVLLMInferenceEngine"]), _row("p1", 1, 0.0, ["12 ray::AsyncVLLMInferenceEngine"]),
        _row("p1", 2, 50.0, ["99 ray::RayWorkerWrapper"]),             # two engines on p1, no pid: unmatched
        _row("p2", 0, 70.0, ["77 ray::RayWorkerWrapper"]), _row("p3", 0, 90.0, []),
        _row("p1", 7, 99.0, ["4 ray::FSDPPolicyWorker"], role="policy"))]
    groups = {g.identity: g for g in engine_gpu_groups(read, engines, PARAM)}
    assert set(groups) == {"AsyncVLLMInferenceEngine pid=11, ip=10.0.0.1", "AsyncVLLMInferenceEngine pid=12, ip=10.0.0.1",
                           "AsyncVLLMInferenceEngine pid=21, ip=10.0.0.2", "inference GPUs on p1", "inference GPUs on p3"}
    idle = groups["AsyncVLLMInferenceEngine pid=12, ip=10.0.0.1"]
    assert (idle.matched_by, idle.gpu_list, idle.polls, idle.max_util_pct, idle.in_logs) == ("pid", "1", 2, 0.0, True)
    assert groups["AsyncVLLMInferenceEngine pid=21, ip=10.0.0.2"].matched_by == "host"
    assert not groups["inference GPUs on p3"].in_logs and groups["inference GPUs on p3"].matched_by == "none"
    assert "FSDPPolicyWorker" not in " ".join(e.text for g in groups.values() for e in g.evidence)


def test_engine_gpus_none_without_inference_polls():
    read = BundleRead(root=Path("/nonexistent"))
    read.gpu_polls = [_row("p1", 0, 0.0, [], role="policy")]
    assert engine_gpu_groups(read, [_engine("11", "10.0.0.1", "p1")], PARAM) == []


# ----------------------------------------------------------------------------- identity
def test_identity_params_and_class_from_the_model_name():
    assert params_of("Qwen/Qwen3-30B-A3B") == (30.0, 3.0) and model_class(30.0, 3.0) == "MoE"
    assert params_of("Qwen/Qwen3-8B") == (8.0, 8.0) and model_class(8.0, 8.0) == "dense"
    assert params_of("meta-llama/Llama-3.1-70B-Instruct") == (70.0, 70.0)
    assert params_of("gpt2") == (None, None) and model_class(None, None) is None


def _identity_of(tmp_path: Path, finelog: list[str], entrypoint: str, given=None) -> dict:
    import json
    from datetime import datetime, timezone
    from rlhealth.diagnose import diagnose
    root = tmp_path / "jobs" / "cw" / "alice" / "rl"
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({
        "bundle_format": 1, "cluster": "cw", "job_id": "/alice/rl", "synced_at": "2026-08-01T12:30:00Z",
        "job": {"state": "running", "entrypoint": entrypoint}, "artifacts": {"errors": []}}, indent=2))
    (root / "finelog.log").write_text("\n".join(finelog) + "\n")
    report = diagnose(root, now=datetime(2026, 8, 1, 12, 31, tzinfo=timezone.utc), given=given)
    return report.to_json_dict()["identity"]


def test_identity_stage_geometry_and_sources(tmp_path):
    import json
    import sys
    sys.path.insert(0, str(Path(__file__).parent.parent / "incidents"))
    from _lines import at, phase, step_progress
    entry = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-30B-A3B",
                                 "generator.num_inference_engines=4", "generator.inference_engine_tensor_parallel_size=2",
                                 "generator.inference_engine_expert_parallel_size=2"]})
    log = [phase(at(0), "Started", "step"), phase(at(0.1), "Started", "generate"), phase(at(7), "Finished", "generate", 400.0),
           phase(at(7.1), "Started", "policy_train"), phase(at(9), "Finished", "policy_train", 110.0),
           phase(at(9.9), "Finished", "step", 594.0), step_progress(at(9.95), 1, 100),
           phase(at(10), "Started", "step"), phase(at(10.1), "Started", "generate")]
    ident = _identity_of(tmp_path, log, entry, given={"model": {"name": "Qwen/Qwen3-30B-A3B"}})
    assert (ident["model"], ident["model_class"], ident["total_params_b"], ident["active_params_b"]) == ("Qwen/Qwen3-30B-A3B", "MoE", 30.0, 3.0)
    assert ident["model_source"] == "manifest.json:8" and ident["params_source"] == "model name"
    assert (ident["engines"], ident["tp"], ident["ep"], ident["geometry"]) == (4, 2, 2, "4 engines x TP2/EP2")
    assert ident["geometry_source"] == "manifest.json:8"
    assert ident["stage"] == "inference" and ident["stage_source"] == "finelog.log:9 (phase generate open)"
    assert ident["conflicts"] == []
    # the same run's trainer in policy_train: training; no step completed: bring-up
    ident = _identity_of(tmp_path / "b", log + [phase(at(17), "Finished", "generate", 400.0), phase(at(17.1), "Started", "policy_train")], entry)
    assert ident["stage"] == "training" and ident["stage_source"].endswith("(phase policy_train open)")
    ident = _identity_of(tmp_path / "c", log[:2], entry, given={"model": {"name": "Qwen/Qwen3-8B"}})
    assert ident["stage"] == "bring-up"
    assert len(ident["conflicts"]) == 1 and "The given --model Qwen/Qwen3-8B (dense" in ident["conflicts"][0]


def test_coherence_sample_takes_the_newest_of_each_step():
    from rlhealth.probes.parse.trials import per_step_sample
    pool = [(float(t), f"t{t:03d}") for t in range(100)]          # one trial a second, oldest first
    syncs = [20.0, 40.0, 60.0, 80.0]                                # five steps of 20 trials
    sample = per_step_sample(pool, syncs, 12, 3)
    assert [int(s) for s, _ in sample] == [37, 38, 39, 57, 58, 59, 77, 78, 79, 97, 98, 99]
    # fewer steps than the sample needs: the newest of each step, then the newest trials left
    sample = per_step_sample(pool, [50.0], 10, 3)
    assert [int(s) for s, _ in sample] == [47, 48, 49, 93, 94, 95, 96, 97, 98, 99]
    # no sync: the newest; a pool no bigger than the sample: all of it
    assert per_step_sample(pool, [], 5, 2) == pool[-5:]
    assert per_step_sample(pool[:4], syncs, 5, 2) == pool[:4]
    # undated trials are the oldest step
    undated = [(float("-inf"), "u1"), (float("-inf"), "u2")] + pool[:6]
    assert [n for _, n in per_step_sample(undated, [3.0], 4, 1)] == ["u2", "t002", "t004", "t005"]


def test_identity_given_model_and_gpu_both_contradicting_are_both_stated(tmp_path):
    import json
    entry = json.dumps({"argv": ["python", "-m", "cloud.iris.training_driver", "trainer.policy.model.path=Qwen/Qwen3-8B",
                                 "generator.num_inference_engines=2", "--gpu", "H100"]})
    ident = _identity_of(tmp_path, ["x"], entry, given={"model": {"name": "Qwen/Qwen3-30B-A3B"}, "gpu": "B200"})
    assert len(ident["conflicts"]) == 2
    assert any("--model Qwen/Qwen3-30B-A3B" in c for c in ident["conflicts"]) and any("--gpu B200" in c for c in ident["conflicts"])
