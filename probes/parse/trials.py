"""Agentic trial artifacts under ``trace_jobs/`` (marin-artifacts §3, log-formats §7).

A trial directory with ``result.json`` is completed; one with only ``config.json`` (or other
files) is started. From each ``result.json``: reward (``verifier_result.rewards.reward``),
exception type, turns (``agent_result.metadata.n_episodes``), phase timings. A sample of the
newest completed trials is read further for agent output (ATIF ``agent/trajectory.json``) and
kept (its head) for the coherence measurements the trial observer makes.

Memory does not grow with the trial count except by the numbers the facts need exactly: every
reward (the reward histogram) and every phase duration (exact medians and p90), 8 bytes each.
Everything else is a running aggregate (counts, an exact running sum for the mean turns, the
first examples by trial name, the newest ``sample_size`` trials); the directory listing is kept
packed (about one byte per character of the trial names).

Readers: ``BackgroundSummary`` starts its own reader processes (forked, sharing a queue of
chunks of the listing) while the caller scans the logs. The one exception to that is
``EarlyTrials``: ``rlhealth diagnose`` forks one reader before it imports the diagnosis and loads
the rules (a quarter second in which the second core would idle), and ``BackgroundSummary``
adopts it. Kept because without it the 1 GiB / 20,000-trial bench point misses its speed floor.
Its failure modes end in the ordinary path: no fork while another thread runs, a reader nobody
adopted is killed (``discard``), and a reader that fails, dies or read with other exception
aliases has its trials read again in-process (identical results).
"""
from __future__ import annotations

import bisect
import errno
import functools
import gc
import heapq
import json
import math
import multiprocessing
import os
import re
import stat
import sys
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import orjson

from rlhealth.forks import cpus, may_fork, reap
from rlhealth.packaged import packaged_yaml

from rlhealth.probes.parse.timestamps import parse_iso

RESULT_FULL_READ_BYTES = 16 * 1024 * 1024
RESULT_EDGE_BYTES = 1024 * 1024
TRAJECTORY_MAX_BYTES = 8 * 1024 * 1024
EXCEPTION_HEAD_BYTES = 16 * 1024
PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
GENERIC_EXCEPTIONS = ("RuntimeError", "Exception")
"""Exception types too generic to report: ``exception.txt`` is read for a more specific name."""

_REWARD_RE = re.compile(rb'"rewards"\s*:\s*\{[^{}]*?"reward"\s*:\s*(-?[0-9.eE+-]+|null)')
_EXC_TYPE_RE = re.compile(rb'"exception_type"\s*:\s*"([A-Za-z0-9_.]+)"')
_EPISODES_RE = re.compile(rb'"n_episodes"\s*:\s*([0-9]+)')
# Where a trial records why its agent stopped, first found wins: the agent's own metadata
# (Terminus / OpenCode style stop, finish, exit or termination reason) or terminal-bench's
# ``failure_mode``. Without one, the exception type stands for the stop reason (the observer
# maps both through rules/trial_exceptions.yaml ``stop_reasons``).
_METADATA_STOP_KEYS = ("stop_reason", "finish_reason", "exit_reason", "termination_reason")
"""under ``agent_result.metadata``"""
_AGENT_STOP_KEYS = ("stop_reason",)
"""under ``agent_result``"""
_TOP_STOP_KEYS = ("stop_reason", "failure_mode")
"""at the top of result.json"""
STOP_REASON_FIELDS = (tuple(("agent_result", "metadata", key) for key in _METADATA_STOP_KEYS)
                      + tuple(("agent_result", key) for key in _AGENT_STOP_KEYS)
                      + tuple((key,) for key in _TOP_STOP_KEYS))
STOP_REASON_MAX_CHARS = 80
_STOP_REASON_RE = re.compile(rb'"(?:stop_reason|finish_reason|exit_reason|termination_reason|failure_mode)"\s*:\s*"([^"]{1,80})"')
_EXC_NAME_RE = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit))\b")

_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
"""O_NONBLOCK: a FIFO planted as a trial file never blocks the reader (regular files ignore it)."""
_ABSENT_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
"""``open`` errors that mean "no such file" (as ``Path.exists`` treats them)."""


class NotRegularFile(OSError):
    """A trial file that is a FIFO, socket or device: never read."""

    def __init__(self):
        super().__init__("not a regular file")
        self.strerror = "not a regular file"


def _open_file(path: bytes, at: int | None = None) -> tuple[int, int] | None:
    """(fd, size) of an existing file (``path`` relative to the directory descriptor ``at`` when
    given); None if it does not exist. A directory opens (reading it fails with EISDIR, as
    ``open()`` would); other non-regular files raise ``NotRegularFile``."""
    try:
        fd = os.open(path, _OPEN_FLAGS, dir_fd=at)
    except OSError as exc:
        if exc.errno in _ABSENT_ERRNOS:
            return None
        raise
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise NotRegularFile()
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _read_fd(fd: int, first: int, limit: int) -> bytes:
    """Up to ``limit`` bytes to EOF, asking for ``first`` bytes first (the size fstat gave + 1)."""
    want = min(first, limit)
    data = os.read(fd, want)
    if len(data) < want or len(data) >= limit:     # a short read of a regular file is its end
        return data
    parts = [data]
    total = len(data)
    while total < limit:
        more = os.read(fd, min(limit - total, 1024 * 1024))
        if not more:
            break
        parts.append(more)
        total += len(more)
    return b"".join(parts)


def _read_file(path: bytes, limit: int, at: int | None = None) -> bytes | None:
    """At most ``limit`` bytes of a file; None if it does not exist; OSError if unreadable."""
    opened = _open_file(path, at)
    if opened is None:
        return None
    fd, size = opened
    try:
        return _read_fd(fd, size + 1, limit)
    finally:
        os.close(fd)


def _exists(path: bytes, at: int | None = None) -> bool:
    try:
        os.stat(path, dir_fd=at)
    except (OSError, ValueError):
        return False
    return True


_DIR_FDS = all(f in os.supports_dir_fd for f in (os.open, os.stat, os.access))


def open_root(root: bytes) -> int | None:
    """A descriptor open on the trace directory ``root`` for ``read_trial`` (its files are then
    looked up from it, not from ``/`` each time), or None (not supported here, or not openable:
    ``read_trial`` uses the whole paths). The caller closes it."""
    if not _DIR_FDS:
        return None
    try:
        return os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None


def close_root(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def loads_json(data: bytes | memoryview) -> Any:
    """Parse JSON with orjson; what orjson refuses but ``json`` accepts (NaN/Infinity literals, a
    BOM, UTF-16, lone surrogates) is parsed by ``json``, so both accept the same documents (orjson
    returns integers past 64 bits as floats). Raises ValueError for anything unparseable, nesting
    too deep included (``json`` would raise RecursionError there)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)
    except RecursionError as exc:
        raise ValueError(str(exc)) from None


WALL_MEASURED, WALL_UNFINISHED, WALL_UNTIMED = 0, 1, 2
"""A trial's wall clock: measured; no ``finished_at`` (never recorded its own finish); written but
unusable (unparseable, ends before it starts, or a naive time paired with an aware one)."""


@dataclass(slots=True)
class TrialRead:
    """What one trial directory yielded (transient, not kept)."""
    name: str
    completed: bool
    reward: float | None = None
    exception: str | None = None
    turns: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    started_at: float | None = None
    problem: str | None = None
    exception_source: str | None = None
    stop_reason: str | None = None
    wall_s: float | None = None
    """the trial's own wall clock (its ``started_at`` to ``finished_at``)"""
    wall_state: int = WALL_UNFINISHED


def _aware(text: str) -> bool:
    """An ISO-8601 time naming its offset (``Z`` or ``+``/``-`` after the time of day)."""
    tail = text[11:]
    return "Z" in tail or "z" in tail or "+" in tail or "-" in tail


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _finite_float(value: Any) -> float | None:
    """``float(value)`` when finite; None for NaN, infinities and an integer past the float range
    (float() raises OverflowError there: a garbled count is no reward, not a failed diagnosis)."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _head_and_tail(fd: int, size: int) -> tuple[None, bytes, None]:
    head = _read_fd(fd, RESULT_EDGE_BYTES, RESULT_EDGE_BYTES)
    os.lseek(fd, max(0, size - RESULT_EDGE_BYTES), os.SEEK_SET)
    return None, head + b"\n" + _read_fd(fd, RESULT_EDGE_BYTES, 2 * RESULT_EDGE_BYTES), None


def _read_result(path: bytes, at: int | None = None) -> tuple[dict | None, bytes | None, str | None] | None:
    """Parsed JSON (files up to RESULT_FULL_READ_BYTES) or raw head+tail bytes (larger files), or
    a problem string; None when there is no result.json (the trial has not completed)."""
    try:
        opened = _open_file(path, at)
        if opened is None:
            return None
        fd, size = opened
        try:
            if size > RESULT_FULL_READ_BYTES:
                return _head_and_tail(fd, size)
            data = _read_fd(fd, size + 1, RESULT_FULL_READ_BYTES + RESULT_EDGE_BYTES)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, None, f"unreadable ({exc.strerror or exc})"
    if not data or data.isspace():
        return None, None, "empty result.json"
    try:
        obj = loads_json(data) if len(data) < MEMBER_SCAN_MIN_BYTES else load_used_members(data)
    except ValueError as exc:
        return None, data[-RESULT_EDGE_BYTES:], f"malformed result.json ({str(exc)[:80]})"
    if not isinstance(obj, dict):
        return None, None, "result.json is not an object"
    return obj, None, None


# ---------------------------------------------------------------- large result.json: used members only
MEMBER_SCAN_MIN_BYTES = 256 * 1024
"""From this size on, only the members the summary uses are parsed (a result.json with rollout
logprobs parses into tens of MB of Python floats)."""
_USED_MEMBERS = frozenset(("verifier_result", "result", "reward", "exception_info", "started_at", "finished_at",
                           "stop_reason", "failure_mode") + PHASES)
_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SCALAR = re.compile(rb'[^,:{}\[\]" \t\n\r]+')
_STRUCTURE_BYTES = b'"[]{}'
_STRUCTURE = re.compile(rb'["\[\]{}]')
_STRUCTURE_NEAR = 256
"""bytes searched with ``_STRUCTURE`` before the run is crossed with ``bytes.find``"""


def _value_end(buf: bytes, pos: int) -> int:
    """End of the JSON value at ``pos``, found by its structure (strings and brackets) only."""
    first = buf[pos:pos + 1]
    if first == b'"':
        m = _STRING.match(buf, pos)
        if m is None:
            raise ValueError(f"unterminated string at byte {pos}")
        return m.end()
    if first in (b"{", b"["):
        closers = []
        i = pos
        end = len(buf)
        nexts = [-1] * len(_STRUCTURE_BYTES)
        while True:
            m = _STRUCTURE.search(buf, i, i + _STRUCTURE_NEAR)
            if m is not None:
                at = m.start()
            else:
                # a long run without structure (an array of numbers): each structure byte's next
                # position, found by bytes.find, searched for again only once passed
                for k, known in enumerate(nexts):
                    if known < i:
                        known = buf.find(_STRUCTURE_BYTES[k], i)
                        nexts[k] = known if known >= 0 else end
                at = min(nexts)
                if at == end:
                    raise ValueError(f"unterminated {'object' if first == b'{' else 'array'} at byte {pos}")
            ch = buf[at]
            if ch == 0x22:                                   # "
                s = _STRING.match(buf, at)
                if s is None:
                    raise ValueError(f"unterminated string at byte {at}")
                i = s.end()
                continue
            if ch in (0x7B, 0x5B):                           # { [
                closers.append(ch + 2)                       # } ]
            elif not closers or closers.pop() != ch:
                raise ValueError(f"mismatched {chr(ch)} at byte {at}")
            i = at + 1
            if not closers:
                return i
    m = _SCALAR.match(buf, pos)
    if m is None:
        raise ValueError(f"expected a value at byte {pos}")
    return m.end()


def _member_spans(buf: bytes, pos: int) -> tuple[dict[str, tuple[int, int]], int]:
    """{key: (start, end) of its value} of the object at ``pos`` (the last of a repeated key, as
    ``json`` keeps it), and the position after the object."""
    spans: dict[str, tuple[int, int]] = {}
    pos = _WS.match(buf, pos + 1).end()
    if buf[pos:pos + 1] == b"}":
        return spans, pos + 1
    while True:
        m = _STRING.match(buf, pos)
        if m is None:
            raise ValueError(f"expected a key at byte {pos}")
        key = loads_json(m.group())
        pos = _WS.match(buf, m.end()).end()
        if buf[pos:pos + 1] != b":":
            raise ValueError(f"expected ':' at byte {pos}")
        start = _WS.match(buf, pos + 1).end()
        end = _value_end(buf, start)
        spans[key] = (start, end)
        pos = _WS.match(buf, end).end()
        sep = buf[pos:pos + 1]
        if sep == b"}":
            return spans, pos + 1
        if sep != b",":
            raise ValueError(f"expected ',' or '}}' at byte {pos}")
        pos = _WS.match(buf, pos + 1).end()


def load_used_members(buf: bytes) -> Any:
    """The members of a result.json the summary uses (``agent_result`` reduced to its
    ``metadata``), each parsed alone; the rest is only checked for structure. A document that is
    not an object yields a non-dict. Raises ValueError if the structure is broken (or the text is
    UTF-16/32, which only a full parse decodes)."""
    start = _WS.match(buf, 3 if buf.startswith(b"\xef\xbb\xbf") else 0).end()
    if buf[start:start + 1] != b"{":
        end = _value_end(buf, start)
        if _WS.match(buf, end).end() != len(buf):
            raise ValueError(f"extra data at byte {end}")
        return []
    spans, end = _member_spans(buf, start)
    if _WS.match(buf, end).end() != len(buf):
        raise ValueError(f"extra data at byte {end}")
    view = memoryview(buf)
    obj = {key: loads_json(view[a:b]) for key, (a, b) in spans.items() if key in _USED_MEMBERS}
    if "agent_result" in spans:
        a, b = spans["agent_result"]
        inner = _member_spans(buf, a)[0] if buf[a:a + 1] == b"{" else {}
        obj["agent_result"] = {key: loads_json(view[slice(*inner[key])])
                               for key in ("metadata", "stop_reason") if key in inner}
    return obj


@functools.lru_cache(maxsize=16)
def _stamp(text: str) -> tuple[bool, float | None]:
    """(``_aware(text)``, ``parse_iso(text)``). A trial's phase boundaries repeat (one phase ends
    when the next starts): each is parsed once. The common form, whose only ``Z`` ends it after
    the date, is aware and read by ``fromisoformat`` alone (what ``parse_iso`` does first)."""
    if text[-1:] == "Z" and text.find("Z") == len(text) - 1 >= 11:
        try:
            return True, datetime.fromisoformat(text).timestamp()
        except ValueError:
            pass
    tail = text[11:]
    return "Z" in tail or "z" in tail or "+" in tail or "-" in tail, parse_iso(text)


def _stop_reason(obj: dict, agent: Any, metadata: Any) -> str | None:
    """The first non-blank string among STOP_REASON_FIELDS, in that order (a path through a
    missing member or a non-object gives nothing); ``agent`` and ``metadata`` are
    ``obj["agent_result"]`` and its ``["metadata"]`` (None where missing)."""
    for holder, keys in ((metadata, _METADATA_STOP_KEYS), (agent, _AGENT_STOP_KEYS), (obj, _TOP_STOP_KEYS)):
        if isinstance(holder, dict):
            for key in keys:
                value = holder.get(key)
                if isinstance(value, str) and value.strip():
                    return value
    return None


def _from_result(read: TrialRead, obj: dict) -> None:
    """Fill a fresh ``read`` from a parsed result.json (its fields still at their defaults)."""
    # each field's path written out (a missing member or a non-object on the way: None); the
    # members shared by several fields are looked up once, each time string parsed once
    get = obj.get
    verifier, result, agent = get("verifier_result"), get("result"), get("agent_result")
    result_is_dict = isinstance(result, dict)
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    reward = rewards.get("reward") if isinstance(rewards, dict) else None
    if reward is None:
        reward = result.get("reward") if result_is_dict else get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        read.reward = _finite_float(reward)
    info = get("exception_info")
    exc = (info.get("exception_type") if isinstance(info, dict) else None) or \
        (result.get("error_type") if result_is_dict else None) or None
    if exc:
        read.exception = str(exc)
    metadata = agent.get("metadata") if isinstance(agent, dict) else None
    turns = metadata.get("n_episodes") if isinstance(metadata, dict) else None
    if isinstance(turns, (int, float)):
        read.turns = _finite_float(turns)
    stop = _stop_reason(obj, agent, metadata)
    if stop:
        read.stop_reason = stop.strip()[:STOP_REASON_MAX_CHARS]
    stamp = _stamp
    phases = read.phases
    for phase in PHASES:
        block = get(phase)
        if isinstance(block, dict):
            a, b = block.get("started_at"), block.get("finished_at")
            if isinstance(a, str) and isinstance(b, str):
                (a_aware, a), (b_aware, b) = stamp(a), stamp(b)
                if a_aware == b_aware and a is not None and b is not None and b >= a:
                    phases[phase] = b - a
    # the trial's own wall clock, ``started_at`` to ``finished_at`` (WALL_* states)
    started, finished = get("started_at"), get("finished_at")
    if isinstance(started, str):
        started_aware, start = stamp(started)
        read.started_at = start
    if finished is not None:
        read.wall_state = WALL_UNTIMED
        if isinstance(started, str) and isinstance(finished, str):
            finished_aware, end = stamp(finished)
            if started_aware == finished_aware and start is not None and end is not None and end >= start:
                read.wall_s = end - start
                read.wall_state = WALL_MEASURED


def _from_raw(read: TrialRead, raw: bytes) -> None:
    m = _REWARD_RE.search(raw)
    if m and m.group(1) != b"null":
        try:
            read.reward = _finite(float(m.group(1)))
        except ValueError:
            pass
    m = _EXC_TYPE_RE.search(raw)
    read.exception = m.group(1).decode() if m else None
    m = _EPISODES_RE.search(raw)
    read.turns = _finite(float(m.group(1))) if m else None
    m = _STOP_REASON_RE.search(raw)
    read.stop_reason = m.group(1).decode("utf-8", "replace") if m else None


def read_trial(root: bytes, dir_name: bytes, aliases: dict[str, str], root_fd: int | None = None) -> TrialRead:
    """One trial directory ``root/dir_name`` (bytes paths: no decoding per file); ``root_fd``: a
    descriptor open on ``root`` (``open_root``), so each file is looked up from there."""
    if root_fd is None:
        base = root + b"/" + dir_name + b"/"
    else:
        base = dir_name + b"/"
    name = dir_name.decode(_FS_ENCODING, _FS_ERRORS)       # os.fsdecode
    found = _read_result(base + b"result.json", root_fd)
    if found is None:
        return TrialRead(name=name, completed=False, started_at=_config_time(base + b"config.json", root_fd))
    obj, raw, problem = found
    read = TrialRead(name=name, completed=True, problem=problem)
    if obj is not None:
        _from_result(read, obj)
    elif raw is not None:
        _from_raw(read, raw)
    exc_txt = base + b"exception.txt"
    if read.exception is None or read.exception in GENERIC_EXCEPTIONS:
        # most trials have no exception.txt: access() says so without an exception raised (a
        # path that does not resolve names nothing, unless an alias is the empty string)
        if not os.access(exc_txt, os.F_OK, dir_fd=root_fd) and "" not in aliases:
            return read
        try:
            head_bytes = _read_file(exc_txt, EXCEPTION_HEAD_BYTES, root_fd)
        except OSError:
            head_bytes = b""          # present but unreadable
        if head_bytes is not None:
            head = head_bytes.decode("utf-8", "replace")
            named = None
            for needle, alias in aliases.items():
                if needle in head:
                    named = alias
                    break
            if named is None:
                names = _EXC_NAME_RE.findall(head)
                named = names[-1] if names else None
            if named:
                read.exception = named
                read.exception_source = f"{name}/exception.txt"
    elif _exists(exc_txt, root_fd):
        read.exception_source = f"{name}/exception.txt"
    return read


def _config_time(path: bytes, at: int | None = None) -> float | None:
    try:
        return os.stat(path, dir_fd=at).st_mtime
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- agent output
COHERENCE_SAMPLE_CHARS = 4000
"""Characters of each sampled agent output kept for the coherence measurements (the observer
measures the first ``coherence_sample_chars`` of them, rules/thresholds.yaml)."""


def agent_output(trial_dir: Path) -> tuple[str | None, str | None]:
    """(joined agent messages, relative source) from the ATIF trajectory, if readable."""
    try:
        opened = _open_file(os.fsencode(trial_dir / "agent" / "trajectory.json"))
        if opened is None:
            return None, None
        fd, size = opened
        try:
            data = _read_fd(fd, size + 1, TRAJECTORY_MAX_BYTES + 1) if size <= TRAJECTORY_MAX_BYTES else b""
        finally:
            os.close(fd)
        if not data or len(data) > TRAJECTORY_MAX_BYTES:
            return None, None
        obj = loads_json(data)
    except (OSError, ValueError):
        return None, None
    steps = obj.get("steps") if isinstance(obj, dict) else None
    if not isinstance(steps, list):
        return None, None
    parts = []
    for step in steps:
        if not isinstance(step, dict) or step.get("source") != "agent" or step.get("is_copied_context"):
            continue
        message = step.get("message")
        if isinstance(message, str):
            parts.append(message)
        calls = step.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict) and isinstance(call.get("arguments"), (str, dict)):
                args = call["arguments"]
                parts.append(args if isinstance(args, str) else json.dumps(args, sort_keys=True))
    return "\n".join(parts), f"{trial_dir.name}/agent/trajectory.json"


# ---------------------------------------------------------------- aggregation
def _add_exact(partials: list[float], x: float) -> None:
    """Add ``x`` to ``partials``, a list of non-overlapping floats whose exact sum is the running
    total (Shewchuk), so ``math.fsum(partials)`` equals ``math.fsum`` of every value added, in any
    order: the mean is exactly ``statistics.fmean`` of the values."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


MAX_PROBLEMS = 5


@dataclass
class TrialTally:
    """Running aggregates of the trials one reader has read; ``merge`` combines readers.

    Nothing here depends on the order trials are read in: examples and problems are the ones of
    the smallest trial names, the sample is the newest ``sample_size`` by (start, name), and the
    rewards and durations of each chunk of the listing are kept apart (``seal``) to be joined in
    listing order, whichever reader read which chunk.
    """
    since: float | None
    sample_size: int
    started: int = 0
    completed: int = 0
    unreadable: int = 0
    prior_generation: int = 0
    first_started_at: float | None = None
    last_started_at: float | None = None
    last_recorded_start: float | None = None
    rewards: array = field(default_factory=lambda: array("d"))
    """rewards of the chunk being read (then sealed)"""
    turns_count: int = 0
    turns_partials: list[float] = field(default_factory=list)
    exceptions: Counter = field(default_factory=Counter)
    first_exception: dict[str, tuple[str, str]] = field(default_factory=dict)
    """exception type -> (smallest trial name with it, its evidence source)"""
    stop_reasons: Counter = field(default_factory=Counter)
    """(stop-reason field value or None, exception type or None) -> finished trials"""
    first_stop_reason: dict[tuple, str] = field(default_factory=dict)
    """stop-reason key -> smallest trial name with it"""
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(trial name, problem) of the MAX_PROBLEMS smallest names"""
    phases: dict[str, array] = field(default_factory=lambda: {p: array("d") for p in PHASES})
    """durations of the chunk being read (then sealed)"""
    sealed: list[tuple[int, array, dict[str, array]]] = field(default_factory=list)
    """(chunk number, its rewards, its durations)"""
    newest: list[tuple[float, str]] = field(default_factory=list)
    """min-heap of the ``sample_size`` newest completed trials, (start or -inf, name)"""
    wall: list[int] = field(default_factory=lambda: [0, 0, 0])
    """finished trials by wall-clock state (WALL_MEASURED, WALL_UNFINISHED, WALL_UNTIMED)"""
    wall_us: int = 0
    """summed wall clock of the measured trials, whole microseconds (an exact, order-free sum)"""
    phase_in_wall_us: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    """summed phase durations of the measured trials, whole microseconds"""

    def add(self, read: TrialRead) -> None:
        start = read.started_at
        if start is not None:
            if self.since is not None and start < self.since:
                self.prior_generation += 1
                return
            if self.first_started_at is None or start < self.first_started_at:
                self.first_started_at = start
            if self.last_started_at is None or start > self.last_started_at:
                self.last_started_at = start
        self.started += 1
        if not read.completed:
            return
        if start is not None and (self.last_recorded_start is None or start > self.last_recorded_start):
            self.last_recorded_start = start
        self.completed += 1
        name, reward, exception = read.name, read.reward, read.exception
        if read.problem and reward is None and exception is None:
            self.unreadable += 1
            self._note_problem(name, f"trace_jobs/{name}/result.json: {read.problem}")
            return
        if reward is not None:
            self.rewards.append(reward)
        if exception:
            self.exceptions[exception] += 1
            self._note_exception(exception, name, read.exception_source or f"{name}/result.json")
        stop_key = (read.stop_reason, exception)
        self.stop_reasons[stop_key] += 1
        known = self.first_stop_reason.get(stop_key)
        if known is None or name < known:
            self.first_stop_reason[stop_key] = name
        if read.turns is not None:
            self.turns_count += 1
            _add_exact(self.turns_partials, read.turns)
        phases = self.phases
        measured = read.wall_state == WALL_MEASURED
        self.wall[read.wall_state] += 1
        if measured:
            self.wall_us += round(read.wall_s * 1e6)
        inside = self.phase_in_wall_us
        for phase, value in read.phases.items():
            phases[phase].append(value)
            if measured:
                inside[phase] += round(value * 1e6)
        if self.sample_size > 0:
            key = (start if start is not None else -math.inf, name)
            newest = self.newest
            if len(newest) < self.sample_size:
                heapq.heappush(newest, key)
            elif key > newest[0]:
                heapq.heapreplace(newest, key)

    def _note_problem(self, name: str, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS or name < self.problems[-1][0]:
            self.problems.append((name, text))
            self.problems.sort()
            del self.problems[MAX_PROBLEMS:]

    def _note_exception(self, exc: str, name: str, source: str) -> None:
        known = self.first_exception.get(exc)
        if known is None or name < known[0]:
            self.first_exception[exc] = (name, source)

    def _note_stop_reason(self, key: tuple, name: str) -> None:
        known = self.first_stop_reason.get(key)
        if known is None or name < known:
            self.first_stop_reason[key] = name

    def _note_newest(self, key: tuple[float, str]) -> None:
        if self.sample_size <= 0:
            return
        if len(self.newest) < self.sample_size:
            heapq.heappush(self.newest, key)
        elif key > self.newest[0]:
            heapq.heapreplace(self.newest, key)

    def seal(self, chunk: int) -> None:
        """The values added since the last seal belong to chunk number ``chunk`` of the listing."""
        if self.rewards or any(self.phases.values()):
            self.sealed.append((chunk, self.rewards, self.phases))
            self.rewards = array("d")
            self.phases = {p: array("d") for p in PHASES}

    def joined_values(self) -> tuple[array, dict[str, array]]:
        """Every reward and duration, in listing order (chunk by chunk; emptied as it goes)."""
        self.seal(sys.maxsize)
        self.sealed.sort(key=lambda part: part[0], reverse=True)
        rewards, phases = array("d"), {p: array("d") for p in PHASES}
        while self.sealed:
            _, chunk_rewards, chunk_phases = self.sealed.pop()
            rewards.extend(chunk_rewards)
            for p, values in chunk_phases.items():
                phases[p].extend(values)
        return rewards, phases

    def merge(self, other: TrialTally) -> None:
        self.started += other.started
        self.completed += other.completed
        self.unreadable += other.unreadable
        self.prior_generation += other.prior_generation
        self.first_started_at = _pick(min, self.first_started_at, other.first_started_at)
        self.last_started_at = _pick(max, self.last_started_at, other.last_started_at)
        self.last_recorded_start = _pick(max, self.last_recorded_start, other.last_recorded_start)
        other.seal(sys.maxsize)
        self.sealed.extend(other.sealed)
        self.turns_count += other.turns_count
        for x in other.turns_partials:
            _add_exact(self.turns_partials, x)
        self.exceptions.update(other.exceptions)
        for exc, (name, source) in other.first_exception.items():
            self._note_exception(exc, name, source)
        self.stop_reasons.update(other.stop_reasons)
        for key, name in other.first_stop_reason.items():
            self._note_stop_reason(key, name)
        for name, text in other.problems:
            self._note_problem(name, text)
        for key in other.newest:
            self._note_newest(key)
        self.wall = [a + b for a, b in zip(self.wall, other.wall)]
        self.wall_us += other.wall_us
        for phase, us in other.phase_in_wall_us.items():
            self.phase_in_wall_us[phase] += us

    def newest_names(self) -> list[str]:
        """The sampled trials, oldest first."""
        return [name for _, name in sorted(self.newest)]

    def newest_sample(self) -> list[tuple[float, str]]:
        """The sampled trials, oldest first: (recorded start or -inf, name)."""
        return sorted(self.newest)


def _pick(fn, a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else fn(a, b)


@dataclass
class TrialSummary:
    """What the trial observer reads (``TrialTally`` in a canonical, order-free form)."""
    started: int = 0
    completed: int = 0
    unreadable: int = 0
    rewards: array = field(default_factory=lambda: array("d"))
    """every reward read, in listing order"""
    exceptions: Counter = field(default_factory=Counter)
    """in the order of each type's first trial by name (ties of ``most_common`` break that way)"""
    exception_example: dict[str, str] = field(default_factory=dict)
    turns_count: int = 0
    turns_mean: float | None = None
    phases: dict[str, array] = field(default_factory=lambda: {p: array("d") for p in PHASES})
    """every duration per phase, in listing order"""
    problems: list[str] = field(default_factory=list)
    first_started_at: float | None = None
    last_started_at: float | None = None
    last_recorded_start: float | None = None
    """Newest ``started_at`` written in a result.json (never a file's mtime: deterministic)."""
    coherence_sampled: int = 0
    coherence_samples: list[tuple[float | None, str, str]] = field(default_factory=list)
    """The newest sampled trials' agent output, oldest first: (recorded start, source, text head)."""
    prior_generation: int = 0
    stop_reasons: Counter = field(default_factory=Counter)
    """(stop-reason field value or None, exception type or None) -> finished trials."""
    stop_reason_example: dict[tuple, str] = field(default_factory=dict)
    """stop-reason key -> result.json of its smallest trial name"""
    wall: tuple[int, int, int] = (0, 0, 0)
    """finished trials whose wall clock was measured, never finished, or is unusable"""
    wall_s: float = 0.0
    """summed wall clock of the measured trials"""
    phase_in_wall_s: dict[str, float] = field(default_factory=dict)
    """summed duration per phase over the measured trials (the numerators of the duty cycle)"""

    @classmethod
    def from_tally(cls, t: TrialTally) -> TrialSummary:
        order = sorted(t.first_exception, key=lambda exc: t.first_exception[exc][0])
        rewards, phases = t.joined_values()
        return cls(started=t.started, completed=t.completed, unreadable=t.unreadable, rewards=rewards,
                   exceptions=Counter({exc: t.exceptions[exc] for exc in order}),
                   exception_example={exc: t.first_exception[exc][1] for exc in order},
                   turns_count=t.turns_count,
                   turns_mean=_partials_mean(t.turns_partials, t.turns_count),
                   phases=phases,
                   problems=[text for _, text in t.problems],
                   first_started_at=t.first_started_at, last_started_at=t.last_started_at,
                   last_recorded_start=t.last_recorded_start, prior_generation=t.prior_generation,
                   stop_reasons=Counter(t.stop_reasons),
                   stop_reason_example={key: f"{name}/result.json" for key, name in t.first_stop_reason.items()},
                   wall=tuple(t.wall), wall_s=t.wall_us / 1e6,
                   phase_in_wall_s={p: us / 1e6 for p, us in t.phase_in_wall_us.items()})


def _partials_mean(partials: list[float], count: int) -> float | None:
    """``math.fsum(partials) / count``; None without values or when the sum overflows (garbled)."""
    if not count:
        return None
    try:
        mean = math.fsum(partials) / count
    except (OverflowError, ValueError):
        return None
    return mean if math.isfinite(mean) else None


def _sample_outputs(summary: TrialSummary, trace_root: Path, sample: list[tuple[float, str]]) -> None:
    for start, name in sample:
        text, source = agent_output(trace_root / name)
        if text is None:
            continue
        summary.coherence_sampled += 1
        summary.coherence_samples.append((start if math.isfinite(start) else None, source, text[:COHERENCE_SAMPLE_CHARS]))


# ---------------------------------------------------------------- readers
PROCESS_MIN_TRIALS = 2000
"""Below this many trial directories they are read in the calling process (a fork costs more)."""
PROCESS_CHUNK = 256
"""Trial directories per unit of work handed to a reader."""
_MAX_CHUNKS = 8192
"""Chunk numbers travel as 4-byte tokens through one pipe written before the fork (64 KiB)."""


def list_trials(trace_root: Path) -> list[bytes]:
    """Directory names directly under ``trace_jobs/`` (symlinks excluded), in listing order, packed
    as NUL-joined chunks of PROCESS_CHUNK names (NUL never occurs in a file name)."""
    chunks: list[bytes] = []
    batch: list[bytes] = []
    try:
        with os.scandir(os.fsencode(trace_root)) as it:
            for entry in it:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                batch.append(entry.name)
                if len(batch) == PROCESS_CHUNK:
                    chunks.append(b"\0".join(batch))
                    batch = []
    except OSError:
        pass
    if batch:
        chunks.append(b"\0".join(batch))
    if len(chunks) > _MAX_CHUNKS:
        group = -(-len(chunks) // _MAX_CHUNKS)
        chunks = [b"\0".join(chunks[i:i + group]) for i in range(0, len(chunks), group)]
    return chunks


def _chunk_size(chunks: list[bytes]) -> int:
    return sum(c.count(b"\0") + 1 for c in chunks)


def _read_claimed(root: bytes, chunks: list[bytes], tokens: int, aliases: dict[str, str],
                  tally: TrialTally, on_chunk: Callable[[int, int], None] | None = None) -> None:
    """Read the chunks whose numbers this reader takes from the ``tokens`` pipe until it is empty.

    The pipe holds every chunk number as 4 bytes, written before any reader started, with every
    write end closed: a 4-byte read takes one whole number atomically, and EOF means all taken.
    ``on_chunk(read here, chunks in all)`` follows each chunk (a progress line), when given.
    """
    done = 0
    root_fd = open_root(root)
    try:
        while True:
            token = os.read(tokens, 4)
            if len(token) < 4:
                return
            chunk = int.from_bytes(token, "little")
            for dir_name in chunks[chunk].split(b"\0"):
                tally.add(read_trial(root, dir_name, aliases, root_fd))
            tally.seal(chunk)
            done += 1
            if on_chunk is not None:
                on_chunk(done, len(chunks))
    finally:
        close_root(root_fd)


def _reader_child(send, root: bytes, chunks: list[bytes], tokens: int, aliases: dict[str, str],
                  since: float | None, sample_size: int, after: Callable[[], Any] | None = None) -> None:
    """Read claimed trial chunks, then run ``after`` (more claimed work, see BackgroundSummary),
    then send ``(tally or None, after's result or None)`` once, so the parent never waits on a
    reader blocked in a send while it still has work."""
    gc.disable()        # a reader builds no reference cycles (see probes.bundle.collector_paused)
    try:
        tally: TrialTally | None = TrialTally(since, sample_size)
        try:
            _read_claimed(root, chunks, tokens, aliases, tally)
        except BaseException:  # noqa: BLE001 - the parent re-reads every trial in-process
            tally = None
        extra = None
        if after is not None:
            try:
                extra = after()
            except BaseException:  # noqa: BLE001 - the parent redoes whatever ``after`` did not return
                extra = None
        send.send((tally, extra))
    except BaseException:  # noqa: BLE001 - a failed send: the parent redoes everything in-process
        pass
    finally:
        send.close()


def _chunk_tokens(count: int) -> int:
    """The read end of a pipe holding the chunk numbers 0..count-1 as 4-byte tokens, its write end
    closed (the queue readers claim from: see ``_read_claimed``)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"".join(i.to_bytes(4, "little") for i in range(count)))
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


def _early_tally(params: Any, aliases: dict[str, str] | None,
                 pending: list[tuple[int, list[TrialRead]]]) -> TrialTally | None:
    """The tally of the chunks read so far, once the adopter sent ``(since, sample_size,
    aliases)``; None when its aliases are not the ones the reads used (the adopter rereads)."""
    since, sample_size, expected = params
    if aliases is None or expected != aliases:
        return None
    tally = TrialTally(since, sample_size)
    for chunk, reads in pending:
        for read in reads:
            tally.add(read)
        tally.seal(chunk)
    pending.clear()
    return tally


def _early_child(send, params, root: bytes, chunks: list[bytes], tokens: int) -> None:
    """The early reader (``EarlyTrials``): claim and read chunks from the first moment, keeping
    the reads of each chunk until the adopter's tally parameters arrive (polled between chunks),
    then tally as it reads. Sends ``(tally or None, None)`` once, as ``_reader_child`` does;
    exits without sending when ``params`` closes unsent (nobody adopted it)."""
    gc.disable()        # as in ``_reader_child``
    try:
        try:
            aliases: dict[str, str] | None = dict(packaged_yaml("trial_exceptions.yaml").get("message_aliases") or {})
        except Exception:  # noqa: BLE001 - the adopter reads every trial again in-process
            aliases = None
        pending: list[tuple[int, list[TrialRead]]] = []
        tally: TrialTally | None = None
        failed = aliases is None
        root_fd = open_root(root)       # closed with the process
        while not failed and len(token := os.read(tokens, 4)) == 4:
            chunk = int.from_bytes(token, "little")
            reads = [read_trial(root, name, aliases, root_fd) for name in chunks[chunk].split(b"\0")]
            if tally is None and params.poll():
                tally = _early_tally(params.recv(), aliases, pending)
                failed = tally is None
            if tally is None:
                pending.append((chunk, reads))
                continue
            for read in reads:
                tally.add(read)
            tally.seal(chunk)
        if tally is None and not failed:
            tally = _early_tally(params.recv(), aliases, pending)      # EOFError: nothing to send
        send.send((tally, None))
    except BaseException:  # noqa: BLE001 - the adopter rereads whatever this reader claimed
        pass
    finally:
        send.close()


class EarlyTrials:
    """A trial reader forked at the start of ``rlhealth diagnose``, before the diagnosis is
    imported and its rules loaded (a quarter second on one core, in which this reader already
    reads trials on the other), for the ``BackgroundSummary`` of the same ``trace_root`` to
    adopt as one of its readers. This is the one reader not started by ``BackgroundSummary``
    itself (see the module docstring).

    A tally needs ``since`` and the sample size, known only once the bundle's capture is read:
    the reader keeps the reads of the chunks it took until ``adopt`` sends them (what one reader
    reads in that time: a few thousand small records). ``discard()`` ends a reader nobody adopted
    (a no-op after adoption). ``started`` says whether a reader runs: the same conditions as
    ``BackgroundSummary``'s readers (Linux, no other thread, two CPUs or more,
    PROCESS_MIN_TRIALS directories).
    """

    def __init__(self, trace_root: Path):
        self.trace_root = Path(trace_root)
        self.chunks = list_trials(self.trace_root)
        self.tokens: int | None = None
        self._reader: tuple[Any, Any] | None = None
        self._params = None
        if cpus() < 2 or not may_fork() or _chunk_size(self.chunks) < PROCESS_MIN_TRIALS:
            return
        read_end = _chunk_tokens(len(self.chunks))
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        params_recv, params_send = ctx.Pipe(duplex=False)
        gc.freeze()
        try:
            proc = ctx.Process(target=_early_child, name="rlhealth-trials-early", daemon=True,
                               args=(send, params_recv, os.fsencode(self.trace_root), self.chunks, read_end))
            proc.start()
        except (OSError, ValueError, AssertionError):
            for end in (recv, send, params_recv, params_send):
                end.close()
            os.close(read_end)
            return
        finally:
            gc.unfreeze()
        send.close()
        params_recv.close()
        self.tokens, self._reader, self._params = read_end, (proc, recv), params_send

    @property
    def started(self) -> bool:
        return self._reader is not None

    def adopt(self, since: float | None, sample_size: int, aliases: dict[str, str]) -> tuple[Any, Any]:
        """Send the tally parameters; returns ``(process, result pipe)`` for the adopter to
        receive from and join as its own reader's. The adopter owns ``tokens`` from now on."""
        reader, params = self._reader, self._params
        self._reader = self._params = None
        self.tokens = None
        try:
            params.send((since, sample_size, dict(aliases)))
        except (OSError, ValueError):
            pass            # a reader that died: its result pipe gives EOF, the adopter rereads
        finally:
            params.close()
        return reader

    def discard(self) -> None:
        """End a reader nobody adopted (killed: what it read is not wanted)."""
        if self._reader is None:
            return
        proc, recv = self._reader
        self._reader = None
        self._params.close()
        self._params = None
        recv.close()
        os.close(self.tokens)
        self.tokens = None
        proc.terminate()
        proc.join()


class BackgroundSummary:
    """Trial summary read by forked processes while the caller scans the logs.

    The trial directories are listed here, then one reader process per CPU but one is forked;
    readers take chunks of directories from a shared queue. ``result()`` makes the caller a reader
    too (it takes what is left once its log scan is done), merges the readers' tallies and scores
    the coherence sample. It returns exactly what a sequential read returns; with fewer than
    PROCESS_MIN_TRIALS directories, without fork, with one CPU, in a process running other threads,
    or if a reader fails, it reads (again) in-process.

    ``after``: work a reader does once the trial chunks run out (the log files it claims, see
    ``probes.bundle``), run in the forked reader only; what it returns is in ``after_results``
    once ``result()`` returned (one entry per reader; None for a reader that failed). ``forked``
    says whether any reader runs (if not, ``after`` never runs).

    ``early``: an ``EarlyTrials`` reader of the same ``trace_root``, already reading; it is
    adopted as one of the readers (its listing and chunk queue are used), and a reader is forked
    beside it only to run ``after``. It never runs ``after`` itself (it was forked before that
    work existed).
    """

    def __init__(self, trace_root: Path, aliases: dict[str, str], sample_size: int, *,
                 since: float | None = None, workers: int = 4, after: Callable[[], Any] | None = None,
                 early: EarlyTrials | None = None):
        self._trace_root = trace_root
        self._root = os.fsencode(trace_root)
        self._aliases = aliases
        self._sample_size = sample_size
        self._newest: list[tuple[float, str]] = []
        self._since = since
        self._readers: list[tuple[Any, Any]] = []
        self._received: dict[int, Any] = {}
        """Messages taken early (``take_sent``), by the reader's place in ``_readers``."""
        self._tokens: int | None = None
        self.after_results: list[Any] = []
        self._on_chunk: Callable[[int, int], None] | None = None
        """Told (chunks read here, chunks in all) after each chunk this process reads (``result``)."""
        procs = min(workers, cpus())
        forks = procs - 1
        if early is not None and early.started and early.trace_root == Path(trace_root) and forks >= 1:
            # the early reader is one of the readers; another is forked only for ``after``
            self._chunks, self._tokens = early.chunks, early.tokens
            self._readers.append(early.adopt(since, sample_size, aliases))
            if after is None:
                forks -= 1
        else:
            self._chunks = list_trials(trace_root)
            if procs < 2 or not may_fork() or _chunk_size(self._chunks) < PROCESS_MIN_TRIALS:
                return
            self._tokens = _chunk_tokens(len(self._chunks))
        if forks < 1 or not may_fork():
            return
        ctx = multiprocessing.get_context("fork")
        gc.freeze()          # the readers never touch the caller's objects for garbage collection
        try:
            for _ in range(forks):
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_reader_child, name="rlhealth-trials", daemon=True,
                                   args=(send, self._root, self._chunks, self._tokens, aliases, since, sample_size, after))
                proc.start()
                send.close()
                self._readers.append((proc, recv))
        except (OSError, ValueError, AssertionError):   # AssertionError: a daemonic process has no children
            pass
        finally:
            gc.unfreeze()

    @property
    def forked(self) -> bool:
        return bool(self._readers)

    def _tally_in_process(self) -> TrialTally:
        on_chunk = self._on_chunk
        tally = TrialTally(self._since, self._sample_size)
        root_fd = open_root(self._root)
        try:
            for index, chunk in enumerate(self._chunks):
                for dir_name in chunk.split(b"\0"):
                    tally.add(read_trial(self._root, dir_name, self._aliases, root_fd))
                tally.seal(index)
                if on_chunk is not None:
                    on_chunk(index + 1, len(self._chunks))
        finally:
            close_root(root_fd)
        return tally

    def _tally_shared(self) -> TrialTally | None:
        """The caller's share of the queue merged with every reader's tally; None if one failed."""
        tally: TrialTally | None = TrialTally(self._since, self._sample_size)
        try:
            _read_claimed(self._root, self._chunks, self._tokens, self._aliases, tally, self._on_chunk)
        finally:
            os.close(self._tokens)
            self._tokens = None
        for place, (proc, recv) in enumerate(self._readers):
            message = self._received.pop(place, None) if place in self._received else self._receive(proc, recv)
            part, extra = message if isinstance(message, tuple) and len(message) == 2 else (None, None)
            self.after_results.append(extra)
            if isinstance(part, TrialTally) and tally is not None:
                tally.merge(part)
            else:
                tally = None
        self._readers = []
        return tally

    @staticmethod
    def _receive(proc, recv) -> Any:
        """A reader's one message (None: EOF from a dead reader, a torn or unloadable message);
        its pipe closed and the reader reaped after."""
        try:
            return recv.recv()
        except Exception:  # noqa: BLE001 - EOF (a dead reader), a torn or unloadable message
            return None
        finally:
            recv.close()
            reap(proc)

    def take_sent(self) -> None:
        """Receive now what a reader has begun to send (its pipe readable), without waiting for
        the others: the early reader sends its tally once the trial queue is empty, which the
        caller takes between its log files instead of after the last one."""
        for place, (proc, recv) in enumerate(self._readers):
            if place in self._received:
                continue
            try:
                ready = recv.poll()
            except (OSError, ValueError):
                ready = True          # the receive below gives None: the trials are read again
            if ready:
                self._received[place] = self._receive(proc, recv)

    def result(self, on_chunk: Callable[[int, int], None] | None = None, *, outputs: bool = True) -> TrialSummary:
        """The summary, with the agent outputs of the newest trials kept (``sample_size``) unless
        ``outputs`` is False (then ``read_outputs`` reads them, once the weight syncs are known);
        ``on_chunk(chunks read here, chunks in all)`` after each chunk this process reads."""
        self._on_chunk = on_chunk
        tally = self._tally_shared() if self._tokens is not None else None
        if tally is None:
            tally = self._tally_in_process()
        summary = TrialSummary.from_tally(tally)
        self._newest = tally.newest_sample()
        if outputs:
            self.read_outputs(summary)
        return summary

    def read_outputs(self, summary: TrialSummary, select: tuple[int, int, list[float]] | None = None) -> None:
        """Read the coherence sample's agent outputs into ``summary``: the newest trials kept, or,
        with ``select = (size, per_step, sync_times)``, ``per_step_sample`` of them."""
        sample = self._newest
        if select is not None:
            sample = per_step_sample(sample, select[2], select[0], select[1])
        _sample_outputs(summary, self._trace_root, sample)


def weight_syncs(lines, group_s: float) -> list[tuple[float, str, int, str]]:
    """One ``(ts, source, line, text)`` per weight sync, oldest first: the dated weight-broadcast
    lines sorted by time, a line less than ``group_s`` after the previous one belonging to the
    same sync (every engine logs its own broadcast line); each sync is its first line."""
    syncs: list[tuple[float, str, int, str]] = []
    last = None
    for entry in sorted(lines):
        if last is None or entry[0] - last >= group_s:
            syncs.append(entry)
        last = entry[0]
    return syncs


def per_step_sample(pool: list[tuple[float, str]], sync_times: list[float], size: int,
                    per_step: int) -> list[tuple[float, str]]:
    """The coherence sample from the newest trials kept (``pool``, oldest first, ``(start or
    -inf, name)``): the newest ``per_step`` of each step (the policy version between two weight
    syncs its trial started under), newest step first, until ``size``; fewer steps than that fill
    up with the newest trials left. Without a sync it is the newest ``size``. Oldest first."""
    if len(pool) <= size:
        return list(pool)
    steps: dict[int, list[tuple[float, str]]] = {}
    for entry in pool:
        step = bisect.bisect_right(sync_times, entry[0]) if math.isfinite(entry[0]) else -1
        steps.setdefault(step, []).append(entry)
    chosen: list[tuple[float, str]] = []
    for step in sorted(steps, reverse=True):
        chosen += steps[step][-per_step:][::-1]
        if len(chosen) >= size:
            break
    taken = set(chosen[:size])
    rest = [entry for entry in reversed(pool) if entry not in taken]
    return sorted(chosen[:size] + rest[:max(0, size - len(taken))])


def summarize_trials(trace_root: Path, aliases: dict[str, str], sample_size: int,
                     workers: int = 4, since: float | None = None) -> TrialSummary:
    """Summarize trials; those started before ``since`` (an earlier attempt's generation) are
    only counted in ``prior_generation``, never mixed into the current attempt's statistics.
    ``workers``: processes reading (1 = this process only)."""
    return BackgroundSummary(trace_root, aliases, sample_size, since=since, workers=workers).result()
