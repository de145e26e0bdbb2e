"""Log events: failures read by their shape, whatever their wording.

A Python traceback (with its chained causes) is one event; so is an exception line without a
traceback, a logged error naming an exception, a C++ abort, a fatal signal, a non-zero exit status,
a kernel Xid, a Slurm daemon error or cancellation banner, an NCCL WARN line, a GPU runtime library's
statement of an error (``CUDA error: ...``, ``NCCL error in: ...``) on a line naming no exception;
and records that state their own severity, graded by data: a glog/c10/Ray C++ severity header by
the source file it names, a kernel OOM-killer or NVIDIA driver record, a Kubernetes event or
container state by its reason, a Ray worker's exit type. An ERROR log line without an exception is
no event by itself; directly before an exception of its process it is that event's headline. Line
prefixes (Ray actor, torchrun rank, container timestamps, compose services, loguru, glog/c10, vLLM
and Python logging, Slurm daemons and slurmd, kernel syslog/dmesg, pytest failure lines, the Iris
finelog) are peeled before a line is read, and give the event its process.

Every event carries its time (None: undated), its process and role, its thread (a traceback after
``Exception in thread NAME:`` is a background thread's) and its grade: ``primary`` (a cause),
``consequence`` (another process died, a signal from outside, a teardown) or ``note`` (an NCCL
WARN, a telemetry library's background exception). Grading data: ``rules/event_shapes.yaml``.
Signatures only name events (``names``); they never decide whether a line is an event.

The bundle reader calls ``event_at`` on each line its scan database flags with ``x_event``
(``EVENT_TRIGGER``) and hands it the lines after it; ``read_events`` does the same over a list of
lines (tests, the real-wording corpus).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Iterable, Iterator

from rlhealth.packaged import packaged_yaml

_SEVERITY_HEADER_LEAD = r"(?:^|[\[\]:\s])"
_SEVERITY_HEADER = _SEVERITY_HEADER_LEAD + r"[EWFC][0-9]{3,4} [0-9]{2}:[0-9]{2}"
"""A glog/c10/Ray C++ header of level E, W, F or C: ``E0801 05:20:04``, ``[W801 05:20:04``."""
_TRIGGER_BRANCHES = (
    r"Traceback \(most recent call last\)|[A-Za-z0-9_](?:Error|Exception|Exit|Interrupt)(?:\b|\()|terminate called|"
    r"what\(\):|Fatal Python error|Segmentation fault|(?:Aborted|Bus error)(?: \(|\r?\n|$)|received signal|(?:^|[\s\]])Exception: |\(core dumped\)|[Ee]xit(?:ed)?(?: with)?(?: exit)? ?(?:[Cc]ode|[Ss]tatus)|exitcode|"
    r"[Rr]eturn code|Signals\.SIG|SIG(?:SEGV|ABRT|BUS|FPE|ILL)\b|NVRM: Xid|NCCL WARN|slurmstepd[^:]{0,40}: error|"
    r"(?:srun|salloc|sbatch): error|\[[0-9]{1,12}\.(?:[0-9]{1,6}|batch|extern|interactive)\] error:|Check failed|\b(?:CRITICAL|FATAL)\b|CUDA error: |cuDNN error: |NCCL error(?: in)?: ",
    # records that carry their own severity: glog/c10 and Ray C++ headers, vLLM and Python logging
    # levels, pytest's failure lines, kernel records, Kubernetes events, Ray worker exits, Slurm banners
    # (a glog F header at the start of a line, indented or not, is one of these headers)
    _SEVERITY_HEADER,
    r"\[[EW] [^\]\s]{1,200}:[0-9]|[0-9] [EFC] [0-9]+ [0-9]+\]|"
    r"(?:^|\n)[EF] [\w./-]{1,200}:[0-9]+\]|(?:^|\n|\] )E {2,}\S|NVRM: |oom-kill|[Oo]ut of memory: Kill|"
    r"Killed process [0-9]|\bReason:\s*[A-Z]|\bWarning\s{2,}[A-Z]|event for \S+: \{|orker exit type: [A-Z]|"
    r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT",
)
EVENT_TRIGGER = "|".join(_TRIGGER_BRANCHES)
"""What a line must contain to be read for an event (the pattern keyed ``x_event``)."""
EVENT_SCAN_EXPRESSIONS = tuple(
    ["|".join(b for b in _TRIGGER_BRANCHES if b is not _SEVERITY_HEADER)]
    + [_SEVERITY_HEADER_LEAD + level + digit + r"[0-9]{2,3} [0-9]{2}:[0-9]{2}" for level in "EWFC" for digit in "0123456789"])
"""``EVENT_TRIGGER`` as hyperscan scans for it: the same lines matched, by expressions it scans
faster. A header's level letter and first digit are spelled out (40 expressions), so hyperscan
looks for those two-byte literals, which are rare, instead of running the header's character
classes over every byte (the header branches were most of the trigger's cost, and the trigger a
third of the scan). The ``Scanner`` compiles them in the place of ``EVENT_TRIGGER`` under its key
(``Pattern.parts``); tests/test_scan_equivalence.py checks the lines keyed are the same."""

MAX_TRACEBACK_LINES = 400
"""Lines after a traceback header read to find its exception line(s)."""
MAX_TRACEBACK_BYTES = 1024 * 1024
MAX_MESSAGE_CHARS = 2000
"""An event's message is cut here (the quoted line is cut by the report at 500 characters)."""
MAX_PEEL = 8
"""Prefixes peeled from one line at most."""

LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARNING", "WARN": "WARNING", "ERROR": "ERROR",
          "CRITICAL": "CRITICAL", "FATAL": "FATAL", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL", "C": "FATAL",
          "TRACE": "DEBUG", "SUCCESS": "INFO"}
_LEVEL = r"(?P<level>TRACE|DEBUG|INFO|SUCCESS|WARNING|WARN|ERROR|CRITICAL|FATAL)"

# Each prefix pattern: (regex, what its named groups give). Tried in order, repeatedly.
_PREFIXES: tuple[re.Pattern, ...] = tuple(re.compile(p) for p in (
    # container runtime timestamp (docker --timestamps, kubectl logs --timestamps)
    r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})) ",
    # loguru: "2026-05-12 08:01:39.331 | ERROR    | module:function:12 - "
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\s*\|\s*" + _LEVEL + r"\s*\|\s*\S*\s+-\s",
    # Ray's C++ core: "[2024-02-27 10:01:35,439 E 73667 73667] logging.cc:361: ", "... E 395 395] (raylet) node_manager.cc:3049: "
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d+) (?P<glog>[IWEFC]) \d+ \d+\] (?:\([^()]{1,100}\) )?"
    r"(?:(?P<component>[\w./-]{1,200}):\d+: )?",
    # Python logging and friends: "[2026-05-12 08:01:39,331] ", "2026-05-12 08:01:39,331 - name - ERROR - "
    r"^\[?(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\]?(?: ?[-|:,] ?| )",
    # kernel log: syslog "May 27 16:50:10 host kernel: ", dmesg "[ 1843.308145] ", dmesg -T "[Sun Mar 30 08:24:00 2025] "
    r"^(?P<ts>[A-Z][a-z]{2} [ \d]?\d \d{2}:\d{2}:\d{2}) \S{1,100} kernel: (?P<kernel>)",
    r"^\[\s{0,12}\d{1,10}\.\d{3,9}\]\s?(?P<kernel>)",
    r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]?\d \d{2}:\d{2}:\d{2} \d{4}\]\s?(?P<kernel>)",
    # slurmd's own log: "[2020-12-14T09:43:55.500] [63532.0] " (after its time is peeled)
    r"^\[(?P<step>\d{1,12}\.(?:\d{1,6}|batch|extern|interactive))\] ",
    # compose / service prefix: "svc-1  | "
    r"^(?P<service>[A-Za-z0-9][A-Za-z0-9_.-]{0,62})\s+\|\s?",
    # Iris finelog: "task=/user/job/0 | "
    r"^task=(?P<task>\S{1,300}) \|\s?",
    # Ray actor / process prefix: "(FSDPPolicyWorker pid=5120, ip=10.0.5.13) ", "(raylet) "
    r"^\((?P<actor>[^()]{1,200})\)\s?",
    # torchrun rank: "[rank3]: ", "[Rank 3]: "
    r"^\[(?:[Rr]ank ?)(?P<rank>\d{1,6})\]:\s?",
    # a yearless date and clock: "06/26 18:54:31 "
    r"^\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})? (?=\S)",
    # a process id or a wall clock before the rest: "[80746] [rank0]:", "18:11:06.680 [rank4]:"
    r"^(?:\[\d{1,9}\]|\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?) (?=\[)",
    # glog / c10: "[E1025 12:00:00.123456 123 file.cpp:12] ", "E1025 12:00:00.123456  123 file.cpp:12] "
    r"^\[?(?P<glog>[IWEF])\d{3,4} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+(?:\d+\s+)?(?P<component>[^\]\s]{1,200}):\d+\]\s?",
    # c10 short form: "[E ProcessGroupNCCL.cpp:1316] ", "[W socket.cpp:464] "
    r"^\[(?P<glog>[IWEF]) (?P<component>[^\]\s]{1,200}):\d+\]\s?",
    # glog without a time: "F tensorflow/stream_executor/lib/statusor.cc:34] "
    r"^(?P<glog>[IWEF]) (?P<component>[\w./-]{1,200}):\d+\] ",
    # pytest's failure report: "E           SomeError: message"
    r"^(?P<glog>E) {2,}(?=\S)",
    # vLLM: "ERROR 03-13 06:55:20 [async_llm.py:710] ", "ERROR 06-22 20:16:34 async_llm_engine.py:52] "
    r"^" + _LEVEL + r" \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? (?:\[[^\]]{1,200}\]|\S{1,200}:\d+\])\s?",
    # Slurm daemons and client
    r"^(?P<daemon>srun|slurmstepd(?:-[\w.-]{1,100})?|sbatch|salloc)(?:\[\d+\])?: ",
    # a logger name before the level: "root - ERROR - ", "myapp.module:ERROR: "
    r"^[\w.]{1,100} ?[-:] ?" + _LEVEL + r" ?[-:] ",
    # a level alone: "ERROR: ", "[ERROR] ", "ERROR ", "CRITICAL:root:"
    r"^\[?" + _LEVEL + r"\]?(?::[\w.]{0,100})?(?:: ?| )",
))


class Peeled:
    """A line without its prefixes: ``body``, the strongest ``level`` a prefix stated, the
    ``process`` key (Ray actor, torchrun rank or service), the Slurm ``daemon``, a ``ts_text``."""
    __slots__ = ("body", "level", "process", "rank", "daemon", "ts_text", "actor", "prefix_len", "clean", "component",
                 "header", "record_level")

    def __init__(self, body: str, level: str | None, process: str | None, rank: int | None,
                 daemon: str | None, ts_text: str | None, actor: str | None):
        self.body, self.level, self.process, self.rank = body, level, process, rank
        self.daemon, self.ts_text, self.actor = daemon, ts_text, actor
        self.prefix_len = 0
        self.component: str | None = None
        """The source file a severity header names (``ProcessGroupNCCL.cpp``, ``node_manager.cc``)."""
        self.header: str | None = None
        """The prefix that stated the line's level: ``glog`` (glog/c10/Ray C++ letter) or ``logging``."""
        self.record_level: str | None = None
        """The level of the innermost glog/c10/Ray C++ header (the record's own, whatever wraps it)."""

    def __repr__(self) -> str:
        return f"Peeled(body={self.body!r}, level={self.level!r}, process={self.process!r})"


def peel(text: str) -> Peeled:
    """``text`` without every line prefix it carries (see the module doc), repeatedly."""
    body = text.rstrip("\r\n")
    if "\x1b" in body:
        body = _ANSI.sub("", body)
    original = body
    time_end = None
    level = process = daemon = ts_text = actor = component = header = record_level = None
    rank = None
    for _ in range(MAX_PEEL):
        for rx in _PREFIXES:
            m = rx.match(body)
            if m is None or m.end() == 0:
                continue
            groups = m.groupdict()
            if groups.get("ts") and ts_text is None:
                ts_text = groups["ts"]
            if time_end is None and (groups.get("ts") or groups.get("glog") or (groups.get("level") and "-" in m.group(0)[:12])):
                time_end = len(original) - len(body) + m.end()
            found = groups.get("level") or groups.get("glog")
            if found:
                level = _stronger(level, LEVELS[found])
                if groups.get("glog"):
                    header, record_level = "glog", LEVELS[found]     # the innermost header is the record's
                    named_file = groups.get("component")
                    component = named_file.rsplit("/", 1)[-1] if named_file else None
                elif header is None:
                    header = "logging"
            if groups.get("kernel") is not None:
                daemon = "kernel"
            if groups.get("step") is not None:
                daemon = "slurmd"
            if groups.get("service") is not None:
                if process is None:
                    process = groups["service"]
            if groups.get("actor") is not None:
                actor = groups["actor"] if actor is None else actor
                process = groups["actor"] if process is None else process + " " + groups["actor"]
            if groups.get("rank") is not None:
                rank = int(groups["rank"])
                process = f"rank{rank}" if process is None else process + f" rank{rank}"
            if groups.get("daemon") is not None:
                daemon = groups["daemon"].split("-", 1)[0]
            body = body[m.end():]
            break
        else:
            break
    peeled = Peeled(body, level, process, rank, daemon, ts_text, actor)
    peeled.component, peeled.header, peeled.record_level = component, header, record_level
    peeled.prefix_len = time_end or 0
    peeled.clean = original
    return peeled


def line_time(text: str, timestamp, reference_epoch: float | None) -> float | None:
    """A line's time: the one its outermost timed prefix states (the log record's own), else any
    on the line."""
    p = peel(text)
    if p.prefix_len:
        ts = timestamp(p.clean[:p.prefix_len], reference_epoch)
        if ts is not None:
            return ts
    return timestamp(text, reference_epoch)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_SEVERITY = {"DEBUG": 0, "INFO": 1, "WARNING": 2, "ERROR": 3, "CRITICAL": 4, "FATAL": 4}


def _stronger(a: str | None, b: str) -> str:
    return b if a is None or _SEVERITY[b] > _SEVERITY[a] else a


# ------------------------------------------------------------------------------- line shapes
_TYPE = r"(?:[A-Za-z_][A-Za-z0-9_]*\.){0,12}[A-Za-z_][A-Za-z0-9_]*(?:\([A-Za-z0-9_.]{1,200}\))?"
_EXC_IN_TRACEBACK = re.compile(r"^(?P<type>" + _TYPE + r")(?::\s?(?P<msg>.*))?$")
_ERRORISH = re.compile(r"(?:Error|Exception|Exit|Interrupt|Failure|Fault|Timeout|Abort|Exceeded|Died|Unavailable|NotFound)$")
_GENERIC_BARE = frozenset({"Error", "Exception", "Warning", "Failure", "Timeout", "Abort", "Exit", "Interrupt", "Fault"})
_EXC_TOKEN = re.compile(r"(?<![A-Za-z0-9_.])(?P<type>(?:[A-Za-z_][A-Za-z0-9_]*\.){0,12}[A-Z][A-Za-z0-9_]*(?:Error|Exception))"
                        r"(?![A-Za-z0-9_])(?:\([^)]{0,200}\))?(?::\s?(?P<msg>.*))?")
_TRACEBACK = "Traceback (most recent call last)"
_CHAIN_MARKERS = ("The above exception was the direct cause", "During handling of the above exception")
_THREAD_RE = re.compile(r"^Exception (?:ignored )?in thread (?P<name>.{1,200}?):?\s*$")
_FRAME_RE = re.compile(r'^\s+File "(?P<path>[^"]{1,1000})", line \d+')
_TERMINATE_RE = re.compile(r"terminate called (?:after throwing an instance of '(?P<type>[^']{1,300})'|(?P<other>without an active exception|recursively))")
_WHAT_RE = re.compile(r"^\s*what\(\):\s*(?P<msg>.*)$")
_FATAL_PY_RE = re.compile(r"^Fatal Python error: (?P<msg>.*)$")
_SIGNAL_LINE_RE = re.compile(
    r"(?:^(?P<segv>Segmentation fault)|(?P<abrt>^Aborted)|(?P<bus>^Bus error)|(?:^|\s)\*\*\* (?P<star>SIG[A-Z]{2,6})\b|"
    r"received signal (?P<recv>SIG[A-Z]{2,6}|\d{1,2})|[Ss]ignal (?P<num>\d{1,2}) \((?P<name>SIG[A-Z]{2,6})\) received)")
_EXIT_RES = (
    re.compile(r"\bexitcode\s*:\s*(?P<code>-?\d{1,4})\b"),
    re.compile(r"\b(?:exit|exited)(?: with)?(?: exit)? (?:code|status)\s*[:=]?\s*(?P<code>-?\d{1,4})\b", re.IGNORECASE),
    re.compile(r"\breturned non-zero exit status (?P<code>-?\d{1,4})\b"),
    re.compile(r"\breturn code\s*[:=]?\s*(?P<code>-?\d{1,4})\b", re.IGNORECASE),
    re.compile(r"\bdied with <Signals\.(?P<sig>SIG[A-Z]{2,6}): (?P<code>\d{1,2})>"),
)
_XID_RE = re.compile(r"NVRM: Xid \((?P<where>[^)]{0,100})\): (?P<code>\d{1,4})(?:,\s*(?P<msg>.*))?")
_NCCL_WARN_RE = re.compile(r"NCCL WARN\s+(?P<msg>.*)$")
_CHECK_RE = re.compile(r"Check failed:\s*(?P<msg>.*)$")
_RUNTIME_ERROR_RE = re.compile(r"\b(?:(?P<name>CUDA error|cuDNN error|NCCL error)|(?P<nccl>NCCL error) in): (?P<msg>\S.*)$")
"""A GPU runtime library's own statement of an error, whatever the error: the CUDA runtime's
(``CUDA error: <cudaGetErrorString>``, as torch's CUDA checks word it), cuDNN's (``cuDNN error:
CUDNN_STATUS_...``) and NCCL's as c10d states it (``NCCL error in: <file>:<line>, <reason>``, or
``NCCL error: <reason>, NCCL version ...`` in a collective's async exception): exactly the forms
``EVENT_TRIGGER`` keys, so a line keyed by another branch (a severity header) reads the same."""

# template normalisation: what varies between two occurrences of the same failure
_NORMALISE = tuple((re.compile(p), r) for p, r in (
    (r"\d{4}-\d{2}-\d{2}[ T_]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"0x[0-9A-Fa-f]+", "<addr>"),
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<id>"),
    (r"\b[0-9a-f]{16,}\b", "<id>"),
    (r"(?:/[\w.@+-]+){2,}", "<path>"),
    (r"\b\d+(?:\.\d+)?\b", "<n>"),
    (r"'[^']{40,}'|\"[^\"]{40,}\"", "<str>"),
))


def template(exc_type: str | None, message: str | None) -> str:
    """An event's template: its type and its message with times, addresses, ids, paths and numbers
    normalised (two occurrences of the same failure share it)."""
    text = (message or "")[:400]
    for rx, sub in _NORMALISE:
        text = rx.sub(sub, text)
    return f"{exc_type or ''}: {' '.join(text.split())}"[:300]


@lru_cache(maxsize=1)
def shapes() -> dict:
    """``rules/event_shapes.yaml`` with its lookups built."""
    data = packaged_yaml("event_shapes.yaml") or {}
    signals = {int(s["number"]): s for s in data.get("signals") or []}
    return {
        "consequence": frozenset(data.get("consequence_exceptions") or ()),
        "signals": signals,
        "signal_names": {s["name"]: s for s in signals.values()},
        "telemetry": tuple(data.get("telemetry_modules") or ()),
        "generic": frozenset(data.get("generic_signatures") or ()),
        "actor_roles": tuple((re.compile(r["pattern"]), r["role"]) for r in data.get("actor_roles") or ()),
        "k8s_reasons": {reason: grade for grade, reasons in (data.get("k8s_event_reasons") or {}).items()
                        for reason in reasons or ()},
        "severity_records": tuple((re.compile(r["component"]), frozenset(r["levels"]), r["grade"],
                                   r.get("shape") or "logged_error") for r in data.get("severity_records") or ()),
        "kernel_records": tuple((re.compile(r["pattern"]), r["grade"]) for r in data.get("kernel_records") or ()),
        "ray_exit_types": dict(data.get("ray_exit_types") or {}),
        "logged_error_levels": frozenset(data.get("traceback_headline_levels") or ()),
        "file_roles": tuple((re.compile(r["pattern"]), r["role"]) for r in data.get("file_roles") or ()),
    }


def signal_of_status(status: int) -> str | None:
    """The signal an exit status stands for: ``-N`` (Python multiprocessing, torchelastic) or
    ``128+N`` (a shell, a container runtime, Slurm) is signal N; None for a plain status."""
    number = -status if status < 0 else status - 128 if 128 < status < 160 else None
    if number is None:
        return None
    known = shapes()["signals"].get(number)
    return known["name"] if known else f"signal {number}"


def signal_meaning(name: str | None) -> str | None:
    known = shapes()["signal_names"].get(name or "")
    return known["meaning"] if known else None


def _signal_external(name: str | None) -> bool:
    known = shapes()["signal_names"].get(name or "")
    return bool(known and known["external"])


def role_of(process: str | None, actor: str | None, rank: int | None, source: str) -> str:
    """The role of the process an event hit: from its Ray actor class, its torchrun rank, else
    from the file it was written to (``rules/event_shapes.yaml``); ``unknown`` otherwise."""
    s = shapes()
    if actor:
        cls = actor.split(" pid=", 1)[0].split(",", 1)[0].strip()
        for rx, role in s["actor_roles"]:
            if rx.search(cls):
                return role
    if rank is not None:
        return "policy"
    for rx, role in s["file_roles"]:
        if rx.search(source):
            return role
    return "unknown"


def _is_telemetry(names: Iterable[str]) -> bool:
    prefixes = shapes()["telemetry"]
    for name in names:
        for p in prefixes:
            if name == p or name.startswith(p + ".") or f"/{p}/" in name or f"/{p}." in name or name.startswith(p + "/"):
                return True
    return False


# ------------------------------------------------------------------------------------ events
class LogEvent:
    """One failure-shaped event of a log file (see the module doc)."""
    __slots__ = ("kind", "exc_type", "message", "template", "source", "line", "first_line", "last_line", "text",
                 "ts", "attempt", "process", "role", "thread", "telemetry", "grade", "signal", "exit_status",
                 "chain", "names", "level", "file_index", "at")

    def __init__(self, kind: str, exc_type: str | None, message: str | None, *, source: str, line: int,
                 first_line: int, last_line: int, text: str, process: str | None, role: str,
                 thread: str = "main", telemetry: bool = False, grade: str = "primary", signal: str | None = None,
                 exit_status: int | None = None, chain: tuple[str, ...] = (), level: str | None = None):
        self.kind, self.exc_type = kind, exc_type
        self.message = (message or "")[:MAX_MESSAGE_CHARS] or None
        self.template = template(exc_type, self.message)
        self.source, self.line, self.first_line, self.last_line, self.text = source, line, first_line, last_line, text
        self.ts: float | None = None
        self.attempt: int | None = None
        self.process, self.role, self.thread, self.telemetry = process, role, thread, telemetry
        self.grade, self.signal, self.exit_status, self.chain, self.level = grade, signal, exit_status, chain, level
        self.names: list[str] = []
        self.file_index = 0
        self.at: int | None = None
        """Where the match ends in ``text`` when ``text`` is the long matching line (the quote is cut around it)."""

    @property
    def causes(self) -> tuple[str, ...]:
        """The exception types chained before the last one raised (root cause first)."""
        return self.chain[:-1]

    def order_key(self) -> tuple:
        """A total order: dated events by time, then undated ones by file and line (an undated
        event is never placed before a dated one)."""
        return (0, self.ts, self.file_index, self.line) if self.ts is not None else (1, 0.0, self.file_index, self.line)

    def __repr__(self) -> str:
        return f"LogEvent({self.kind}, {self.exc_type!r}, {self.message!r}, {self.source}:{self.line}, {self.grade})"

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k, v in state.items():
            setattr(self, k, v)


def _exception_grade(exc_type: str, thread: str, telemetry: bool) -> str:
    if thread == "background":
        return "note" if telemetry else "consequence"
    last = exc_type.rsplit(".", 1)[-1].split("(", 1)[0]
    return "consequence" if last in shapes()["consequence"] else "primary"


def event_at(text: str, lineno: int, following: Iterable[str], preceding: str | None, source: str) -> LogEvent | None:
    """The event that starts at line ``lineno`` (``text``), reading on through ``following`` (the
    lines after it) for a traceback or an abort; ``preceding`` is the line before (a thread
    header). None when the line is no event (a handled exception logged at INFO, an exit 0, ...)."""
    p = peel(text)
    body = p.body
    if p.level in ("DEBUG", "INFO", "WARNING"):       # logged below error: handled (a traceback too)
        if not (_NCCL_WARN_RE.search(body) or _XID_RE.search(body)):
            return _record_event(p, text, lineno, source, low=True)
    role = role_of(p.process, p.actor, p.rank, source)
    if body.startswith(_TRACEBACK):
        return _traceback(p, text, lineno, following, preceding, source, role)
    m = _TERMINATE_RE.search(body)
    if m:
        message, quote_line, quote_text, last = None, lineno, text, lineno
        for offset, raw in enumerate(following, start=1):
            if offset > 6:
                break
            w = _WHAT_RE.match(peel(raw).body)
            if w:
                message, quote_line, quote_text, last = w.group("msg"), lineno + offset, raw, lineno + offset
                break
        return LogEvent("cpp_abort", m.group("type") or None, message or m.group("other"), source=source,
                        line=quote_line, first_line=lineno, last_line=last, text=quote_text, process=p.process,
                        role=role, signal="SIGABRT", level=p.level)
    w = _WHAT_RE.match(body)
    if w:
        return LogEvent("cpp_abort", None, w.group("msg"), source=source, line=lineno, first_line=lineno,
                        last_line=lineno, text=text, process=p.process, role=role, signal="SIGABRT", level=p.level)
    m = _FATAL_PY_RE.match(body)
    if m:
        msg = m.group("msg")
        sig = "SIGSEGV" if "Segmentation" in msg else "SIGABRT" if "Abort" in msg else "SIGBUS" if "Bus error" in msg else None
        return LogEvent("fatal_signal", "Fatal Python error", msg, source=source, line=lineno, first_line=lineno,
                        last_line=lineno, text=text, process=p.process, role=role, signal=sig, level=p.level)
    m = _SIGNAL_LINE_RE.search(body)
    if m:
        sig = ("SIGSEGV" if m.group("segv") else "SIGABRT" if m.group("abrt") else "SIGBUS" if m.group("bus")
               else m.group("star") or m.group("name") or m.group("recv"))
        if sig and sig.isdigit():
            sig = signal_of_status(-int(sig))
        return LogEvent("fatal_signal", sig, body, source=source, line=lineno, first_line=lineno, last_line=lineno,
                        text=text, process=p.process, role=role, signal=sig, level=p.level,
                        grade="consequence" if _signal_external(sig) else "primary")
    m = _XID_RE.search(body)
    if m:
        return LogEvent("kernel", f"Xid {m.group('code')}", m.group("msg"), source=source, line=lineno,
                        first_line=lineno, last_line=lineno, text=text, process=p.process, role=role, level=p.level)
    m = _NCCL_WARN_RE.search(body)
    if m:
        return LogEvent("nccl_warn", "NCCL WARN", m.group("msg"), source=source, line=lineno, first_line=lineno,
                        last_line=lineno, text=text, process=p.process, role=role, grade="note", level=p.level)
    if p.daemon and body.startswith("error:"):
        status = _exit_status(body, text, lineno, source, p, role)
        return LogEvent("slurm", p.daemon, body[6:].strip(), source=source, line=lineno, first_line=lineno,
                        last_line=lineno, text=text, process=p.daemon, role="scheduler", grade="consequence",
                        level="ERROR", signal=status.signal if status else None,
                        exit_status=status.exit_status if status else None)
    exit_event = _exit_status(body, text, lineno, source, p, role)
    if exit_event is not None:
        return exit_event
    m = _CHECK_RE.search(body)
    if m or p.level == "FATAL":
        return LogEvent("fatal_log", "Check failed" if m else "FATAL", m.group("msg") if m else body, source=source,
                        line=lineno, first_line=lineno, last_line=lineno, text=text, process=p.process, role=role,
                        signal="SIGABRT" if m else None, level=p.level)
    # a bare exception line: "SomeError: message" at the start of the body
    m = _EXC_IN_TRACEBACK.match(body)
    if m and (m.group("type").rsplit(".", 1)[-1] not in _GENERIC_BARE or (
            p.level in ("ERROR", "CRITICAL") and m.group("msg"))) and \
            _ERRORISH.search(m.group("type").split("(", 1)[0]) and (m.group("msg") is not None or "." in m.group("type")):
        # (a generic ``Exception: message`` counts when its record says it is an error)
        thread, telemetry = _thread_of(preceding), _is_telemetry([m.group("type")])
        return LogEvent("exception", m.group("type"), m.group("msg"), source=source, line=lineno,
                        first_line=_headline(preceding, p, lineno),
                        last_line=lineno, text=text, process=p.process, role=role, thread=thread,
                        telemetry=telemetry, grade=_exception_grade(m.group("type"), thread, telemetry),
                        chain=(m.group("type"),), level=p.level)
    # a logged error naming an exception: "ERROR ... SomeError: message"
    if p.level in ("ERROR", "CRITICAL", "FATAL"):
        m = _EXC_TOKEN.search(body)
        if m:
            telemetry = _is_telemetry([m.group("type")])
            return LogEvent("exception", m.group("type"), m.group("msg") or body, source=source, line=lineno,
                            first_line=lineno, last_line=lineno, text=text, process=p.process, role=role,
                            telemetry=telemetry, grade=_exception_grade(m.group("type"), "main", telemetry),
                            chain=(m.group("type"),), level=p.level)
    return _record_event(p, text, lineno, source, low=False)


_K8S_ROW_RE = re.compile(r"^\s*Warning\s{2,}(?P<reason>[A-Z][A-Za-z]{1,60})\s{2,}\S.*?\s{2,}(?P<msg>\S.*)$")
_K8S_FIELD_RE = re.compile(r"^\s*Reason:\s*(?P<reason>[A-Z][A-Za-z]{1,60})\b(?:\s*\\n\s*|\s*)(?P<msg>.*)$")
_K8S_DUMP_RE = re.compile(r"event for [^:\s]{1,300}: \{[^}]{0,300}\} (?P<reason>[A-Z][A-Za-z]{1,60}): (?P<msg>.*)$")
_RAY_EXIT_RE = re.compile(r"[Ww]orker exit type: (?P<type>[A-Z][A-Z_]{1,40})\b(?:\s*Worker exit detail:\s*(?P<msg>.*))?")
_SLURM_BANNER_RE = re.compile(r"\*\*\* (?P<what>JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+(?: DUE TO (?P<why>[A-Z][A-Z ]{1,60}?))?(?: on \S+)? \*\*\*")


def _record_event(p: Peeled, text: str, lineno: int, source: str, low: bool) -> LogEvent | None:
    """A record that states its own severity, graded by ``rules/event_shapes.yaml``: a Kubernetes
    event or container state (its reason), a kernel record (the OOM killer, the NVIDIA driver), a
    Ray worker's exit type, a Slurm cancellation banner, a glog/c10/Ray C++ header's severity with
    the source file that wrote it (when the file is graded, its grade decides); else a GPU runtime
    library's statement of an error (``CUDA error: ...``) on a line that names no exception. None for
    any other line (an ERROR line is not an event by itself). ``low``: the line was logged below
    error; only records whose severity is their own (an event's reason, a header graded at that
    level) count then."""
    s = shapes()
    body = p.body

    def event(kind: str, exc_type: str, message: str | None, grade: str, process: str | None = p.process) -> LogEvent:
        return LogEvent(kind, exc_type, message, source=source, line=lineno, first_line=lineno, last_line=lineno,
                        text=text, process=process, role=role_of(p.process, p.actor, p.rank, source), grade=grade,
                        level=p.level)

    for rx in (_K8S_ROW_RE, _K8S_DUMP_RE, _K8S_FIELD_RE):
        m = rx.search(body)
        if m is not None:
            grade = s["k8s_reasons"].get(m.group("reason"))
            if grade is not None:
                return event("k8s_event", f"k8s {m.group('reason')}", m.group("msg") or body.strip(), grade)
    if p.component is not None and p.header == "glog" and body[:1] not in (" ", "\t"):
        # (an indented body continues a record logged line by line: a stack's frames)
        for rx, levels, grade, shape in s["severity_records"]:
            if p.record_level in levels and rx.search(p.component):
                return event(shape, f"{p.record_level} {p.component}", body, grade) if grade else None
    if low:
        return None
    if p.daemon == "kernel" or "NVRM: " in body:
        for rx, grade in s["kernel_records"]:
            m = rx.search(body)
            if m is not None:
                return event("kernel_record", f"kernel {m.group(0).strip()}", body.strip(), grade, p.process or "kernel")
    m = _RAY_EXIT_RE.search(body)
    if m is not None and m.group("type") in s["ray_exit_types"]:
        return event("ray_exit", f"Ray worker exit {m.group('type')}", m.group("msg") or body,
                     s["ray_exit_types"][m.group("type")])
    m = _SLURM_BANNER_RE.search(body)
    if m is not None and (p.daemon or body.startswith("***")):
        return event("slurm", p.daemon or "slurm", body.strip(), "consequence", p.daemon or p.process)
    m = _RUNTIME_ERROR_RE.search(body)
    if m is not None:
        return event("runtime_error", m.group("name") or m.group("nccl"), m.group("msg"), "primary")
    return None


def _exit_status(body: str, text: str, lineno: int, source: str, p: Peeled, role: str) -> LogEvent | None:
    for rx in _EXIT_RES:
        m = rx.search(body)
        if m is None:
            continue
        status = int(m.group("code"))
        named = m.groupdict().get("sig")
        if named:
            status = -status
        if status == 0:
            return None
        sig = named or signal_of_status(status)
        grade = "primary" if sig is not None and not _signal_external(sig) else "consequence"
        return LogEvent("exit_status", sig or f"exit {status}", body, source=source, line=lineno, first_line=lineno,
                        last_line=lineno, text=text, process=p.process, role=role, signal=sig, exit_status=status,
                        grade=grade, level=p.level)
    return None


def _headline(preceding: str | None, p: Peeled, lineno: int) -> int:
    """The first line of an exception event starting at ``lineno``: the line before when it is a
    record of the same process logged at error level (``logger.exception("...")``, vLLM's "EngineCore
    encountered a fatal error." before its exception), else ``lineno``."""
    if preceding is None:
        return lineno
    h = peel(preceding)
    if h.process == p.process and h.header == "logging" and h.level in shapes()["logged_error_levels"] \
            and h.body.strip() and not _THREAD_RE.match(h.body) and not h.body.startswith(_TRACEBACK):
        return lineno - 1
    return lineno


def _thread_of(preceding: str | None) -> str:
    if preceding is None:
        return "main"
    m = _THREAD_RE.match(peel(preceding).body)
    if m is None:
        return "main"
    return "main" if m.group("name").strip("'\" ").startswith("MainThread") else "background"


def _traceback(p: Peeled, text: str, lineno: int, following: Iterable[str], preceding: str | None, source: str,
               role: str) -> LogEvent:
    """A traceback from its header: every chained part up to the last exception line. The quoted
    line is the first exception line (the root cause); ``chain`` lists every exception, root first.
    A traceback cut before its exception line is an event of type None ("traceback cut")."""
    chain: list[tuple[str, str | None, int, str]] = []
    paths: list[str] = []
    expecting_chain = False
    blanks = 0
    last = lineno
    read_bytes = 0
    for offset, raw in enumerate(following, start=1):
        if offset > MAX_TRACEBACK_LINES or read_bytes > MAX_TRACEBACK_BYTES:
            break
        read_bytes += len(raw) + 1
        q = peel(raw)
        if q.process != p.process:
            continue                # another stream interleaved in the same file
        body = q.body
        if not body.strip():
            blanks += 1
            if blanks > 3:
                break
            continue
        blanks = 0
        if body.startswith(_TRACEBACK):
            if chain and not expecting_chain:
                break               # the next, unrelated traceback
            expecting_chain = False
            last = lineno + offset
            continue
        if body.startswith(_CHAIN_MARKERS):
            expecting_chain = True
            last = lineno + offset
            continue
        if body[0] in " \t":
            if chain:
                if expecting_chain:
                    continue
                last = lineno + offset    # an indented continuation of the message (ExceptionGroup, notes)
                continue
            f = _FRAME_RE.match(body)
            if f:
                paths.append(f.group("path"))
            last = lineno + offset
            continue
        if set(body.strip()) <= set("^~ "):
            continue
        if chain and not expecting_chain:
            break
        if q.level in ("DEBUG", "INFO", "WARNING"):
            break                   # a new log record: the traceback was cut
        m = _EXC_IN_TRACEBACK.match(body)
        if m is not None and not m.group("type").rsplit(".", 1)[-1][:1].isupper():
            m = None                # exception classes are capitalised: "restarting" is prose
        if m is None:
            if chain:
                break
            m2 = _EXC_TOKEN.search(body)
            if m2 is None:
                break
            chain.append((m2.group("type"), m2.group("msg") or body, lineno + offset, raw))
        else:
            chain.append((m.group("type"), m.group("msg"), lineno + offset, raw))
        expecting_chain = False
        last = lineno + offset
    thread = _thread_of(preceding)
    if any(path.endswith(("/threading.py",)) for path in paths[:1]):
        thread = "background"
    if not chain:
        return LogEvent("exception", None, "traceback cut before its exception line", source=source, line=lineno,
                        first_line=lineno, last_line=last, text=text, process=p.process,
                        role=role, thread=thread, grade="consequence", level=p.level)
    root_type, root_msg, root_line, root_text = chain[0]
    first = _headline(preceding, p, lineno)
    types = tuple(c[0] for c in chain)
    telemetry = _is_telemetry(list(types) + paths[1:] if thread == "background" else list(types))
    if thread == "background" and not telemetry:
        telemetry = _is_telemetry(paths)
    grade = _exception_grade(root_type, thread, telemetry)
    if grade == "consequence" and thread == "main" and any(
            _exception_grade(t, thread, telemetry) == "primary" for t in types[1:]):
        grade = "primary"           # a KeyboardInterrupt that then raised a real error
    return LogEvent("exception", root_type, root_msg, source=source, line=root_line, first_line=first,
                    last_line=last, text=root_text, process=p.process, role=role, thread=thread,
                    telemetry=telemetry, grade=grade, chain=types, level=p.level)


def read_events(lines: list[str], source: str = "excerpt.log", reference_epoch: float | None = None,
                timestamp: Callable[[str, float | None], float | None] | None = None) -> list[LogEvent]:
    """The events of a text given as lines, in order: what the bundle reader finds in a file
    whose every line it reads (the same ``event_at``, the same spans)."""
    if timestamp is None:
        from rlhealth.probes.parse.timestamps import line_timestamp as timestamp
    from rlhealth.probes.textio import clean_line

    lines = [clean_line(line) for line in lines]
    trigger = re.compile(EVENT_TRIGGER)
    out: list[LogEvent] = []
    span_end: dict[str | None, int] = {}
    for i, text in enumerate(lines):
        lineno = i + 1
        if not trigger.search(text) or lineno <= span_end.get(peel(text).process, 0):
            continue
        ev = event_at(text, lineno, _iter(lines, i + 1), lines[i - 1] if i else None, source)
        if ev is None:
            continue
        span_end[ev.process] = ev.last_line
        ev.ts = event_time(ev, lines, timestamp, reference_epoch)
        out.append(ev)
    return out


def _iter(lines: list[str], start: int) -> Iterator[str]:
    for k in range(start, len(lines)):
        yield lines[k]


def event_time(ev: LogEvent, lines: list[str], timestamp, reference_epoch: float | None) -> float | None:
    """The time of an event: that of its first line, else of the quoted line, else of the nearest
    earlier line of the same stream reached over continuation lines only."""
    for k in (ev.first_line, ev.line):
        ts = line_time(lines[k - 1], timestamp, reference_epoch)
        if ts is not None:
            return ts
    for k in range(ev.first_line - 2, max(-1, ev.first_line - 30), -1):
        line = lines[k]
        q = peel(line)
        if q.process != ev.process:
            return None
        ts = timestamp(line, reference_epoch)
        if ts is not None:
            return ts
        if q.body.strip() and not q.body.startswith((" ", "\t", _TRACEBACK)) and not _THREAD_RE.match(q.body):
            return None
    return None


# ------------------------------------------------------------------------------- aggregation
MAX_TEMPLATES_PER_ATTEMPT = 64
"""Distinct event templates kept per attempt (first and last occurrence, count); further
templates are counted in ``dropped`` only."""


class EventLog:
    """The events of a bundle, bounded: per (attempt, template) the count, the first event (the
    least ``order_key``) and the last. Merging two logs gives what one in-order read gives (the
    order is total), so files read apart merge by a plain fold."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[int, str], list] = {}
        self.templates: dict[int, int] = {}
        self.total = 0
        self.dropped = 0

    def add(self, ev: LogEvent, count: int = 1, last: LogEvent | None = None) -> None:
        attempt = ev.attempt if ev.attempt is not None else -1
        key = (attempt, ev.template)
        self.total += count
        held = self.by_key.get(key)
        if held is None:
            if self.templates.get(attempt, 0) >= MAX_TEMPLATES_PER_ATTEMPT:
                self.dropped += count
                return
            self.templates[attempt] = self.templates.get(attempt, 0) + 1
            self.by_key[key] = [count, ev, last or ev]
            return
        held[0] += count
        if ev.order_key() < held[1].order_key():
            held[1] = ev
        last = last or ev
        if last.order_key() >= held[2].order_key():
            held[2] = last

    def merge(self, other: "EventLog") -> None:
        for (_, _), (count, first, last) in other.by_key.items():
            self.add(first, count, last)
        self.total += other.dropped
        self.dropped += other.dropped

    def events(self, attempt: int | None = None) -> list[tuple[int, LogEvent, LogEvent]]:
        """``(count, first, last)`` per template (of one attempt when given), first ones in order."""
        rows = [tuple(v) for (a, _), v in self.by_key.items() if attempt is None or a == attempt]
        return sorted(rows, key=lambda r: r[1].order_key())

    def attempts(self) -> set[int]:
        return {a for a, _ in self.by_key}

    def first(self, attempt: int, grades: tuple[str, ...] = ("primary",)) -> LogEvent | None:
        """The earliest event of ``attempt`` with one of ``grades``: by time when both are dated,
        by line within one file (an undated line before a dated one of the same file came first),
        else by ``order_key``. A template's last kept occurrence competes too (undated, it is kept
        last although its line may come first in its file)."""
        found = sorted({id(e): e for (a, _), (_, ev, last) in self.by_key.items() if a == attempt
                        for e in (ev, last) if e.grade in grades}.values(), key=LogEvent.order_key)
        best = None
        for ev in found:
            if best is None or _earlier(ev, best):
                best = ev
        return best

    def containing(self, attempt: int, source: str, line: int) -> LogEvent | None:
        """The kept event of ``attempt`` whose lines hold ``source:line``."""
        for (a, _), (_, ev, last) in self.by_key.items():
            if a != attempt:
                continue
            for e in (ev, last):
                if e.source == source and e.first_line <= line <= e.last_line:
                    return e
        return None


def _earlier(a: LogEvent, b: LogEvent) -> bool:
    if a.file_index == b.file_index and a.source == b.source and (a.ts is None or b.ts is None):
        return a.line < b.line
    return a.order_key() < b.order_key()


def token_match(rx: re.Pattern, text: str) -> bool:
    """Whether ``rx`` matches ``text`` as whole words: a match edge between two word characters
    (``ActorDiedError`` inside ``ActorDiedErrorContext``) does not count. A text the regex does
    not match at all (its raw bytes matched the scan database) counts as matched."""
    seen = False
    for m in rx.finditer(text):
        seen = True
        s, e = m.span()
        if s == e:
            return True
        start_ok = s == 0 or not (_word(text[s - 1]) and _word(text[s]))
        end_ok = e == len(text) or not (_word(text[e - 1]) and _word(text[e]))
        if start_ok and end_ok:
            return True
    return not seen


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
