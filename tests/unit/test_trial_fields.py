"""The fields read from a parsed result.json (``_from_result``, which with ``_stop_reason`` writes
the paths out for speed) equal what the plain path-walking definition gives, for members of every
JSON type at every level; ``read_trial`` reads the same fields from the written file.

Besides plain values the documents hold a 401-digit integer (only ``json`` parses it), NaN and
infinities, blank and long strings, and objects or arrays where a value is expected.
"""
from __future__ import annotations

import json
import random

import pytest

from rlhealth.probes.parse import trials as T
from rlhealth.probes.parse.timestamps import parse_iso


def _dig(obj, *keys):
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _reference(obj: dict) -> dict:
    """The definition: each field as a walk along its path."""
    reward = _dig(obj, "verifier_result", "rewards", "reward")
    if reward is None:
        reward = _dig(obj, "result", "reward") if isinstance(obj.get("result"), dict) else obj.get("reward")
    reward = T._finite_float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
    exc = _dig(obj, "exception_info", "exception_type") or _dig(obj, "result", "error_type") or None
    exception = str(exc) if exc else None
    turns = _dig(obj, "agent_result", "metadata", "n_episodes")
    turns = T._finite_float(turns) if isinstance(turns, (int, float)) else None
    stop = None
    for path in T.STOP_REASON_FIELDS:
        value = _dig(obj, *path)
        if isinstance(value, str) and value.strip():
            stop = value
            break
    phases = {}
    for phase in T.PHASES:
        block = obj.get(phase)
        a, b = _dig(block, "started_at"), _dig(block, "finished_at")
        if isinstance(block, dict) and isinstance(a, str) and isinstance(b, str) and _offset(a) == _offset(b):
            a, b = parse_iso(a), parse_iso(b)
            if a is not None and b is not None and b >= a:
                phases[phase] = b - a
    started = obj.get("started_at")
    start = parse_iso(started) if isinstance(started, str) else None
    finished = obj.get("finished_at")
    wall, state = None, T.WALL_UNFINISHED
    if finished is not None:
        state = T.WALL_UNTIMED
        end = parse_iso(finished) if isinstance(finished, str) else None
        if isinstance(started, str) and isinstance(finished, str) and _offset(started) == _offset(finished) \
                and start is not None and end is not None and end >= start:
            wall, state = end - start, T.WALL_MEASURED
    return {"reward": reward, "exception": exception, "turns": turns,
            "stop_reason": stop.strip()[:T.STOP_REASON_MAX_CHARS] if stop else None,
            "phases": phases, "started_at": start, "wall_s": wall, "wall_state": state}


def _offset(text: str) -> bool:
    """A time naming its offset; a naive time paired with an aware one has no duration."""
    return any(ch in "Zz+-" for ch in str(text)[11:])


def _outcome(fn, *args):
    """The fields (repr: 1 and 1.0 and True differ) or the exception raised."""
    try:
        return ("value", repr(fn(*args)))
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
        return ("raises", type(exc).__name__, str(exc))


def _fields(obj) -> dict:
    read = T.TrialRead(name="t", completed=True)
    T._from_result(read, obj)
    return _read_fields(read)


def _read_fields(read: T.TrialRead) -> dict:
    return {"reward": read.reward, "exception": read.exception, "turns": read.turns, "stop_reason": read.stop_reason,
            "phases": read.phases, "started_at": read.started_at, "wall_s": read.wall_s, "wall_state": read.wall_state}


_HUGE = json.loads("[1" + "0" * 400 + "]")[0]          # what loads_json returns: orjson refuses it
_LONG = "x" * 79 + "\u00e9yz" + " " * 3
_LEAVES = [None, 0, 1, 2.5, -1.0, float("nan"), float("inf"), float("-inf"), True, False, "", "  ", "\u2003\u3000",
           "ValueError", " max_turns ", "\u2003timeout\u3000", _LONG, [], [1], {}]
_TIMES = ["2026-08-01T12:00:00Z", "2026-08-01T12:00:05.250Z", "2026-08-01 11:59:59", "2026-08-01T14:00:00+02:00",
          "2026-08-01T12:00:00.000Z ", "2026-13-45T99:00:00Z", "2026-08-01T12:00:00Zjunk", "not a time", "2026-08-01",
          "\u2003"]
_TIME = "time"
_PHASE = {"started_at": _TIME, "finished_at": _TIME}
_SHAPE = {"verifier_result": {"rewards": {"reward": None}}, "result": {"reward": None, "error_type": None},
          "reward": None, "exception_info": {"exception_type": None},
          "agent_result": {"metadata": {"n_episodes": None, "stop_reason": None, "finish_reason": None,
                                        "exit_reason": None, "termination_reason": None}, "stop_reason": None},
          "stop_reason": None, "failure_mode": None, "started_at": _TIME, "finished_at": _TIME, **{p: _PHASE for p in T.PHASES}}


def _leaf(rng: random.Random, sub, huge: bool):
    if sub == _TIME and rng.random() < 0.7:
        return rng.choice(_TIMES)
    if huge and rng.random() < 0.15:
        return _HUGE
    return rng.choice(_LEAVES)


def _random_doc(rng: random.Random, shape: dict, huge: bool = False) -> dict:
    doc = {}
    for key, sub in shape.items():
        roll = rng.random()
        if roll < 0.2:
            continue                                    # missing
        if isinstance(sub, dict) and roll < 0.8:
            doc[key] = _random_doc(rng, sub, huge)
        else:
            doc[key] = _leaf(rng, sub, huge)            # a leaf where an object may be expected
    return doc


@pytest.mark.parametrize("seed", range(600))
def test_fields_equal_the_path_walk(seed):
    """JSON documents (what orjson and json produce), integers past the float range included."""
    doc = _random_doc(random.Random(seed), _SHAPE, huge=seed % 2 == 1)
    assert _outcome(_fields, doc) == _outcome(_reference, doc), doc


def test_the_documents_reach_every_case():
    """The generated documents hold what the tests claim (so the comparisons above can fail)."""
    seen = {"huge_int": 0, "reward": 0, "bool_reward": 0, "exception": 0, "turns": 0, "stop": 0,
            "phase": 0, "finished_before_started": 0, "garbled_time": 0, "started_at": 0}
    for seed in range(600):
        doc = _random_doc(random.Random(seed), _SHAPE, huge=seed % 2 == 1)
        for value in (_dig(doc, "verifier_result", "rewards", "reward"), _dig(doc, "agent_result", "metadata", "n_episodes")):
            seen["huge_int"] += type(value) is int and abs(value) > 2 ** 1024
        ref = _reference(doc)
        seen["reward"] += ref["reward"] is not None
        seen["bool_reward"] += isinstance(_dig(doc, "verifier_result", "rewards", "reward"), bool)
        seen["exception"] += ref["exception"] is not None
        seen["turns"] += ref["turns"] is not None
        seen["stop"] += ref["stop_reason"] is not None
        seen["phase"] += bool(ref["phases"])
        seen["started_at"] += ref["started_at"] is not None
        for phase in T.PHASES:
            a, b = _dig(doc, phase, "started_at"), _dig(doc, phase, "finished_at")
            if isinstance(a, str) and isinstance(b, str):
                pa, pb = parse_iso(a), parse_iso(b)
                seen["garbled_time"] += pa is None or pb is None
                seen["finished_before_started"] += pa is not None and pb is not None and pb < pa
    assert all(count >= 5 for count in seen.values()), seen


def test_a_huge_integer_is_no_number(tmp_path):
    """A 401-digit integer (parsed by ``json``: orjson refuses it) as the reward or the turns:
    float() raises OverflowError; no value is read, and the trial still counts."""
    doc = T.loads_json(b'{"verifier_result": {"rewards": {"reward": 1' + b"0" * 400 + b'}}, '
                       b'"agent_result": {"metadata": {"n_episodes": 9' + b"9" * 400 + b'}}}')
    assert isinstance(doc["verifier_result"]["rewards"]["reward"], int)
    assert _outcome(_fields, doc) == _outcome(_reference, doc)
    assert _reference(doc)["reward"] is None and _reference(doc)["turns"] is None
    trial = tmp_path / "trace_jobs" / "t-0"
    trial.mkdir(parents=True)
    (trial / "result.json").write_bytes(b'{"verifier_result": {"rewards": {"reward": 1' + b"0" * 400 + b"}}}")
    summary = T.summarize_trials(tmp_path / "trace_jobs", {}, 5, workers=1)
    assert summary.completed == 1 and list(summary.rewards) == []


def test_read_trial_reads_the_fields_of_the_written_file(tmp_path):
    """``read_trial`` on result.json files written from generated documents gives the path walk's
    fields of what the file parses to."""
    rng = random.Random(20_000)
    expected, got = [], []
    for i in range(200):
        doc = _random_doc(rng, _SHAPE, huge=True)
        if rng.random() < 0.1:
            doc["reward"] = rng.choice((_HUGE, 1, None))
        data = json.dumps(doc).encode()
        (tmp_path / f"t{i}").mkdir()
        (tmp_path / f"t{i}" / "result.json").write_bytes(data)
        expected.append(_reference(T.loads_json(data)))
        got.append(_read_fields(T.read_trial(str(tmp_path).encode(), f"t{i}".encode(), {})))
    assert got == expected
    assert sum(e["reward"] is not None for e in expected) > 20 and sum(e["stop_reason"] is not None for e in expected) > 20 \
        and sum(bool(e["phases"]) for e in expected) > 20
