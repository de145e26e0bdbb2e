"""Agentic trial artifacts under ``trace_jobs/`` (marin-artifacts §3, log-formats §7).

A trial directory with ``result.json`` is completed; one with only ``config.json`` (or other
files) is started. From each ``result.json``: reward (``verifier_result.rewards.reward``),
exception type, turns (``agent_result.metadata.n_episodes``), phase timings. A sample of
completed trials is read further for agent output (ATIF ``agent/trajectory.json``) and
scored for coherence (token salad, repetition loops, empty output).
Trials are summarized as they are read; nothing per trial is kept beyond small numbers.
"""
from __future__ import annotations

import functools

import json
import multiprocessing
import os
import re
import sys
import unicodedata
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlhealth.probes.parse.timestamps import parse_iso

RESULT_FULL_READ_BYTES = 16 * 1024 * 1024
RESULT_EDGE_BYTES = 1024 * 1024
TRAJECTORY_MAX_BYTES = 8 * 1024 * 1024
EXCEPTION_HEAD_BYTES = 16 * 1024
PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")

_REWARD_RE = re.compile(rb'"rewards"\s*:\s*\{[^{}]*?"reward"\s*:\s*(-?[0-9.eE+-]+|null)')
_EXC_TYPE_RE = re.compile(rb'"exception_type"\s*:\s*"([A-Za-z0-9_.]+)"')
_EPISODES_RE = re.compile(rb'"n_episodes"\s*:\s*([0-9]+)')
# Where a trial records why its agent stopped, first found wins: the agent's own metadata
# (Terminus / OpenCode style stop, finish, exit or termination reason) or terminal-bench's
# ``failure_mode``. Without one, the exception type stands for the stop reason (the observer
# maps both through rules/trial_exceptions.yaml ``stop_reasons``).
STOP_REASON_FIELDS = (("agent_result", "metadata", "stop_reason"), ("agent_result", "metadata", "finish_reason"),
                      ("agent_result", "metadata", "exit_reason"), ("agent_result", "metadata", "termination_reason"),
                      ("agent_result", "stop_reason"), ("stop_reason",), ("failure_mode",))
_STOP_REASON_RE = re.compile(rb'"(?:stop_reason|finish_reason|exit_reason|termination_reason|failure_mode)"\s*:\s*"([^"]{1,80})"')
_EXC_NAME_RE = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit))\b")


@dataclass
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


@dataclass
class TrialSummary:
    started: int = 0
    completed: int = 0
    unreadable: int = 0
    rewards: list[float] = field(default_factory=list)
    exceptions: Counter = field(default_factory=Counter)
    exception_example: dict[str, str] = field(default_factory=dict)
    turns: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    problems: list[str] = field(default_factory=list)
    first_started_at: float | None = None
    last_started_at: float | None = None
    last_recorded_start: float | None = None
    """Newest ``started_at`` written in a result.json (never a file's mtime: deterministic)."""
    coherence_sampled: int = 0
    incoherent: int = 0
    incoherent_example: tuple[str, str] | None = None
    coherent_example: tuple[str, str] | None = None
    prior_generation: int = 0
    stop_reasons: Counter = field(default_factory=Counter)
    """(stop-reason field value or None, exception type or None) -> finished trials."""
    stop_reason_example: dict[tuple, str] = field(default_factory=dict)


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _read_result(path: Path) -> tuple[dict | None, bytes | None, str | None]:
    """Parsed JSON (small files) or raw head+tail bytes (huge files); or a problem string."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size <= RESULT_FULL_READ_BYTES:
                data = handle.read()
            else:
                head = handle.read(RESULT_EDGE_BYTES)
                handle.seek(max(0, size - RESULT_EDGE_BYTES))
                return None, head + b"\n" + handle.read(), None
    except OSError as exc:
        return None, None, f"unreadable ({exc.strerror or exc})"
    if not data.strip():
        return None, None, "empty result.json"
    try:
        obj = json.loads(data)
    except ValueError as exc:
        return None, data[-RESULT_EDGE_BYTES:], f"malformed result.json ({str(exc)[:80]})"
    if not isinstance(obj, dict):
        return None, None, "result.json is not an object"
    return obj, None, None


def _duration(block: Any) -> float | None:
    if not isinstance(block, dict):
        return None
    a, b = parse_iso(block.get("started_at")), parse_iso(block.get("finished_at"))
    if a is None or b is None or b < a:
        return None
    return b - a


def read_trial(trial_dir: Path, aliases: dict[str, str]) -> TrialRead:
    name = trial_dir.name
    result = trial_dir / "result.json"
    if not result.exists():
        return TrialRead(name=name, completed=False, started_at=_config_time(trial_dir))
    obj, raw, problem = _read_result(result)
    read = TrialRead(name=name, completed=True, problem=problem)
    if obj is not None:
        reward = _dig(obj, "verifier_result", "rewards", "reward")
        if reward is None:
            reward = _dig(obj, "result", "reward") if isinstance(obj.get("result"), dict) else obj.get("reward")
        read.reward = float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
        exc = _dig(obj, "exception_info", "exception_type") or _dig(obj, "result", "error_type") or None
        read.exception = str(exc) if exc else None
        turns = _dig(obj, "agent_result", "metadata", "n_episodes")
        read.turns = float(turns) if isinstance(turns, (int, float)) else None
        stop = next((v for v in (_dig(obj, *path) for path in STOP_REASON_FIELDS) if isinstance(v, str) and v.strip()), None)
        read.stop_reason = stop.strip()[:80] if stop else None
        for phase in PHASES:
            d = _duration(obj.get(phase))
            if d is not None:
                read.phases[phase] = d
        read.started_at = parse_iso(obj.get("started_at"))
    elif raw is not None:
        m = _REWARD_RE.search(raw)
        if m and m.group(1) != b"null":
            try:
                read.reward = float(m.group(1))
            except ValueError:
                pass
        m = _EXC_TYPE_RE.search(raw)
        read.exception = m.group(1).decode() if m else None
        m = _EPISODES_RE.search(raw)
        read.turns = float(m.group(1)) if m else None
        m = _STOP_REASON_RE.search(raw)
        read.stop_reason = m.group(1).decode("utf-8", "replace") if m else None
    exc_txt = trial_dir / "exception.txt"
    if exc_txt.exists() and (read.exception is None or read.exception in ("RuntimeError", "Exception")):
        try:
            with open(exc_txt, "rb") as handle:
                head = handle.read(EXCEPTION_HEAD_BYTES).decode("utf-8", "replace")
        except OSError:
            head = ""
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
    elif read.exception and exc_txt.exists():
        read.exception_source = f"{name}/exception.txt"
    return read


def _config_time(trial_dir: Path) -> float | None:
    try:
        return (trial_dir / "config.json").stat().st_mtime if (trial_dir / "config.json").exists() else None
    except OSError:
        return None


# ---------------------------------------------------------------- coherence
_FUNCTION_WORDS = frozenset("""
the a an to of and or is are was be in on at for with it this that as by from not no yes i you we
he she they my your our can will should would do does did have has had if then else so but
let me first now next check run file test tests code function return import def class print
self none true false null error fix use using need will all any there here what which when how
""".split())


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    if ch.isascii():
        return "latin"
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "other"
    return name.split(" ")[0]


@functools.lru_cache(maxsize=1)
def coherence_limits() -> dict[str, float]:
    """rules/coherence.yaml: the classifier's limits (data, not code)."""
    import yaml
    from importlib import resources
    doc = yaml.safe_load(resources.files("rlhealth.rules").joinpath("coherence.yaml").read_text(encoding="utf-8"))
    return {k: float(v) for k, v in doc.items() if k != "version"}


def coherence_problem(text: str) -> str | None:
    """Why ``text`` reads as incoherent agent output, or None if it looks coherent.

    Flags: empty output; token salad (many switches between writing systems inside
    words, or almost no common function/code words); repetition loops. Limits: rules/coherence.yaml.
    """
    limits = coherence_limits()
    text = (text or "").strip()
    if not text:
        return "empty output"
    sample = text[:int(limits["sample_chars"])]
    tokens = re.findall(r"\S+", sample.lower())
    if len(tokens) < limits["min_tokens"]:
        return None
    switches, prev, letters = 0, None, 0
    for ch in sample:
        s = _script(ch)
        if s is None:
            continue
        letters += 1
        if prev is not None and s != prev:
            switches += 1
        prev = s
    if letters and switches / letters > limits["script_switch_max_fraction"]:
        return f"token salad ({switches} writing-system switches in {letters} letters)"
    words = [re.sub(r"[^\w]", "", t) for t in tokens]
    common = sum(1 for w in words if w in _FUNCTION_WORDS)
    if len(tokens) >= limits["common_words_min_tokens"] and common / len(tokens) < limits["common_word_min_fraction"] \
            and not re.search(r"[{}()=;]", sample):
        return f"token salad ({common}/{len(tokens)} common words)"
    trigrams = Counter(zip(tokens, tokens[1:], tokens[2:]))
    if len(tokens) >= limits["repetition_min_tokens"]:
        top, count = trigrams.most_common(1)[0]
        if count * 3 / len(tokens) > limits["repetition_max_fraction"]:
            return f"repetition loop ({' '.join(top)!r} x{count})"
    return None


def agent_output(trial_dir: Path) -> tuple[str | None, str | None]:
    """(joined agent messages, relative source) from the ATIF trajectory, if readable."""
    path = trial_dir / "agent" / "trajectory.json"
    try:
        if not path.exists() or path.stat().st_size > TRAJECTORY_MAX_BYTES:
            return None, None
        obj = json.loads(path.read_bytes())
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
        for call in step.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("arguments"), (str, dict)):
                args = call["arguments"]
                parts.append(args if isinstance(args, str) else json.dumps(args, sort_keys=True))
    return "\n".join(parts), f"{trial_dir.name}/agent/trajectory.json"


def trial_dirs(trace_root: Path) -> list[Path]:
    """Trial directories directly under ``trace_jobs/`` (sorted by name)."""
    try:
        with os.scandir(trace_root) as it:
            return sorted((Path(e.path) for e in it if e.is_dir(follow_symlinks=False)), key=lambda p: p.name)
    except OSError:
        return []


PROCESS_MIN_TRIALS = 1000
"""Below this many trial directories they are read in this process."""
PROCESS_CHUNK = 256


def _read_chunk(job: tuple[list[Path], dict[str, str]]) -> list[TrialRead]:
    dirs, aliases = job
    return [read_trial(d, aliases) for d in dirs]


def _read_trials(dirs: list[Path], aliases: dict[str, str], workers: int):
    """``read_trial`` of every directory, in order.

    Many small files are read by up to ``workers`` forked processes (one per CPU): measured on
    2 cores with 20,000 trials, threads were 2.5x slower than one thread (the per-file work is
    short syscalls plus JSON parsing under the GIL) and two processes 1.5-2x faster. Without
    fork (macOS/Windows) or with one CPU, or if a worker dies, the rest is read here.
    """
    procs = min(workers, os.cpu_count() or 1)
    chunks = [dirs[i:i + PROCESS_CHUNK] for i in range(0, len(dirs), PROCESS_CHUNK)]
    done = 0
    if procs > 1 and len(dirs) >= PROCESS_MIN_TRIALS and sys.platform.startswith("linux"):
        try:
            with ProcessPoolExecutor(max_workers=procs, mp_context=multiprocessing.get_context("fork")) as pool:
                for reads in pool.map(_read_chunk, [(c, aliases) for c in chunks]):
                    yield from reads
                    done += 1
        except (BrokenProcessPool, OSError):
            pass
    for chunk in chunks[done:]:
        for d in chunk:
            yield read_trial(d, aliases)


def summarize_trials(trace_root: Path, aliases: dict[str, str], sample_size: int,
                     workers: int = 4, since: float | None = None) -> TrialSummary:
    """Summarize trials; those started before ``since`` (an earlier attempt's generation) are
    only counted in ``prior_generation``, never mixed into the current attempt's statistics."""
    summary = TrialSummary()
    dirs = trial_dirs(trace_root)
    completed_names: list[tuple[float, str]] = []
    for read in _read_trials(dirs, aliases, workers):
        if since is not None and read.started_at is not None and read.started_at < since:
            summary.prior_generation += 1
            continue
        summary.started += 1
        if read.started_at is not None:
            if summary.first_started_at is None or read.started_at < summary.first_started_at:
                summary.first_started_at = read.started_at
            if summary.last_started_at is None or read.started_at > summary.last_started_at:
                summary.last_started_at = read.started_at
        if not read.completed:
            continue
        if read.started_at is not None and (summary.last_recorded_start is None or read.started_at > summary.last_recorded_start):
            summary.last_recorded_start = read.started_at
        summary.completed += 1
        if read.problem and read.reward is None and read.exception is None:
            summary.unreadable += 1
            if len(summary.problems) < 5:
                summary.problems.append(f"trace_jobs/{read.name}/result.json: {read.problem}")
            continue
        if read.reward is not None:
            summary.rewards.append(read.reward)
        if read.exception:
            summary.exceptions[read.exception] += 1
            summary.exception_example.setdefault(read.exception, read.exception_source or f"{read.name}/result.json")
        stop_key = (read.stop_reason, read.exception)
        summary.stop_reasons[stop_key] += 1
        summary.stop_reason_example.setdefault(stop_key, f"{read.name}/result.json")
        if read.turns is not None:
            summary.turns.append(read.turns)
        for phase, value in read.phases.items():
            summary.phases[phase].append(value)
        completed_names.append((read.started_at if read.started_at is not None else float("-inf"), read.name))
    if completed_names and sample_size > 0:
        # the newest completed trials (by start time, then name): the policy being served now
        newest = [name for _, name in sorted(completed_names)[-sample_size:]]
        for name in newest:
            trial = trace_root / name
            text, source = agent_output(trial)
            if text is None:
                continue
            summary.coherence_sampled += 1
            problem = coherence_problem(text)
            snippet = " ".join(text.split())[:200]
            if problem:
                summary.incoherent += 1
                if summary.incoherent_example is None:
                    summary.incoherent_example = (source, f"{problem}: {snippet}")
            elif summary.coherent_example is None:
                summary.coherent_example = (source, snippet)
    return summary


# Rough costs on one core, only used to decide how to share the CPUs (never affects results).
_TRIAL_COST_S = 80e-6          # reading + parsing one trial directory
_LOG_COST_S_PER_BYTE = 2.2e-9  # scanning + routing one byte of log


def _summarize_child(send, trace_root: Path, aliases: dict[str, str], sample_size: int, workers: int,
                     since: float | None, log_bytes: int) -> None:
    try:
        n = len(trial_dirs(trace_root))
        if n * _TRIAL_COST_S < 1.5 * log_bytes * _LOG_COST_S_PER_BYTE:
            workers = 1        # the parent is busy scanning logs on the other core
        send.send(summarize_trials(trace_root, aliases, sample_size, workers=workers, since=since))
    except BaseException:  # noqa: BLE001 - the parent recomputes in-process
        pass
    finally:
        send.close()


class BackgroundSummary:
    """``summarize_trials`` in a forked process while the caller scans the logs.

    ``result()`` returns exactly what ``summarize_trials(trace_root, aliases, sample_size,
    since=since)`` returns; without fork, with one CPU, or if the child fails, it computes it
    in-process then.
    """

    def __init__(self, trace_root: Path, aliases: dict[str, str], sample_size: int, *,
                 since: float | None = None, workers: int = 4, log_bytes: int = 0):
        self._args = (trace_root, aliases, sample_size)
        self._since = since
        self._workers = workers
        self._proc = None
        self._recv = None
        if not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2:
            return
        try:
            ctx = multiprocessing.get_context("fork")
            self._recv, send = ctx.Pipe(duplex=False)
            self._proc = ctx.Process(target=_summarize_child, name="rlhealth-trials",
                                     args=(send, trace_root, aliases, sample_size, workers, since, log_bytes))
            self._proc.start()
            send.close()
        except (OSError, ValueError):
            self._proc = None

    def result(self) -> TrialSummary:
        if self._proc is not None:
            summary = None
            try:
                summary = self._recv.recv()
            except (EOFError, OSError, ValueError, TypeError, AttributeError, ImportError):
                summary = None
            finally:
                self._recv.close()
                self._proc.join()
                self._proc = None
            if isinstance(summary, TrialSummary):
                return summary
        trace_root, aliases, sample_size = self._args
        return summarize_trials(trace_root, aliases, sample_size, workers=self._workers, since=self._since)
