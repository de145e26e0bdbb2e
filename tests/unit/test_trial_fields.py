"""The fields read from a parsed result.json equal what the plain path-walking definition gives,
for members of every JSON type at every level, with both engines: the C ``result_fields``
(probes/parse/_fileread.c) and the Python body of ``_from_result`` (which, with ``_stop_reason``,
writes the paths out for speed).

Besides what JSON parsers produce (plain dicts, a 401-digit integer that only ``json`` parses,
NaN and infinities), the documents hold objects only Python code makes, so that each operation
the C code does is shown to be the one Python does: dict subclasses and a non-dict posing as a
dict (``__class__``) with their own ``get``, an int subclass with its own ``__float__``, a str
subclass with its own ``strip``, an object whose truth test raises, and parsers returning
non-floats or raising.
"""
from __future__ import annotations

import json
import random
from decimal import Decimal

import pytest

from rlhealth.probes.parse import _fileread     # built by every install: its absence fails here
from rlhealth.probes.parse import trials as T
from rlhealth.probes.parse.timestamps import parse_iso

ENGINES = ("c", "python")


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


def _engine_fields(engine: str, monkeypatch, obj) -> dict:
    monkeypatch.setattr(T, "FILE_READER", engine)
    read = T.TrialRead(name="t", completed=True)
    T._from_result(read, obj)
    return {"reward": read.reward, "exception": read.exception, "turns": read.turns, "stop_reason": read.stop_reason,
            "phases": read.phases, "started_at": read.started_at, "wall_s": read.wall_s, "wall_state": read.wall_state}


# ---------------------------------------------------------------- objects JSON never makes
class _LoudGet(dict):
    """A dict subclass whose ``get`` answers for missing keys (both engines must call it)."""

    def get(self, key, default=None):
        return dict.get(self, key, f"loud {key}")


class _PlainSub(dict):
    """A dict subclass that keeps dict.get."""


class _PosingDict:
    """Not a dict, but ``isinstance(x, dict)`` says it is (its ``__class__``)."""

    def __init__(self, inner):
        self.inner = inner

    @property
    def __class__(self):
        return dict

    def get(self, key, default=None):
        return self.inner.get(key, default)

    def __repr__(self):
        return f"_PosingDict({self.inner!r})"


class _Int(int):
    def __float__(self):
        return 7.5


class _Str(str):
    def strip(self):
        return _Str("s:" + str.strip(self))


class _NoTruth:
    def __bool__(self):
        raise ValueError("no truth value")

    def __repr__(self):
        return "_NoTruth()"


class _Later:
    """A time whose ``>=`` answers with an object whose truth test raises."""

    def __ge__(self, other):
        return _NoTruth()

    def __repr__(self):
        return "_Later()"


class _Opaque:
    """No order, no arithmetic."""

    def __repr__(self):
        return "_Opaque()"


class _NeverLater:
    """A time never at or after another, itself included (``b >= a`` is False even for ``a is b``)."""

    def __ge__(self, other):
        return False

    def __sub__(self, other):
        return 0.0

    def __repr__(self):
        return "_NeverLater()"


_NEVER = _NeverLater()
_NAN = float("nan")
_HUGE = json.loads("[1" + "0" * 400 + "]")[0]          # what loads_json returns: orjson refuses it
_LONG = "x" * 79 + "\u00e9yz" + " " * 3
_LEAVES = [None, 0, 1, 2.5, -1.0, float("nan"), float("inf"), float("-inf"), True, False, "", "  ", "\u2003\u3000",
           "ValueError", " max_turns ", "\u2003timeout\u3000", _LONG, [], [1], {}]
_ODD_LEAVES = [_HUGE, _Int(3), _Str("  agent_timeout "), _Str(""), _NoTruth(), Decimal("1.5")]
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


def _leaf(rng: random.Random, sub, odd: bool):
    if sub == _TIME and rng.random() < 0.7:
        return rng.choice(_TIMES)
    if odd and rng.random() < 0.1:
        return rng.choice(_ODD_LEAVES)
    return rng.choice(_LEAVES)


def _random_doc(rng: random.Random, shape: dict, odd: bool) -> dict:
    doc = {}
    for key, sub in shape.items():
        roll = rng.random()
        if roll < 0.2:
            continue                                    # missing
        if isinstance(sub, dict) and roll < 0.8:
            doc[key] = _random_doc(rng, sub, odd)
            if odd and rng.random() < 0.15:             # the same members in an object JSON never makes
                doc[key] = rng.choice((_LoudGet, _PlainSub, _PosingDict))(doc[key])
        else:
            doc[key] = _leaf(rng, sub, odd)             # a leaf where an object may be expected
    return doc


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", range(300))
def test_fields_equal_the_path_walk(engine, seed, monkeypatch):
    """Plain JSON documents (what orjson and json produce)."""
    doc = _random_doc(random.Random(seed), _SHAPE, odd=False)
    assert _outcome(_engine_fields, engine, monkeypatch, doc) == _outcome(_reference, doc), doc


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", range(300))
def test_fields_equal_the_path_walk_with_odd_objects(engine, seed, monkeypatch):
    """Documents with huge integers and objects JSON never makes, at every level (a top-level
    dict subclass included: the C engine leaves it to the Python body)."""
    rng = random.Random(10_000 + seed)
    doc = _random_doc(rng, _SHAPE, odd=True)
    if rng.random() < 0.1:
        doc = rng.choice((_LoudGet, _PlainSub))(doc)
    assert _outcome(_engine_fields, engine, monkeypatch, doc) == _outcome(_reference, doc), doc


def test_the_documents_reach_every_case():
    """The generated documents hold what the tests claim (so the comparisons above can fail)."""
    seen = {"huge_int": 0, "reward": 0, "bool_reward": 0, "exception": 0, "turns": 0, "stop": 0,
            "phase": 0, "finished_before_started": 0, "garbled_time": 0, "started_at": 0, "odd_raises": 0}
    for seed in range(300):
        for odd in (False, True):
            doc = _random_doc(random.Random(seed if not odd else 10_000 + seed), _SHAPE, odd)
            outcome = _outcome(_reference, doc)
            for value in (_dig(doc, "verifier_result", "rewards", "reward"), _dig(doc, "agent_result", "metadata", "n_episodes")):
                seen["huge_int"] += type(value) is int and abs(value) > 2 ** 1024
            if outcome[0] == "raises":
                seen["odd_raises"] += 1
                continue
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


def test_a_huge_integer_is_no_number(monkeypatch, tmp_path):
    """A 401-digit integer (parsed by ``json``: orjson refuses it) as the reward or the turns:
    float() raises OverflowError; both engines read no value, and the trial still counts."""
    doc = T.loads_json(b'{"verifier_result": {"rewards": {"reward": 1' + b"0" * 400 + b'}}, '
                       b'"agent_result": {"metadata": {"n_episodes": 9' + b"9" * 400 + b'}}}')
    assert isinstance(doc["verifier_result"]["rewards"]["reward"], int)
    outcomes = {engine: _outcome(_engine_fields, engine, monkeypatch, doc) for engine in ENGINES}
    assert outcomes["c"] == outcomes["python"] == _outcome(_reference, doc)
    assert _reference(doc)["reward"] is None and _reference(doc)["turns"] is None
    trial = tmp_path / "trace_jobs" / "t-0"
    trial.mkdir(parents=True)
    (trial / "result.json").write_bytes(b'{"verifier_result": {"rewards": {"reward": 1' + b"0" * 400 + b"}}}")
    summary = T.summarize_trials(tmp_path / "trace_jobs", {}, 5, workers=1)
    assert summary.completed == 1 and list(summary.rewards) == []


@pytest.mark.parametrize("parse", [
    lambda s: len(s),                                    # ints
    lambda s: Decimal(len(s)),                           # a number type with its own >= and -
    lambda s: None if "Z" in s else 1.0,
    lambda s: float("nan"),
    lambda s: _NAN,                                      # the same NaN object: b >= a is still False
    lambda s: _NEVER,                                    # the same object: b >= a is still False
    lambda s: [len(s)],                                  # >= works, - raises TypeError
    lambda s: _Opaque(),                                 # >= raises TypeError
    lambda s: _Later(),                                  # the truth of b >= a raises
], ids=["int", "decimal", "none", "nan", "same-nan", "same-never", "list", "object", "no-truth"])
def test_any_parser_is_called_as_python_calls_it(parse, monkeypatch):
    """The C engine calls the parser it is given and combines what it returns as Python does."""
    calls = {engine: [] for engine in ENGINES}
    docs = [_random_doc(random.Random(seed), _SHAPE, odd=False) for seed in range(60)]
    outcomes = {}
    for engine in ENGINES:
        def recorded(s, engine=engine):
            calls[engine].append(s)
            return parse(s)
        monkeypatch.setattr(T, "_parse_iso_recent", recorded)
        outcomes[engine] = [_outcome(_engine_fields, engine, monkeypatch, doc) for doc in docs]
    assert outcomes["c"] == outcomes["python"]
    assert calls["c"] == calls["python"] and calls["c"]


def test_c_leaves_a_top_level_non_dict_to_python():
    args = (T.PHASES, T._STOP_REASON_GROUPS, T.STOP_REASON_MAX_CHARS, parse_iso)
    assert _fileread.result_fields(_LoudGet(reward=1.0), *args) is None
    assert _fileread.result_fields({"reward": 1}, *args) == (1.0, None, None, None, {}, None)


def test_read_trial_is_the_same_with_both_engines(tmp_path, monkeypatch):
    """``read_trial`` (which passes the C fields to TrialRead positionally) reads result.json files
    written from generated documents as the Python engine does."""
    rng = random.Random(20_000)
    names = []
    for i in range(200):
        doc = _random_doc(rng, _SHAPE, odd=False)
        if rng.random() < 0.1:
            doc["reward"] = rng.choice((_HUGE, 1, None))
        (tmp_path / f"t{i}").mkdir()
        (tmp_path / f"t{i}" / "result.json").write_text(json.dumps(doc))
        names.append(f"t{i}".encode())
    root = str(tmp_path).encode()
    got = {}
    for engine in ENGINES:
        monkeypatch.setattr(T, "FILE_READER", engine)
        got[engine] = [_outcome(T.read_trial, root, name, {}) for name in names]
    assert got["c"] == got["python"]
    values = [outcome[1] for outcome in got["c"] if outcome[0] == "value"]
    assert len(values) == len(names) and sum("reward=None" not in v for v in values) > 20 \
        and sum("stop_reason=None" not in v for v in values) > 20 and sum("phases={}" not in v for v in values) > 20
