"""Per-process-group attribution of NCCL flight-recorder dumps whose faulty ranks are known by
construction (tests/incidents/_fr.py writes them as PyTorch does)."""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

from rlhealth.probes.parse import flight_recorder as fr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "incidents"))
import _fr  # noqa: E402


def _summary(dumps: dict[int, bytes], node=lambda r: f"node-{r // 8}"):
    return fr.summarize([(f"flight_recorder/dumps/{node(r)}/nccl_trace_rank_{r}", r, data) for r, data in dumps.items()])


def test_a_rank_that_enqueued_but_never_started_is_lagging():
    s = _summary(_fr.job(16, done=40, lagging={5}))
    (g,) = s["groups"]
    assert (g["collective"], g["seq"], g["members"]) == ("nccl:all_reduce", 41, list(range(16)))
    assert g["lagging"] == [5] and g["absent"] == [] and g["in_collective"] == list(range(16))
    assert s["suspected"] == [5] and g["suspected_nodes"] == {"5": "node-0"}
    assert s["behind"] == []        # it enqueued as far as everyone: the sequence numbers alone never name it


def test_a_rank_that_never_enqueued_is_absent_from_the_collective():
    s = _summary(_fr.job(16, done=40, absent={11}))
    (g,) = s["groups"]
    assert g["absent"] == [11] and g["lagging"] == [] and 11 not in g["in_collective"]
    assert s["suspected"] == [11] and g["suspected_nodes"] == {"11": "node-1"}


def test_both_kinds_at_once_name_exactly_the_two_faulty_ranks():
    assert _summary(_fr.job(16, done=40, lagging={5}, absent={11}))["suspected"] == [5, 11]


def test_every_member_in_the_same_state_names_no_rank():
    s = _summary(_fr.job(16, done=40))
    assert s["groups"][0]["suspected"] == [] and s["suspected"] == []


def test_an_absent_member_that_wrote_no_entry_is_known_from_pg_config():
    """Rank 3's ring buffer holds no entry of the group at all; pg_config still lists it as a
    member and pg_status says it enqueued only up to 40."""
    dumps = _fr.job(4, done=40, absent={3})
    doc = pickle.loads(dumps[3])
    doc["entries"] = []
    dumps[3] = pickle.dumps(doc)
    (g,) = _summary(dumps)["groups"]
    assert g["members"] == [0, 1, 2, 3] and g["members_from"] == "pg_config" and g["absent"] == [3]


def test_a_member_without_a_dump_is_undecided_not_suspected():
    dumps = _fr.job(4, done=40)
    del dumps[2]
    (g,) = _summary(dumps)["groups"]
    assert g["no_dump"] == [2] and g["suspected"] == []


def test_pg_config_ranks_that_are_no_counts_are_not_members():
    doc = pickle.loads(_fr.dump(0, 2, done=3, stuck=4))
    doc["pg_config"]["0"]["ranks"] = "[0, __import__('os')]"
    (g,) = fr.summarize([("d/r0", 0, pickle.dumps(doc))])["groups"]
    assert g["members_from"] == "entries" and g["members"] == [0]
