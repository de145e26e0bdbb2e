"""Records that state their own severity (rules/event_shapes.yaml): which lines are events, how
they are graded, and which error-looking lines stay no event (an ERROR line is not a failure by
itself)."""
from __future__ import annotations

from rlhealth.probes.events import EventLog, read_events


def one(line: str):
    events = read_events([line])
    assert len(events) == 1, events
    return events[0]


def none(line: str) -> None:
    assert read_events([line]) == [], line


def test_an_error_log_line_without_an_exception_is_no_event():
    none("2026-05-12 08:01:39,331 - trainer - ERROR - An error occurred during score calculation: task failed")
    none("ERROR 05-12 08:01:39 [core.py:502] EngineCore encountered a fatal error.")
    none("2026-05-12 08:01:39.331 | ERROR    | mod:fn:12 - something went wrong")


def test_c10d_headers_are_graded_by_the_source_file_and_level():
    e = one("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout")
    assert (e.kind, e.grade, e.exc_type, e.process) == ("comm_error", "primary", "ERROR ProcessGroupNCCL.cpp", "rank1")
    e = one("[rank2]:[W729 10:15:17.529377834 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76): Connection reset by peer")
    assert (e.kind, e.grade) == ("logged_error", "consequence")
    # a warning of the process group, an error of a file no entry names: no event
    none("[rank0]:[W1229 22:06:38.480071392 ProcessGroupNCCL.cpp:4115] using GPU 0 to perform barrier as devices used are unknown")
    none("[E0801 12:00:00.123456 42 some_module.cpp:12] something odd")
    none("[I0801 12:00:00.123456 42 TCPStore.cpp:12] connected")


def test_ray_core_headers():
    e = one("(raylet) [2023-07-23 15:21:29,851 E 9751 9751] (raylet) node_manager.cc:3084: 4 Workers killed due to memory pressure (OOM)")
    assert (e.kind, e.grade, e.exc_type) == ("logged_error", "consequence", "ERROR node_manager.cc")
    none("[2024-02-27 18:08:15,441 E 73667 73667] logging.cc:361: PC: @     0x7f75332ba350  (unknown)  (unknown)")
    none("[2024-02-27 18:08:15,441 I 73667 73667] node_manager.cc:361: started")
    e = one("[2021-10-25 02:52:12,862 C 95217 1100846] direct_task_transport.cc:591: IOError: 14: Connection reset by peer")
    assert (e.kind, e.grade) == ("fatal_log", "primary")


def test_kernel_records_need_a_kernel_prefix_or_the_driver_tag():
    e = one("May 15 23:09:30 host kernel: [  518.050606] Out of memory: Killed process 15784 (python3) total-vm:11964kB")
    assert (e.kind, e.grade, e.process) == ("kernel_record", "primary", "kernel")
    assert one("[ 4018.450000] Killed process 935 (python) total-vm:113656kB").kind == "kernel_record"
    none("Killed process 935 (python) as requested")                  # not the kernel's record
    none("May 15 23:09:30 host kernel: [  518.053407] usb 1-1: new high-speed USB device")
    assert one("               NVRM: fallen off the bus and is not responding to commands.").kind == "kernel_record"


def test_kubernetes_reasons():
    e = one("  Warning  BackOff    4m53s (x72 over 20m)  kubelet            Back-off restarting failed container manager")
    assert (e.kind, e.grade, e.exc_type) == ("k8s_event", "consequence", "k8s BackOff")
    assert one("      Reason:       OOMKilled").grade == "primary"
    none("  Normal   Pulled     18m (x5 over 20m)     kubelet            Container image already present on machine")
    none("  Warning  FailedScheduling  1m  default-scheduler  0/3 nodes are available")   # a reason no grade names
    none("      Reason:       Completed")
    # the event's reason is its severity, also in a record logged at INFO
    e = one("I0712 15:54:56.488170 5711 dump.go:53] At 2024-07-12 15:49:58 +0000 UTC - event for pod-a: {kubelet n1} "
            "Evicted: The node was low on resource: memory.")
    assert (e.exc_type, e.grade) == ("k8s Evicted", "primary")


def test_ray_exit_types_and_slurm_banners():
    e = one("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits")
    assert (e.kind, e.grade) == ("ray_exit", "primary")
    none("The actor is dead because its worker process has died. Worker exit type: INTENDED_USER_EXIT Worker exit detail: exit_actor()")
    none("2026-05-12 08:01:39,331 INFO worker.py:12 -- Worker exit type: SYSTEM_ERROR Worker exit detail: logged as info")
    e = one("slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***")
    assert (e.kind, e.grade, e.process) == ("slurm", "consequence", "slurmstepd")
    none("the docs say: *** JOB 1 CANCELLED AT 2018-08-06T17:21:44 *** means a cancellation")


def test_an_error_record_before_an_exception_of_its_process_is_its_headline():
    lines = ["(EngineCore_DP0 pid=413) ERROR 08-01 13:25:57 [core.py:710] EngineCore encountered a fatal error.",
             "(EngineCore_DP0 pid=413) ERROR 08-01 13:25:57 [core.py:711] TimeoutError: RPC call to sample_tokens timed out."]
    events = read_events(lines)
    assert len(events) == 1 and (events[0].first_line, events[0].line, events[0].exc_type) == (1, 2, "TimeoutError")
    tb = ["2026-05-12 08:01:39,331 - trainer - ERROR - training step failed",
          "Traceback (most recent call last):",
          '  File "x.py", line 1, in <module>',
          "mylib.WeirdError: it broke"]
    events = read_events(tb)
    assert len(events) == 1 and (events[0].first_line, events[0].line) == (1, 4)
    # another process's error record is not the headline; an INFO record is not either
    other = ["(A pid=1) ERROR 08-01 13:25:57 [core.py:710] EngineCore encountered a fatal error.",
             "(B pid=2) TimeoutError: RPC call to sample_tokens timed out."]
    assert [e.first_line for e in read_events(other)] == [2]
    info = ["2026-05-12 08:01:39,331 - trainer - INFO - step 3 done"] + tb[1:]
    assert [e.first_line for e in read_events(info)] == [2]


def test_an_undated_event_before_a_dated_one_in_its_file_comes_first():
    lines = ["(SignalActor pid=68921) *** SIGSEGV received at time=1711519153 ***",
             "(SignalActor pid=68921) [2024-03-27 05:59:13,522 E 68921 11532727] logging.cc:365: *** SIGSEGV received at time=1711519153 ***"]
    events = read_events(lines)
    assert [e.ts is None for e in events] == [True, False]
    log = EventLog()
    for e in events:
        e.attempt = 1
        log.add(e)
    assert log.first(1).line == 1


def test_an_exit_status_is_read_whatever_verb_form_states_it():
    """A process that "exited with code N" (docker compose, a supervisor, a launcher) is the same
    exit status as "exit code N": the line is read, the status and its signal named."""
    e = one("svc-1 exited with code 137")
    assert (e.kind, e.exit_status, e.signal, e.grade) == ("exit_status", 137, "SIGKILL", "consequence")
    e = one("2026-05-12T08:01:39Z worker process exited with status 1")
    assert (e.kind, e.exit_status, e.signal, e.grade) == ("exit_status", 1, None, "consequence")
    e = one("child process exited with code -6")
    assert (e.kind, e.exit_status, e.signal, e.grade) == ("exit_status", -6, "SIGABRT", "primary")
    none("svc-1 exited with code 0")


def test_the_scan_database_keys_every_verb_form_of_an_exit_status(tmp_path):
    """The bundle reader's hyperscan parts key the same exit lines as the written trigger."""
    from rlhealth.diagnose import load_catalog
    from rlhealth.probes.bundle import scanner_for

    lines = ["svc-1 exited with code 137", "Process exited with status 1", "worker exited with exit code 2",
             "exit code 1", "exitcode: -6", "all tasks finished"]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    hits = []
    scanner_for(load_catalog()).scan_file(path, "x.log", hits.append)
    assert [h.lineno for h in hits if "x_event" in h.keys] == [1, 2, 3, 4, 5]


def test_a_gpu_runtime_error_statement_alone_is_an_event_whatever_the_error():
    """The CUDA runtime's, cuDNN's and c10d's NCCL check's statement of an error is a primary event
    of shape runtime_error when no exception type on the line states it first; with one, the line
    is that exception; logged below error it is handled; under a severity header of a graded file
    (c10d's process group) the grade decides, under any other header it is read as it is."""
    e = one("(FSDPPolicyWorker pid=5120, ip=10.0.5.13) CUDA error: an illegal memory access was encountered")
    assert (e.kind, e.exc_type, e.message, e.grade, e.role) == (
        "runtime_error", "CUDA error", "an illegal memory access was encountered", "primary", "policy")
    e = one("ERROR 05-12 08:01:39 [core.py:502] CUDA error: device-side assert triggered")
    assert (e.kind, e.exc_type, e.message) == ("runtime_error", "CUDA error", "device-side assert triggered")
    e = one("NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error, NCCL version 2.14.3")
    assert (e.kind, e.exc_type, e.grade) == ("runtime_error", "NCCL error", "primary")
    assert e.message.startswith("../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error")
    e = one("Collective WorkNCCL(SeqNum=2, OpType=ALLREDUCE) raised the following async exception: NCCL error: "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.25.1")
    assert (e.kind, e.exc_type) == ("runtime_error", "NCCL error")
    assert e.message.startswith("unhandled system error")
    e = one("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")
    assert (e.kind, e.exc_type, e.message) == ("runtime_error", "cuDNN error", "CUDNN_STATUS_INTERNAL_ERROR")
    e = one("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert (e.kind, e.exc_type) == ("exception", "RuntimeError")
    e = one("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] NCCL error in: a.cpp:12, unhandled system error")
    assert (e.kind, e.exc_type) == ("comm_error", "ERROR ProcessGroupNCCL.cpp")
    e = one("[E0801 12:00:00.123456 42 some_module.cpp:12] CUDA error: out of memory")
    assert (e.kind, e.exc_type, e.message) == ("runtime_error", "CUDA error", "out of memory")
    none("2026-05-12 08:01:39,331 - trainer - WARNING - retrying after CUDA error: out of memory")
    none("[W0801 12:00:00.123456 42 some_module.cpp:12] CUDA error: out of memory")
    none("CUDA error:")      # a statement without its error
    # only the trigger's forms: a line keyed by its severity header reads as it would bare
    none("CUDA error in: a.cu:12")
    none("[E0801 12:00:00.123456 42 some_module.cpp:12] CUDA error in: a.cu:12")
    none("no CUDA errors seen")


def test_the_scan_database_keys_gpu_runtime_error_statements(tmp_path):
    """The bundle reader's hyperscan parts key the runtime error statements the event layer reads."""
    from rlhealth.diagnose import load_catalog
    from rlhealth.probes.bundle import scanner_for

    lines = ["CUDA error: an illegal memory access was encountered", "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
             "NCCL error in: a.cpp:12, invalid usage", "no CUDA errors seen", "NCCL INFO Bootstrap : Using eth0",
             "raised the following async exception: NCCL error: unhandled system error"]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    hits = []
    scanner_for(load_catalog()).scan_file(path, "x.log", hits.append)
    assert [h.lineno for h in hits if "x_event" in h.keys] == [1, 2, 3, 6]
