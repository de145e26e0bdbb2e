"""The fields read from a parsed result.json equal what the plain path-walking definition gives,
for members of every JSON type at every level (``_from_result`` and ``_stop_reason`` write the
paths out for speed)."""
from __future__ import annotations

import random

import pytest

from rlhealth.probes.parse import trials as T


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
    exc = _dig(obj, "exception_info", "exception_type") or _dig(obj, "result", "error_type") or None
    turns = _dig(obj, "agent_result", "metadata", "n_episodes")
    stop = None
    for path in T.STOP_REASON_FIELDS:
        value = _dig(obj, *path)
        if isinstance(value, str) and value.strip():
            stop = value
            break
    return {"reward": T._finite(float(reward)) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None,
            "exception": str(exc) if exc else None,
            "turns": T._finite(float(turns)) if isinstance(turns, (int, float)) else None,
            "stop_reason": stop.strip()[:T.STOP_REASON_MAX_CHARS] if stop else None}


_LEAVES = [None, 0, 1, 2.5, -1.0, float("nan"), True, False, "", "  ", "ValueError", " max_turns ", [], [1], {}]
_SHAPE = {"verifier_result": {"rewards": {"reward": None}}, "result": {"reward": None, "error_type": None},
          "reward": None, "exception_info": {"exception_type": None},
          "agent_result": {"metadata": {"n_episodes": None, "stop_reason": None, "finish_reason": None,
                                        "exit_reason": None, "termination_reason": None}, "stop_reason": None},
          "stop_reason": None, "failure_mode": None}


def _random_doc(rng: random.Random, shape: dict) -> dict:
    doc = {}
    for key, sub in shape.items():
        roll = rng.random()
        if roll < 0.2:
            continue                                    # missing
        if isinstance(sub, dict) and roll < 0.8:
            doc[key] = _random_doc(rng, sub)
        else:
            doc[key] = rng.choice(_LEAVES)              # a leaf where an object may be expected
    return doc


@pytest.mark.parametrize("seed", range(300))
def test_fields_equal_the_path_walk(seed):
    doc = _random_doc(random.Random(seed), _SHAPE)
    read = T.TrialRead(name="t", completed=True)
    T._from_result(read, doc)
    got = {"reward": read.reward, "exception": read.exception, "turns": read.turns, "stop_reason": read.stop_reason}
    assert got == _reference(doc), doc
