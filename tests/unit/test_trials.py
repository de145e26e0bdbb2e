"""Trial artifacts (trace_jobs/): hostile files never crash a read nor lose the other trials; the
streamed aggregates equal the plain computations; memory per trial stays a few numbers."""
from __future__ import annotations

import json
import math
import os
import random
import statistics
import tracemalloc
from dataclasses import asdict
from pathlib import Path

import pytest

from rlhealth.probes.parse import trials as T

GOOD_REWARDS = (1.0, 0.0, 1.0, 0.5)


def _result(reward, exc=None, t0="2026-08-01T12:00:00.000Z", episodes=7) -> dict:
    return {"started_at": t0, "finished_at": "2026-08-01T12:10:00.000Z",
            "verifier_result": {"rewards": {"reward": reward}},
            "exception_info": {"exception_type": exc} if exc else None,
            "agent_result": {"metadata": {"n_episodes": episodes}},
            "environment_setup": {"started_at": t0, "finished_at": "2026-08-01T12:00:21.500Z"},
            "agent_execution": {"started_at": "2026-08-01T12:00:30Z", "finished_at": "2026-08-01T12:08:00+00:00"}}


def _good_trials(trace: Path) -> None:
    for i, reward in enumerate(GOOD_REWARDS):
        d = trace / f"good-{i}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(_result(reward, exc="AgentTimeoutError" if i == 1 else None)))
        (d / "config.json").write_text("{}")


def _hostile(trace: Path) -> dict[str, str]:
    """Hostile trial directories; value: the problem expected in the summary for it ('' = none)."""
    cases: dict[str, str] = {}

    def result(name: str, data: bytes, problem: str = "") -> Path:
        d = trace / name
        d.mkdir(parents=True)
        (d / "result.json").write_bytes(data)
        cases[name] = problem
        return d

    # malformed, but its reward is still read from the raw text: not unreadable
    result("h-truncated", b'{"verifier_result": {"rewards": {"reward": 0.125')
    result("h-binary", bytes(range(256)) * 64, "malformed result.json")
    result("h-empty", b"", "empty result.json")
    result("h-blank", b" \n\t\r\n", "empty result.json")
    result("h-array", b"[1, 2, 3]", "result.json is not an object")
    result("h-string", b'"just a string"', "result.json is not an object")
    result("h-null", b"null", "result.json is not an object")
    result("h-deep-array", b"[" * 100_000 + b"]" * 100_000, "malformed result.json")
    result("h-deep-object", b'{"a": ' * 30_000 + b"1" + b"}" * 30_000, "malformed result.json")
    # from MEMBER_SCAN_MIN_BYTES on, only the used members are parsed; the others' structure is checked
    result("h-big-array", b"[" + b"0.5, " * 100_000 + b"1]", "result.json is not an object")
    result("h-big-bom", b'\xef\xbb\xbf{"verifier_result": {"rewards": {"reward": 0.015625}}, "pad": "'
           + b"x" * T.MEMBER_SCAN_MIN_BYTES + b'"}')
    result("h-big-nan", b'{"verifier_result": {"rewards": {"reward": NaN}}, "exception_info": {"exception_type": '
           b'"BigNanError"}, "pad": "' + b"x" * T.MEMBER_SCAN_MIN_BYTES + b'"}')
    result("h-big-deep-unused", b'{"verifier_result": {"rewards": {"reward": 0.0625}}, "pad": '
           + b"[" * 200_000 + b"]" * 200_000 + b"}")
    result("h-big-broken", b'{"verifier_result": {"rewards": {"reward": 0.03125}}, "pad": [' + b"1, " * 100_000 + b"}",
           "")                                                   # malformed, reward still read from the raw text
    logprobs = json.dumps([{"logprobs": [round(-0.001 * k, 4) for k in range(100_000)]} for _ in range(3)])
    result("h-logprobs", json.dumps(_result(0.375, episodes=11)).replace('"agent_result": {', '"agent_result": {"rollout_details": %s, ' % logprobs, 1).encode())
    result("h-deep-unclosed", b'{"verifier_result": ' + b"[" * 100_000, "malformed result.json")
    # parsed by the json fallback (orjson refuses these): not rewards, not a crash
    result("h-nan", b'{"verifier_result": {"rewards": {"reward": NaN}}}')
    result("h-inf", b'{"verifier_result": {"rewards": {"reward": Infinity}}}')
    result("h-minus-inf", b'{"verifier_result": {"rewards": {"reward": -Infinity}}}')
    result("h-huge-number", b'{"verifier_result": {"rewards": {"reward": 1e999}}}')
    result("h-bigint", b'{"verifier_result": {"rewards": {"reward": 1%s}}}' % (b"0" * 40))
    result("h-utf16", '{"verifier_result": {"rewards": {"reward": 0.25}}}'.encode("utf-16"))
    result("h-bom", b'\xef\xbb\xbf{"verifier_result": {"rewards": {"reward": 0.75}}}')
    result("h-wrong-types", json.dumps({"verifier_result": ["x"], "exception_info": "boom", "agent_result": 3,
                                        "started_at": 12, "environment_setup": {"started_at": [], "finished_at": {}},
                                        "verifier": "nope"}).encode())
    result("h-bad-times", json.dumps({"started_at": "yesterday", "verifier_result": {"rewards": {"reward": 1}},
                                      "verifier": {"started_at": "2026-08-01T12:00:00Z",
                                                   "finished_at": "2026-08-01T11:00:00Z"}}).encode())
    # bigger than the full-read limit: read by its head and tail only (sparse file, little disk)
    huge = result("h-huge", b"")
    with open(huge / "result.json", "wb") as fh:
        fh.write(b'{"verifier_result": {"rewards": {"reward": 1.0}}, "agent_result": {"metadata": {"n_episodes": 9}}, "pad": "')
        fh.truncate(T.RESULT_FULL_READ_BYTES + 5 * 1024 * 1024)
        fh.seek(0, os.SEEK_END)
        fh.write(b'", "exception_info": {"exception_type": "HugeError"}}')
    # not a regular file: never read (a FIFO would block, /dev/zero never ends)
    d = trace / "h-directory"
    (d / "result.json").mkdir(parents=True)
    cases["h-directory"] = "unreadable (Is a directory)"
    d = trace / "h-fifo"
    d.mkdir()
    os.mkfifo(d / "result.json")
    cases["h-fifo"] = "unreadable (not a regular file)"
    d = trace / "h-device"
    d.mkdir()
    (d / "result.json").symlink_to("/dev/zero")
    cases["h-device"] = "unreadable (not a regular file)"
    d = trace / "h-dangling"          # a dangling symlink: no result.json, the trial has not completed
    d.mkdir()
    (d / "result.json").symlink_to(d / "missing")
    cases["h-dangling"] = "started"
    d = trace / "h-loop"
    d.mkdir()
    (d / "result.json").symlink_to(d / "result.json")
    cases["h-loop"] = "started"
    # a fine result whose exception.txt and trajectory are FIFOs / garbage
    d = result("h-fifo-side-files", json.dumps(_result(0.0, exc="RuntimeError")).encode())
    os.mkfifo(d / "exception.txt")
    (d / "agent").mkdir()
    os.mkfifo(d / "agent" / "trajectory.json")
    d = result("h-deep-trajectory", json.dumps(_result(1.0, t0="2026-08-01T12:59:00Z")).encode())
    (d / "agent").mkdir()
    (d / "agent" / "trajectory.json").write_bytes(b'{"steps": ' + b"[" * 100_000)
    d = result("h-huge-trajectory", json.dumps(_result(1.0, t0="2026-08-01T12:58:00Z")).encode())
    (d / "agent").mkdir()
    with open(d / "agent" / "trajectory.json", "wb") as fh:     # sparse: past the size read for coherence
        fh.write(b'{"steps": [{"source": "agent", "message": "I will run the tests now and fix the parser."}], "x": "')
        fh.truncate(T.TRAJECTORY_MAX_BYTES + 1024)
        fh.seek(0, os.SEEK_END)
        fh.write(b'"}')
    d = result("h-binary-exception", json.dumps(_result(0.0, exc="Exception")).encode())
    (d / "exception.txt").write_bytes(bytes(range(256)) * 40 + b"\nValueError: real cause\n")
    (trace / "not-a-dir.json").write_text("{}")
    (trace / "link-to-dir").symlink_to(trace / "good-0")
    if hasattr(os, "fsencode"):
        d = trace / os.fsdecode(b"h-non-utf8-\xff")
        d.mkdir()
        (d / "result.json").write_text(json.dumps(_result(0.0)))
        cases[os.fsdecode(b"h-non-utf8-\xff")] = ""
    return cases


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    trace = tmp_path_factory.mktemp("hostile") / "trace_jobs"
    _good_trials(trace)
    return trace, _hostile(trace)


@pytest.mark.parametrize("workers", [1, 2])
def test_hostile_trial_files_never_crash_nor_lose_the_others(hostile_trace, monkeypatch, workers):
    trace, cases = hostile_trace
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(T, "PROCESS_CHUNK", 3)
    monkeypatch.setattr(T, "cpus", lambda: 2)
    monkeypatch.setattr(T, "may_fork", lambda: True)            # idle threads other tests left behind
    s = T.summarize_trials(trace, {}, 50, workers=workers)
    n_started_only = sum(1 for p in cases.values() if p == "started")
    assert s.started == len(GOOD_REWARDS) + len(cases)          # symlinked dirs and files are not trials
    assert s.completed == s.started - n_started_only
    unreadable = {name for name, p in cases.items() if p not in ("", "started")}
    assert s.unreadable == len(unreadable)
    assert len(s.problems) == T.MAX_PROBLEMS
    firsts = sorted(unreadable)[:T.MAX_PROBLEMS]                 # the first problems by trial name
    assert [p.split("/")[1] for p in s.problems] == firsts
    for text in s.problems:
        assert text.split(": ", 1)[1].startswith(cases[text.split("/")[1]])
    # every good trial's reward is there; non-finite rewards are not rewards
    assert all(math.isfinite(r) for r in s.rewards)
    for reward in GOOD_REWARDS + (0.125, 0.25, 0.75, 1e40, 1.0, 0.0625, 0.03125, 0.375, 0.015625):
        assert reward in s.rewards
    assert s.exceptions["AgentTimeoutError"] == 1
    assert s.exceptions["HugeError"] == 1                        # the huge file's tail was read
    assert s.exceptions["BigNanError"] == 1                      # a used member parsed by the json fallback
    assert s.exceptions["ValueError"] == 1                       # named in a binary exception.txt
    assert s.exception_example["ValueError"] == "h-binary-exception/exception.txt"
    assert s.exceptions["RuntimeError"] == 1                     # its exception.txt is a FIFO: not read
    assert 7.0 <= s.turns_mean <= 11.0
    assert s.phases["environment_setup"] and s.phases["agent_execution"]
    assert list(s.phases["verifier"]) == []                      # finished before it started: no duration
    assert s.coherence_sampled == 0                              # FIFO / too deep / too big trajectories


def test_no_fork_while_other_threads_run(hostile_trace, monkeypatch):
    import threading
    trace, _ = hostile_trace
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(T, "cpus", lambda: 2)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        background = T.BackgroundSummary(trace, {}, 50)
        assert background._readers == [] and background._tokens is None
    finally:
        stop.set()
        other.join()
    assert asdict(background.result()) == asdict(T.summarize_trials(trace, {}, 50, workers=1))


def test_processes_equal_one_process_on_hostile_files(hostile_trace, monkeypatch):
    trace, _ = hostile_trace
    sequential = T.summarize_trials(trace, {}, 50, workers=1)
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(T, "PROCESS_CHUNK", 2)
    monkeypatch.setattr(T, "cpus", lambda: 3)
    monkeypatch.setattr(T, "may_fork", lambda: True)            # idle threads other tests left behind
    shared = T.BackgroundSummary(trace, {}, 50, workers=3)
    assert len(shared._readers) == 2                             # two forked readers and this process
    assert asdict(shared.result()) == asdict(sequential)


def test_json_reader_accepts_what_json_accepts_and_raises_value_error_otherwise():
    for text in (b'{"a": 1}', b'{"a": NaN}', '{"a": 2}'.encode("utf-16"), b"[" * 10 + b"]" * 10,
                 b'{"n": 123456789012345678901234567890}'):
        got, want = T.loads_json(text), json.loads(text)
        assert repr(got) == repr(want) or (isinstance(want, dict) and got.keys() == want.keys())
    for text in (b"[" * 100_000, b"{", b"\xff\xfe\x00", b"[1,]"):
        with pytest.raises(ValueError):
            T.loads_json(text)


def test_exact_running_sum_equals_fmean():
    rng = random.Random(7)
    for _ in range(200):
        values = [rng.choice([rng.uniform(-1e6, 1e6), rng.random(), float(rng.randint(0, 40)), 1e-300, 1e300, -1e300])
                  for _ in range(rng.randint(1, 60))]
        partials: list[float] = []
        for v in values:
            T._add_exact(partials, v)
        assert math.fsum(partials) / len(values) == statistics.fmean(values)
        # merged from two readers in another order: the same
        a: list[float] = []
        b: list[float] = []
        for i, v in enumerate(reversed(values)):
            T._add_exact(a if i % 2 else b, v)
        for v in b:
            T._add_exact(a, v)
        assert math.fsum(a) == math.fsum(values)


def test_newest_sample_and_examples_do_not_depend_on_read_order():
    reads = [T.TrialRead(name=f"t{i:03d}", completed=True, reward=float(i % 2), exception=["A", "B", None][i % 3],
                         started_at=None if i % 7 == 0 else float(1000 + (i * 37) % 50)) for i in range(120)]
    reads += [T.TrialRead(name=f"u{i:03d}", completed=True, problem="malformed result.json (x)") for i in range(9)]
    plain = sorted(((r.started_at if r.started_at is not None else float("-inf")), r.name)
                   for r in reads if r.problem is None)[-10:]
    summaries = []
    for seed in range(5):
        shuffled = reads[:]
        random.Random(seed).shuffle(shuffled)
        half = len(shuffled) // 2
        a, b = T.TrialTally(None, 10), T.TrialTally(None, 10)
        for r in shuffled[:half]:
            a.add(r)
        for r in shuffled[half:]:
            b.add(r)
        a.merge(b)
        assert a.newest_names() == [name for _, name in plain]
        summary = T.TrialSummary.from_tally(a)
        summary.rewards = sorted(summary.rewards)      # values in read order here: no listing chunks
        summaries.append(summary)
    assert all(asdict(s) == asdict(summaries[0]) for s in summaries)
    s = summaries[0]
    assert list(s.exceptions) == ["A", "B"]                      # order of first occurrence by name
    assert s.exception_example == {"A": "t000/result.json", "B": "t001/result.json"}
    assert [p.split("/")[1] for p in s.problems] == [f"u{i:03d}" for i in range(T.MAX_PROBLEMS)]


def _many_trials(trace: Path, n: int) -> None:
    trace.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        d = trace / f"task-{i:06d}"
        if d.exists():
            continue
        d.mkdir()
        (d / "result.json").write_text(json.dumps(_result(float(i % 2), t0=f"2026-08-01T12:{i % 60:02d}:{i % 59:02d}.{i % 1000:03d}Z")))


def test_memory_per_trial_is_a_few_numbers(tmp_path):
    """Kept per completed trial: its reward and phase durations (8 bytes each), nothing per object."""
    trace = tmp_path / "trace_jobs"
    peaks = {}
    for n in (1000, 5000):
        _many_trials(trace, n)
        T._stamp.cache_clear()
        tracemalloc.start()
        try:
            summary = T.summarize_trials(trace, {}, 50, workers=1)
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert summary.completed == n
    per_trial = (peaks[5000] - peaks[1000]) / 4000
    assert per_trial < 200, f"{per_trial:.0f} bytes per trial"


def test_large_result_parses_only_the_used_members(tmp_path):
    """A result.json with rollout logprobs: the summary's fields, without materializing the floats."""
    doc = _result(0.5, exc="AgentTimeoutError", episodes=13)
    doc["agent_result"]["rollout_details"] = [{"logprobs": [round(-0.001 * k, 4) for k in range(50_000)]}] * 4
    doc["config"] = {"nested": [{"k": "}]\\\"{["}] * 1000}
    data = json.dumps(doc, indent=4).encode()
    assert 4 * T.MEMBER_SCAN_MIN_BYTES < len(data) < T.RESULT_FULL_READ_BYTES
    trial = tmp_path / "t"
    trial.mkdir()
    (trial / "result.json").write_bytes(data)
    T.read_trial(os.fsencode(tmp_path), b"t", {})            # warm caches
    tracemalloc.start()
    try:
        read = T.read_trial(os.fsencode(tmp_path), b"t", {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plain = T.TrialRead(name="t", completed=True)
    T._from_result(plain, json.loads(data))
    assert read == plain and read.reward == 0.5 and read.turns == 13.0 and read.phases
    assert read.stop_reason is None
    assert peak < 2.5 * len(data), f"{peak} bytes for a {len(data)}-byte file"


@pytest.mark.parametrize("where", [("agent_result", "stop_reason"), ("failure_mode",), ("stop_reason",)])
def test_large_result_keeps_the_stop_reason(tmp_path, where):
    doc = _result(0.0, episodes=40)
    doc["agent_result"]["rollout_details"] = [{"logprobs": [-0.5] * 250_000}]
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = "max_turns"
    data = json.dumps(doc).encode()
    assert len(data) > 4 * T.MEMBER_SCAN_MIN_BYTES
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "result.json").write_bytes(data)
    assert T.read_trial(os.fsencode(tmp_path), b"t", {}).stop_reason == "max_turns"


def _random_json(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 4 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -3, 2.5, 1e-7, 12345678901234567890])
    if kind in (2, 3):
        return rng.choice(["", "plain", 'q"uote', "back\\slash", "}]{[", "\u00e9\n", "2026-08-01T12:00:00Z"])
    if kind < 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["verifier_result", "rewards", "reward", "result", "exception_info", "exception_type", "agent_result",
            "metadata", "n_episodes", "started_at", "finished_at", "error_type", *T.PHASES, "other", "k\"ey",
            "stop_reason", "finish_reason", "exit_reason", "termination_reason", "failure_mode"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(6))}


def test_used_members_equal_the_whole_document():
    """For any valid document, the fields read from the used members equal those of a full parse."""
    rng = random.Random(3)
    for _ in range(3000):
        doc = _random_json(rng, 0)
        if not isinstance(doc, dict) and rng.random() < 0.8:
            doc = {"agent_result": doc} if rng.random() < 0.5 else {"verifier_result": doc}
        text = json.dumps(doc, indent=rng.choice([None, 1]), separators=rng.choice([None, (",", ":")])).encode()
        parsed = T.load_used_members(text)
        if not isinstance(doc, dict):
            assert not isinstance(parsed, dict)
            continue
        a, b = T.TrialRead(name="x", completed=True), T.TrialRead(name="x", completed=True)
        T._from_result(a, parsed)
        T._from_result(b, json.loads(text))
        assert a == b, text


def test_listing_regroups_past_the_queue_capacity(hostile_trace, monkeypatch):
    trace, _ = hostile_trace
    expected = T.summarize_trials(trace, {}, 50, workers=1)
    names = sorted(n for c in T.list_trials(trace) for n in c.split(b"\0"))
    monkeypatch.setattr(T, "PROCESS_CHUNK", 2)
    monkeypatch.setattr(T, "_MAX_CHUNKS", 3)
    chunks = T.list_trials(trace)
    assert len(chunks) == 3 and sorted(n for c in chunks for n in c.split(b"\0")) == names
    monkeypatch.setattr(T, "PROCESS_MIN_TRIALS", 1)
    monkeypatch.setattr(T, "cpus", lambda: 2)
    monkeypatch.setattr(T, "may_fork", lambda: True)
    assert asdict(T.summarize_trials(trace, {}, 50, workers=2)) == asdict(expected)


def test_a_trial_read_from_the_directory_descriptor_equals_the_whole_path(tmp_path):
    """``read_trial`` with ``open_root``'s descriptor reads what the whole paths read, trial by
    trial: completed, unfinished (config time), exception.txt named or generic, malformed, a FIFO."""
    root = tmp_path / "trace"
    cases = {
        "done": {"result.json": json.dumps({"verifier_result": {"rewards": {"reward": 0.5}},
                                            "started_at": "2026-08-01T10:00:00Z", "finished_at": "2026-08-01T10:05:00Z"})},
        "generic": {"result.json": json.dumps({"exception_info": {"exception_type": "RuntimeError"}}),
                    "exception.txt": "Traceback...\nSandboxTimeoutError: sandbox did not start\n"},
        "named": {"result.json": json.dumps({"exception_info": {"exception_type": "DaytonaError"}}), "exception.txt": "x"},
        "unfinished": {"config.json": "{}"},
        "malformed": {"result.json": "{not json"},
        "empty": {},
    }
    for name, files in cases.items():
        (root / name).mkdir(parents=True)
        for file, text in files.items():
            (root / name / file).write_text(text)
    os.mkfifo(root / "empty" / "result.json")
    r = os.fsencode(root)
    fd = T.open_root(r)
    assert fd is not None
    try:
        for name in [*cases, "missing"]:
            assert T.read_trial(r, name.encode(), {}, fd) == T.read_trial(r, name.encode(), {}), name
    finally:
        T.close_root(fd)
    assert T.open_root(os.fsencode(tmp_path / "absent")) is None


def test_stamp_is_aware_and_parse_iso_for_every_shape():
    """``_stamp``'s fast path (a ``Z`` only at the end) gives what ``_aware`` and ``parse_iso`` give,
    on the common forms and on fuzzed variants of them."""
    from rlhealth.probes.parse.timestamps import parse_iso
    rng = random.Random(7)
    bases = ["2026-08-03T09:39:54.102Z", "2026-08-03T09:39:54Z", "2026-08-03 09:39:54.102345Z", "2026-08-03T09:39:54+00:00",
             "2026-08-03T09:39:54", "2026-08-03T09:39:54.1Z", "2026-02-30T09:39:54Z", "2026-08-03Z", "2026-08-03T25:00:00Z",
             "2026-08-03T09:39:54ZZ", "x2026-08-03T09:39:54Z", "2026-08-03T09:39:54.102z", "Z", "", " 2026-08-03T09:39:54Z"]
    alphabet = "0123456789-:T. Zz+"
    texts = set(bases)
    for base in bases:
        for _ in range(300):
            chars = list(base)
            for _ in range(rng.randint(1, 3)):
                op = rng.random()
                i = rng.randint(0, len(chars))
                if op < 0.4 and chars:
                    chars[min(i, len(chars) - 1)] = rng.choice(alphabet)
                elif op < 0.7:
                    chars.insert(i, rng.choice(alphabet))
                elif chars:
                    del chars[min(i, len(chars) - 1)]
            texts.add("".join(chars))
    for text in sorted(texts):
        T._stamp.cache_clear()
        assert T._stamp(text) == (T._aware(text), parse_iso(text)), text
