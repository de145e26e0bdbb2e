"""Pure parsers on real line formats by version (log-formats.md, marin-artifacts.md)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.parse import vllm as vp
from rlhealth.probes.parse.nvidia_smi import parse_query_gpu
from rlhealth.probes.parse.timestamps import line_timestamp, parse_iso
from rlhealth.probes.textio import clean_line, quote

REF = datetime(2026, 8, 1, 15, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("line,era,gen,running,waiting", [
    ("INFO 08-22 06:24:12 metrics.py:351] Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 1532.9 tokens/s, "
     "Running: 48 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 87.2%, CPU KV cache usage: 0.0%.", "v0", 1532.9, 48, 3),
    ("INFO 03-14 09:12:55 [loggers.py:111] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 5.5 tokens/s, "
     "Running: 1 reqs, Waiting: 0 reqs ", "v1-early", 5.5, 1, 0),
    ("(AsyncVLLMInferenceEngine pid=2871, ip=10.1.2.3) INFO 08-01 14:05:09 [loggers.py:248] Engine 000: Avg prompt throughput: 812.4 tokens/s, "
     "Avg generation throughput: 2310.7 tokens/s, Running: 48 reqs, Waiting: 0 reqs, GPU KV cache usage: 37.5%, Prefix cache hit rate: 61.2%", "v1", 2310.7, 48, 0),
    ("(APIServer pid=962) INFO 04-28 04:15:05 [loggers.py:259] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 0.1 tokens/s, "
     "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%, MM cache hit rate: 0.0%", "v1-2026", 0.1, 1, 0),
])
def test_vllm_stats_every_era(line, era, gen, running, waiting):
    s = vp.parse_stats(line, "f.log", 3, None)
    assert (s.era, s.gen_tok_s, s.running, s.waiting) == (era, gen, running, waiting)


def test_vllm_engine_identity_distinguishes_actors_and_indices():
    a = vp.parse_stats("(AsyncVLLMInferenceEngine pid=1, ip=10.0.0.1) INFO 08-01 14:05:09 [l.py:1] Engine 001: Avg prompt throughput: 1.0 tokens/s, "
                       "Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 1.0%", "f", 1, None)
    assert a.engine == "AsyncVLLMInferenceEngine:10.0.0.1:1#001"


@pytest.mark.parametrize("text,expected", [
    ("(EngineCore_DP0 pid=2211) INFO 03-14 09:12:55 [core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: enforce_eager=False, x", False),
    ("(APIServer pid=1) INFO 11-25 08:00:42 [vllm.py:500] Cudagraph is disabled under eager mode", True),
    ("WARNING 11-25 08:00:42 [vllm.py:1172] Enforce eager set, disabling torch.compile and CUDAGraphs.", True),
    ("INFO 11-25 08:00:42 [gpu_model_runner.py:3]  Graph capturing finished in 8 secs, took 0.31 GiB", False),
    ("nothing here", None),
])
def test_enforce_eager_from_engine_lines(text, expected):
    assert vp.eager_from_line(text) is expected


def test_enforce_eager_from_config_last_setting_wins():
    assert vp.eager_from_config("generator.enforce_eager=false ... generator.enforce_eager=true") is True
    assert vp.eager_from_config('{"enforce_eager": false}') is False
    assert vp.eager_from_config("no setting") is None


def test_wandb_mirror_good_malformed_and_eval():
    line = ('2026-08-01 14:02:11.532 | INFO     | skyrl_train.trainer:_log_metrics_stdout:1951 - WANDB_MIRROR kind=train step=12 '
            'metrics={"policy/policy_entropy": 1.09, "reward/avg_raw_reward": 0.34, "timing/step": 412.7}')
    kind, step, metrics = tp.parse_wandb_mirror(line)
    assert (kind, step, metrics["reward/avg_raw_reward"], metrics["trainer/global_step"]) == ("train", 12, 0.34, 12.0)
    assert tp.parse_wandb_mirror("WANDB_MIRROR kind=train step=3 metrics={\"a\": 1")[2] is None
    assert tp.parse_wandb_mirror("WANDB_MIRROR kind=eval step=3 metrics={}")[0] == "eval"


def test_python_dict_block_multiline_with_quoted_floats_and_actor_prefix():
    block = ("(skyrl_entrypoint pid=1) 2026-05-03 11:20:41.118 | INFO | tracking:log:189 - Step 12: \n"
             "(skyrl_entrypoint pid=1) {'async/staleness_max': 0,\n"
             "(skyrl_entrypoint pid=1)  'generate/avg_num_tokens': '1843.2500',\n"
             "(skyrl_entrypoint pid=1)  'policy/policy_loss': '-0.0121',\n"
             "(skyrl_entrypoint pid=1)  'trainer/global_step': 12}")
    metrics = tp.parse_dict_block(block)
    assert metrics["policy/policy_loss"] == -0.0121 and metrics["trainer/global_step"] == 12.0


@pytest.mark.parametrize("step", ["'1e999'", "'nan'", "'-inf'", "'" + "9" * 5_000 + "'", "9" * 5_000])
def test_python_dict_block_whose_step_is_no_count_is_no_record(step):
    """The reader takes the step as ``int()`` of the record's value: inf, NaN or thousands of
    digits make the block malformed, not a record whose step raises."""
    assert tp.parse_dict_block("{'policy/policy_loss': '-0.0121', 'trainer/global_step': " + step + "}") is None


def test_metric_aliases_in_priority_order():
    assert tp.metric({"loss/avg_final_rewards": 0.2, "reward/avg_raw_reward": 0.5}, "reward") == 0.5
    assert tp.metric({"loss/avg_final_rewards": 0.2}, "reward") == 0.2
    assert tp.metric({"reward/avg_pass_at_8": 0.7}, "reward") == 0.7
    assert tp.metric({"raw_grad_norm": 3.0}, "grad_norm") == 3.0
    assert tp.metric({}, "entropy") is None


def test_step_progress_plain_and_tqdm_and_phases():
    assert tp.parse_step_progress("Training Step Progress: 7 / 20") == (7, 20)
    assert tp.parse_step_progress("Training Step Progress:  35%|███▌  | 7/20 [01:02<02:00]") == (7, 20)
    assert tp.parse_phase("Finished: 'generate', time cost: 83.41s") == ("Finished", "generate", 83.41)
    assert tp.parse_phase("Started: 'fwd_logprobs_values_reward'") == ("Started", "fwd_logprobs_values_reward", None)
    assert tp.parse_gen_buffer("Generation Buffer Progress:  50%|█████  | 16/32 [00:10<00:10]") == (16, 32)


def test_harbor_batch_lines():
    assert tp.parse_batch_complete("Batch generation complete: 12/32 successful, 4 failed instances, 20 masked (excluded)") == \
        {"successful": 12, "total": 32, "failed": 4, "masked": 20}
    assert tp.parse_exception_breakdown("Exception breakdown: {'DaytonaValidationError': 20, 'AgentTimeoutError': 3}") == \
        {"DaytonaValidationError": 20, "AgentTimeoutError": 3}
    assert tp.parse_batch_complete("Batch generation finished: 12/32") is None   # known fragility, pinned


@pytest.mark.parametrize("text,iso_expected", [
    ("2026-08-01 14:02:11.532 | INFO | x - y", "2026-08-01T14:02:11"),
    ("[2025-08-09 14:59:33,113 E 833 2105] logging.cc:496: x", "2025-08-09T14:59:33"),
    ("(EngineCore_DP0 pid=1) ERROR 08-01 13:25:57 [core.py:710] x", "2026-08-01T13:25:57"),
    ("[rank2]:[E0801 04:11:09.123456789 ProcessGroupNCCL.cpp:632] x", "2026-08-01T04:11:09"),
    ("INFO 12-31 23:59:00 [x.py:1] new-year rollover", "2025-12-31T23:59:00"),
])
def test_line_timestamps(text, iso_expected):
    t = line_timestamp(text, REF)
    assert datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") == iso_expected


def test_iso_parsing_naive_and_offsets():
    assert parse_iso("2026-08-01T14:30:12.345678+00:00") == parse_iso("2026-08-01T14:30:12.345678Z")
    assert parse_iso("2026-08-01T16:30:12+02:00") == parse_iso("2026-08-01T14:30:12")
    assert parse_iso("not a time") is None and parse_iso(None) is None


def test_nvidia_smi_units_na_and_header():
    text = "index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n0, 97 %, 71234 MiB, 81559 MiB, 612.34 W\n1, [N/A], 4 MiB, 81559 MiB, [Not Supported]\n"
    rows = parse_query_gpu(text)
    assert rows[0] == {"gpu": 0, "util_pct": 97.0, "mem_used_mib": 71234, "mem_total_mib": 81559, "power_w": 612.34}
    assert rows[1]["util_pct"] is None and rows[1]["power_w"] is None


def test_quoted_lines_are_cleaned_redacted_and_cut():
    raw = b"\x1b[0;36m(Worker pid=1)\x1b[0m api_base=https://iris.oa.dev/proxy/t/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlAAAA/v1 ok\r\n"
    text = quote(clean_line(raw))
    assert "\x1b" not in text and "\r" not in text
    assert "eyJhbGci" not in text and "<redacted:" in text
    assert len(quote("x" * 5000)) == 500


@pytest.mark.parametrize("number", ["1.2.3", ".", "1..2", "..5"])
def test_a_stats_line_with_a_garbled_number_is_no_sample(number, tmp_path):
    """``float()`` refuses these: the line is no stats line (it used to crash the diagnosis)."""
    from datetime import datetime, timezone

    from rlhealth.diagnose import diagnose
    from rlhealth.probes.parse import vllm as vp

    line = (f"(AsyncVLLMInferenceEngine pid=31, ip=10.1.1.11) INFO 08-01 13:59:41 [loggers.py:259] Engine 000: "
            f"Avg prompt throughput: {number} tokens/s, Avg generation throughput: 3.0 tokens/s, Running: 1 reqs, "
            f"GPU KV cache usage: {number}%")
    assert vp.parse_stats(line, "x.log", 1, None) is None
    good = line.replace(f"throughput: {number} ", "throughput: 2.5 ")
    sample = vp.parse_stats(good, "x.log", 1, None)
    assert sample is not None and sample.prompt_tok_s == 2.5 and sample.kv_pct is None
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "finelog.log").write_text((line + "\n") * 3 + good + "\n")
    report = diagnose(bundle, now=datetime(2026, 8, 1, 14, 10, tzinfo=timezone.utc))
    assert report.verdict in ("KILL", "NO-KILL", "ERROR")
    assert "internal failure" not in report.reasoning
