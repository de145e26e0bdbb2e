"""Pure parsers behind the live evidence: GPU health (nvidia-smi -q, kernel Xid lines), the
flight-recorder reader, launch arguments / configuration, and the environment filter."""
from __future__ import annotations

import json
import pickle

import pytest

from rlhealth.probes import live
from rlhealth.probes.parse import flight_recorder as fr
from rlhealth.probes.parse import launch as lp
from rlhealth.probes.parse.nvidia_smi import parse_gpu_health, parse_xid_lines

# nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER: an A100/H100 layout (SRAM/DRAM counters,
# remapped rows) and an older layout (Single/Double Bit > Device Memory, retired pages)
HEALTH = """\
==============NVSMI LOG==============

Timestamp                                 : Mon Nov 30 12:00:00 2026
Driver Version                            : 535.104.05

Attached GPUs                             : 2
GPU 00000000:18:00.0
    ECC Mode
        Current                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 1
            DRAM Correctable              : 3
            DRAM Uncorrectable            : 2
        Aggregate
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 1
            DRAM Correctable              : 5
            DRAM Uncorrectable            : N/A
    Retired Pages
        Single Bit ECC                    : N/A
        Double Bit ECC                    : N/A
        Pending Page Blacklist            : N/A
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 1
        Pending                           : Yes
        Remapping Failure Occurred        : No
        Bank Remap Availability Histogram
            Max                           : 639 bank(s)

GPU 00000000:2A:00.0
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 1
                Total                     : 1
            Double Bit
                Device Memory             : 0
                Total                     : 0
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 4
        Pending Page Blacklist            : No
"""


def test_gpu_health_counters_and_flags_with_lines():
    a, b = parse_gpu_health(HEALTH)
    assert (a["gpu"], a["bus_id"]) == (0, "00000000:18:00.0")
    assert a["ecc_volatile_uncorrectable"] == 3 and a["ecc_volatile_correctable"] == 3
    assert a["ecc_aggregate_uncorrectable"] == 1  # N/A leaves are skipped, not zero
    assert a["remapped_rows_uncorrectable"] == 1 and a["remapped_rows_pending"] is True and a["remapping_failure"] is False
    assert a["retired_pages_double_bit"] is None and a["retired_pages_pending"] is None
    assert HEALTH.splitlines()[a["evidence"]["remapped_rows_pending"][0] - 1].strip().startswith("Pending")
    assert b["ecc_volatile_correctable"] == 1 and b["ecc_volatile_uncorrectable"] == 0  # totals not double counted
    assert b["retired_pages_double_bit"] == 4 and b["retired_pages_pending"] is False


def test_gpu_health_of_garbage_is_empty():
    assert parse_gpu_health("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n") == []
    assert parse_gpu_health("") == []


def test_gpu_health_counter_summing_past_the_float_range_keeps_the_finite_part():
    text = HEALTH.replace("SRAM Correctable              : 0", "SRAM Correctable              : 1e308", 1)
    text = text.replace("DRAM Correctable              : 3", "DRAM Correctable              : 1e308", 1)
    a, _ = parse_gpu_health(text)       # 1e308 + 1e308 is inf: the second leaf is no reading
    assert a["ecc_volatile_correctable"] == int(1e308) and len(a["evidence"]["ecc_volatile_correctable"]) == 1


def test_xid_lines():
    text = ("[Mon Nov 30 11:00:00 2026] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"
            "unrelated\n2026-11-30T12:00:00 kernel: NVRM: Xid (0000:2a:00): 48, An uncorrectable double bit error\n")
    assert [(x["line"], x["pci"], x["xid"]) for x in parse_xid_lines(text)] == [(1, "0000:18:00", 79), (3, "0000:2a:00", 48)]


def _dump(last_done, pending=None, p2p=False):
    entries = [{"record_id": s, "process_group": ("1", "fsdp"), "collective_seq_id": s, "profiling_name": "nccl:all_gather",
                "state": "completed", "is_p2p": False} for s in range(1, last_done + 1)]
    if pending:
        entries.append({"record_id": 99, "process_group": ("1", "fsdp"), "collective_seq_id": last_done + 1,
                        "profiling_name": pending, "state": "started", "is_p2p": False})
    if p2p:
        entries.append({"record_id": 100, "process_group": ("1", "fsdp"), "collective_seq_id": 0, "p2p_seq_id": 1,
                        "profiling_name": "nccl:send", "state": "started", "is_p2p": True})
    return pickle.dumps({"version": "2.4", "entries": entries}, protocol=2)


def test_flight_recorder_summary_names_stuck_and_behind_ranks():
    s = fr.summarize([("d/r0", 0, _dump(5, "nccl:reduce_scatter", p2p=True)), ("d/r1", 1, _dump(5, "nccl:reduce_scatter")),
                      ("d/r2", 2, _dump(4))])
    assert s["stuck"] == [{"process_group": "1:fsdp", "collective": "nccl:reduce_scatter", "seq": 6, "ranks": [0, 1]}]
    assert s["behind"] == [{"process_group": "1:fsdp", "rank": 2, "last_enqueued_seq": 4, "group_highest_seq": 6}]
    assert s["readable_ranks"] == 3


def test_flight_recorder_ids_that_are_no_counts_are_not_read():
    """A sequence number of inf (JSON 1e999), NaN, 5,000 digits or 10**5000 (a pickled int) is no
    number: its entry is skipped, a record id is None, and the summary is still JSON."""
    entry = {"process_group": ("1", "fsdp"), "profiling_name": "nccl:all_gather", "state": "started", "is_p2p": False}
    entries = [dict(entry, collective_seq_id=seq, record_id=1) for seq in (float("inf"), float("nan"), "9" * 5_000, 10 ** 5_000)]
    entries.append(dict(entry, collective_seq_id=3, record_id=10 ** 5_000))
    s = fr.summarize([("d/r0", 0, pickle.dumps({"version": "2.4", "entries": entries}))])
    group = s["ranks"][0]["groups"]["1:fsdp"]
    assert group["last_enqueued_seq"] == 3 and group["first_pending"]["seq"] == 3 and group["first_pending"]["record_id"] is None
    json.dumps(s)


class _Boom:
    def __reduce__(self):
        return (exec, ("raise SystemExit('code ran')",))


@pytest.mark.parametrize("data,why", [
    (b"", "empty"), (b"\x80\x02garbage", "not a readable"), (pickle.dumps([1, 2]), "top level is list"),
    (pickle.dumps({"entries": [_Boom()]}), "refused global"),
])
def test_flight_recorder_reader_refuses_code_and_garbage(data, why):
    doc, error = fr.load_dump(data)
    assert doc is None and why in error


def test_flight_recorder_json_dump_and_rank_names():
    doc, error = fr.load_dump(json.dumps({"version": "2.5", "entries": []}).encode())
    assert error is None and doc["version"] == "2.5"
    assert fr.rank_of("nccl_trace_rank_12", "nccl_trace_rank_") == 12
    assert fr.rank_of("nccl_trace_rank_x", "nccl_trace_rank_") is None


@pytest.mark.parametrize("engines,expected", [(4, 4), ("4", 4), (float("inf"), None), (float("nan"), None),
                                              ("9" * 5_000, None), ("abc", None)],
                         ids=["4", "'4'", "inf", "nan", "5000-digits", "abc"])
def test_launch_placement_needs_every_number_to_be_a_count(engines, expected):
    from rlhealth.probes.capture import JobInfo

    config = {"trainer": {"placement": {"colocate_all": True, "policy_num_gpus_per_node": 8, "policy_num_nodes": 2},
                          "num_inference_engines": engines}, "generator": {"inference_engine_tensor_parallel_size": 2}}
    info, sources = JobInfo(), {}
    live.launch_into(info, sources, config, "config/resolved_config.yaml", [])
    if expected is None:
        assert info.placement is None and "placement" not in sources
    else:
        assert (info.placement.num_inference_engines, info.placement.inference_tp, info.placement.policy_gpus) == (4, 2, 16)


def test_nccl_env_keeps_only_flight_recorder_variables():
    kept, prefix = live.nccl_env(b"PATH=/bin\0AWS_SECRET_ACCESS_KEY=abc\0TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/scratch/fr/t_\0"
                                 b"TORCH_NCCL_TRACE_BUFFER_SIZE=20000\0")
    assert kept == {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/scratch/fr/t_", "TORCH_NCCL_TRACE_BUFFER_SIZE": "20000"}
    assert prefix == "/scratch/fr/t_"
    assert live.nccl_env(b"PATH=/bin\0")[1] == "/tmp/nccl_trace_rank_"
    assert live.nccl_env(b"TORCH_FR_DUMP_TEMP_FILE=/x/fr_\0")[1] == "/x/fr_"


def test_dump_files_from_a_listing():
    entries = [{"name": n, "type": t, "size": 1, "mtime": None} for n, t in
               (("nccl_trace_rank_0", "file"), ("nccl_trace_rank_1", "file"), ("nccl_trace_rank_x", "file"),
                ("nccl_trace_rank_2", "dir"), ("other", "file"))]
    assert live.dump_files(entries, "/tmp/nccl_trace_rank_") == ["/tmp/nccl_trace_rank_0", "/tmp/nccl_trace_rank_1"]


def test_fault_fix_fills_its_context():
    assert live.fault_fix("deadline", deadline="5m").startswith("next action: the probe ran out of --deadline 5m")
    assert "<host>" in live.fault_fix("ssh_unreachable")  # a missing value is visible, never a crash
    with pytest.raises(KeyError):
        live.fault_fix("no_such_fault")


SCRIPT = """#!/bin/bash
#SBATCH -N 2 --gres=gpu:4
# a comment with --max-retries 9
set -u
export MAX_RETRIES=1
srun python -m skyrl_train.entrypoints.main_base \\
    trainer.policy.model.path="Qwen/Qwen3-30B-A3B" \\
    --max-retries=2 'terminal_bench_config.trials_dir=s3://b/t'
"""


def test_launch_arguments_from_a_batch_script():
    args = [(t, line, "s.sh") for line, t in lp.script_args(SCRIPT)]
    tokens = [t for t, _, _ in args]
    assert "#SBATCH" not in " ".join(tokens) and "9" not in tokens
    assert ("trainer.policy.model.path=Qwen/Qwen3-30B-A3B", 6, "s.sh") in args  # continuation keeps its first line
    assert lp.max_retries_from(args) == (1, "s.sh:5")  # the first retry budget in launch order
    assert lp.model_from({}, None, args)["active_params_b"] == 3.0
    assert lp.mode_from(None, None, args)[0] == "agentic"


def test_model_and_mode_from_a_config_first():
    flat = lp.flatten({"trainer": {"policy": {"model": {"path": "meta-llama/Llama-3.1-70B-Instruct"}}}})
    model = lp.model_from(flat, "config/resolved_config.yaml", [("--model", None, "x"), ("Qwen/Qwen3-8B", None, "x")])
    assert model == {"name": "meta-llama/Llama-3.1-70B-Instruct", "total_params_b": 70.0, "active_params_b": 70.0,
                     "source": "config/resolved_config.yaml: trainer.policy.model.path"}
    assert lp.mode_from({"trainer": {"policy": {}}}, "config/resolved_config.yaml", [])[0] == "standard"
    assert lp.mode_from(None, None, []) is None
    assert lp.params_from_name("gpt2") is None and lp.params_from_name("Qwen/Qwen3-235B-A22B") == (235.0, 22.0)


def test_container_args_and_config_paths():
    pod = {"spec": {"containers": [{"name": "task", "command": ["bash", "-c"],
                                    "args": ["python -m x --config /app/run/resolved_config.yaml --max-retries 1"],
                                    "env": [{"name": "IRIS_MAX_RETRIES", "value": "3"}, {"name": "API_KEY", "value": "s3cr3t"}]},
                                   {"name": "sidecar", "args": ["--config=/other.yaml"]}]}}
    tokens = lp.container_args(pod, "task")
    assert tokens[:3] == ["bash", "-c", "python"] and "IRIS_MAX_RETRIES=3" in tokens and "API_KEY=s3cr3t" not in tokens
    assert lp.config_paths(tokens + ["--cfg=/a/b.json", "/a/../etc/x.yaml", "/app/run/resolved_config.yaml"]) == [
        "/app/run/resolved_config.yaml", "/a/b.json"]


def test_parse_config_errors_are_reasons():
    assert lp.parse_config("a: [1,\n", "x.yaml")[0] is None
    assert "not a mapping" in lp.parse_config("[1, 2]", "x.yaml")[1]
    assert lp.parse_config('{"a": 1}', "x.json") == ({"a": 1}, None)
    assert lp.gres_gpus("cpu=8,node=2,gres/gpu:h100=8") == ("h100", 8) and lp.gres_gpus("cpu=8") == (None, None)


def test_flight_recorder_reason_hang_stall_or_neither(tmp_path):
    from datetime import datetime, timezone
    log = tmp_path / "t.log"
    log.write_text("2026-08-01 10:00:00.000 | INFO     | skyrl_train.utils.tracking:log:189 - Step 5: \n"
                   "{'policy/grad_norm': '0.4100',\n 'trainer/global_step': 5}\n")
    t = datetime(2026, 8, 1, 10, 0, tzinfo=timezone.utc).timestamp()
    fresh, measured = live.flight_recorder_reason([(log, "t.log")], t + 600)
    assert fresh is None and "600s old" in measured
    stalled, _ = live.flight_recorder_reason([(log, "t.log")], t + 3 * 3600)
    assert stalled.startswith("newest trainer progress t.log:") and "> trainer_stall_min_s" in stalled
    with open(log, "a") as f:
        f.write("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) "
                "ran for 1800083 milliseconds before timing out.\n")
    hang, _ = live.flight_recorder_reason([(log, "t.log")], t + 600)
    assert hang == "hang signature nccl_collective_timeout at t.log:4"
