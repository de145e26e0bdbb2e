"""NCCL flight-recorder dumps shaped as PyTorch writes them (``pg_config`` with its ``ranks``
string, ``pg_status`` with the last enqueued / started / completed sequence numbers, ring-buffer
``entries``), for jobs whose faulty ranks are known by construction."""
from __future__ import annotations

import pickle


def dump(rank: int, world: int, *, done: int, stuck: int | None, state: str | None = "started",
         collective: str = "nccl:all_reduce", pg_name: str = "0", desc: str = "default_pg",
         buffer: int = 20, version: str = "2.5") -> bytes:
    """One rank's dump: collectives ``1..done`` completed; then collective ``stuck`` in ``state``
    (``None``: this rank never enqueued it). Only the newest ``buffer`` entries stay in the ring."""
    entries = []
    for seq in range(1, done + 1):
        entries.append({"record_id": seq - 1, "pg_id": 0, "process_group": (pg_name, desc), "collective_seq_id": seq,
                        "p2p_seq_id": 0, "op_id": seq, "profiling_name": collective, "time_created_ns": seq * 10**9,
                        "input_sizes": [[1024]], "output_sizes": [[1024]], "state": "completed", "is_p2p": False,
                        "retired": True, "timeout_ms": 600000, "frames": []})
    enqueued = done
    if stuck is not None and state is not None:
        entries.append({"record_id": done, "pg_id": 0, "process_group": (pg_name, desc), "collective_seq_id": stuck,
                        "p2p_seq_id": 0, "op_id": stuck, "profiling_name": collective, "time_created_ns": stuck * 10**9,
                        "input_sizes": [[1024]], "output_sizes": [[1024]], "state": state, "is_p2p": False,
                        "retired": False, "timeout_ms": 600000, "frames": []})
        enqueued = stuck
    doc = {"version": version, "rank": rank,
           "pg_config": {pg_name: {"name": pg_name, "desc": desc, "ranks": str(list(range(world)))}},
           "pg_status": {"0": {"last_enqueued_collective": enqueued,
                               "last_started_collective": stuck if state in ("started", "completed") else done,
                               "last_completed_collective": done}},
           "entries": entries[-buffer:]}
    return pickle.dumps(doc, protocol=2)


def job(world: int, *, done: int, lagging=(), absent=(), collective: str = "nccl:all_reduce") -> dict[int, bytes]:
    """Every rank's dump of a job stuck in collective ``done + 1``: ``lagging`` ranks enqueued it
    but their GPU work never started (``scheduled``), ``absent`` ranks never enqueued it (a host
    stall), every other rank started it and waits."""
    out = {}
    for r in range(world):
        if r in absent:
            out[r] = dump(r, world, done=done, stuck=None, collective=collective)
        else:
            out[r] = dump(r, world, done=done, stuck=done + 1, state="scheduled" if r in lagging else "started",
                          collective=collective)
    return out
