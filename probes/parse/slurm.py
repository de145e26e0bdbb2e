"""Pure parsers for Slurm command output and Slurm job logs (log-formats §6, marin-artifacts §4.4).

No I/O here: every function takes the text a command printed (or a log file's bytes decoded)
and returns plain data. ``probes/slurm.py`` runs the commands; these turn the raw files it
saved under ``slurm/`` into ``state.json``, so a capture can be re-normalized offline.
"""
from __future__ import annotations

import functools

import re
from dataclasses import dataclass, field

from rlhealth.probes.capture import terminal_states
from rlhealth.probes.parse import COUNT, read_count
from rlhealth.probes.parse.timestamps import iso, parse_iso

# ---- state vocabulary (marin-artifacts §4.4) --------------------------------------------------

_STATE_MAP = {
    "PENDING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESV_DEL_HOLD": "pending",
    "CONFIGURING": "building",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "RESIZING": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "COMPLETED": "succeeded",
    "CANCELLED": "killed",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "OUT_OF_MEMORY": "failed",
    "NODE_FAIL": "failed",
    "PREEMPTED": "failed",
    "BOOT_FAIL": "failed",
    "DEADLINE": "failed",
    "SPECIAL_EXIT": "failed",
    "REVOKED": "killed",
}
@functools.lru_cache(maxsize=1)
def terminal_slurm_states() -> frozenset[str]:
    """Slurm states whose controller-vocabulary state is terminal (the one terminal set:
    ``capture.terminal_states``)."""
    return frozenset(raw for raw, mapped in _STATE_MAP.items() if mapped in terminal_states())


def base_state(raw: str | None) -> str:
    """``"CANCELLED by 1001"`` / ``"CANCELLED+"`` / ``"running"`` -> ``"CANCELLED"`` / ``"RUNNING"``."""
    if not raw:
        return ""
    first = raw.strip().split(" ", 1)[0].upper()
    word = first.rstrip("+")
    if first.endswith("+") and word not in _STATE_MAP:  # fixed-width truncation, e.g. OUT_OF_ME+
        matches = [s for s in _STATE_MAP if s.startswith(word)]
        if len(matches) == 1:
            return matches[0]
    return word


def map_state(raw: str | None) -> str:
    """Slurm job state -> controller vocabulary (pending, building, running, succeeded, killed,
    failed); any other state is the lower-cased raw word (marin-artifacts §4.4)."""
    word = base_state(raw)
    return _STATE_MAP.get(word, word.lower())


# ---- times, exit codes, hostlists --------------------------------------------------------------

def parse_time(value: str | None) -> str | None:
    """Slurm ``%FT%T`` (local time of the cluster; rendered as UTC, the only zone we know) ->
    ISO-8601 ``...Z``; ``Unknown``/``None``/``N/A``/empty -> None. Parsed by the one time parser
    (``probes/parse/timestamps.py``)."""
    if not value or value.strip() in ("Unknown", "None", "N/A", "(null)", "0"):
        return None
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", value.strip()):
        return None
    return iso(parse_iso(value.strip()))


def parse_exit_code(value: str | None) -> tuple[int | None, int | None]:
    """``"1:0"`` -> ``(1, 0)`` (exit code of the batch script, terminating signal)."""
    if not value:
        return None, None
    m = re.fullmatch(rf"\s*({COUNT}):({COUNT})\s*", value)
    if not m:
        return None, None
    return int(m.group(1)), int(m.group(2))


def expand_hostlist(text: str | None) -> list[str]:
    """``"gpu[001-003,007],login1"`` -> ``["gpu001", "gpu002", "gpu003", "gpu007", "login1"]``.

    One bracket group per host name (what Slurm prints for flat node names). ``(null)``, ``None``
    and the empty string give ``[]``. Unparseable pieces are returned as written.
    """
    if not text or text.strip() in ("(null)", "None", "None assigned", "N/A"):
        return []
    hosts: list[str] = []
    for piece in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text.strip()):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", piece)
        if not m:
            hosts.append(piece)
            continue
        prefix, ranges, suffix = m.groups()
        for part in ranges.split(","):
            if "-" in part:
                lo, hi = part.split("-", 1)
                first = read_count(lo) if lo.isdigit() else None
                last = read_count(hi) if hi.isdigit() else None
                if first is not None and last is not None and 0 <= last - first < 4096:
                    width = len(lo)
                    hosts.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(first, last + 1))
                    continue
            hosts.append(f"{prefix}{part}{suffix}")
    return hosts


# ---- sacct --parsable2 -------------------------------------------------------------------------

def parse_sacct_parsable2(text: str, fields: list[str] | None = None) -> list[dict[str, str]]:
    """Rows of ``sacct -X --parsable2`` as dicts keyed by column name.

    The header line (``JobID|JobName|...``) names the columns; with ``-n`` pass ``fields``.
    A row with more cells than columns (a ``|`` inside the last field, e.g. a job name) keeps the
    extra text in the last column. Blank lines and lines before the header are ignored.
    """
    rows: list[dict[str, str]] = []
    columns = list(fields) if fields else None
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        cells = line.split("|")
        if columns is None:
            if cells and cells[0] == "JobID":
                columns = cells
            continue
        if fields is None and cells == columns:
            continue  # repeated header
        if len(cells) < len(columns):
            continue  # not a row of this table (e.g. an error message)
        if len(cells) > len(columns):
            cells = cells[:len(columns) - 1] + ["|".join(cells[len(columns) - 1:])]
        rows.append(dict(zip(columns, cells)))
    return rows


# ---- scontrol show job -o ----------------------------------------------------------------------

# A key starts a new pair only when preceded by a space and followed by '='. Keys are words that
# may contain '/', ':' (AllocNode:Sid, CPUs/Task, ReqB:S:C:T); values may contain spaces.
_SCONTROL_KEY = re.compile(r"(?:^| )([A-Za-z][A-Za-z0-9_/:]*)=")


def parse_scontrol_oneliner(text: str) -> list[dict[str, str]]:
    """Each ``scontrol show job -o`` line -> ``{key: value}``; values may contain spaces
    (``JobName=my run WorkDir=/a b``). Lines without ``JobId=`` (errors) are skipped."""
    jobs = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("JobId="):
            continue
        matches = list(_SCONTROL_KEY.finditer(line))
        record: dict[str, str] = {}
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            record.setdefault(m.group(1), line[m.end():end].strip())
        jobs.append(record)
    return jobs


def scontrol_user(value: str | None) -> str | None:
    """``UserId=rlhtest(1001)`` value -> ``rlhtest``."""
    if not value:
        return None
    return value.split("(", 1)[0] or None


# ---- ps -eo pid,ppid,etimes,args -ww -------------------------------------------------------------

def parse_ps_tree(text: str) -> dict[int, tuple[int, int, str]]:
    """``ps -eo pid,ppid,etimes,args -ww`` -> ``{pid: (ppid, elapsed seconds, args)}`` (header and
    unparseable lines skipped)."""
    procs: dict[int, tuple[int, int, str]] = {}
    for raw in text.splitlines():
        parts = raw.split(None, 3)
        pid, ppid = (read_count(parts[0]), read_count(parts[1])) if len(parts) == 4 else (None, None)
        if pid is not None and ppid is not None:
            procs[pid] = (ppid, read_count(parts[2]) or 0, parts[3])
    return procs


# ---- squeue -h --format=%i,%T,%j ---------------------------------------------------------------

SQUEUE_FORMAT = "--format=%i,%T,%j"


def parse_squeue(text: str) -> list[dict[str, str]]:
    """``squeue -h --format=%i,%T,%j`` -> ``[{"JobID", "State", "JobName"}]`` (the name is last so
    it may contain commas). Error lines (``slurm_load_jobs error: ...``) are skipped."""
    rows = []
    for raw in text.splitlines():
        parts = raw.strip().split(",", 2)
        if len(parts) == 3 and re.fullmatch(r"\d+(_\d+)?", parts[0]):
            rows.append({"JobID": parts[0], "State": parts[1], "JobName": parts[2]})
    return rows


# ---- slurmstepd / srun messages and the first causal error of a leg ---------------------------

# Current Slurm writes "*** JOB 1 ON node CANCELLED AT t DUE TO TIME LIMIT ***"; an older wording is
# "*** JOB 1 CANCELLED AT t DUE TO TIME LIMIT on node ***" (both in tests/realworld/corpus.yaml).
_STEPD_CANCEL = re.compile(
    r"\*\*\* (JOB|STEP) (\S+) (?:ON (\S+) )?CANCELLED AT (\S+)(?: DUE (?:TO|to) (.+?))?(?: on (\S+))? \*\*\*")
_STEPD_FAILED = re.compile(r"\*\*\* (JOB|STEP) (\S+) ON (\S+) FAILED \((.+?)\) \*\*\*")
_OOM = re.compile(r"Detected (\d+) oom[-_]kill event")
_OLD_OOM = re.compile(r"slurmstepd(?:-\S+)?: (?:error: )?(?:(?:Job|Step) \S+ exceeded memory limit|Exceeded (?:job|step) memory limit)")


@dataclass(frozen=True)
class StepdEvent:
    """One slurmstepd message: kind is ``cancelled``, ``failed`` or ``oom``."""
    line_no: int          # 1-based
    line: str
    kind: str
    entity: str | None = None     # JOB / STEP
    job: str | None = None
    node: str | None = None
    at: str | None = None
    reason: str | None = None     # "TIME LIMIT", "PREEMPTION", "SIGNAL Terminated", ...


def parse_stepd_lines(text: str) -> list[StepdEvent]:
    """slurmstepd cancellation / failure / OOM messages in a job's .out/.err, in file order."""
    events = []
    for i, raw in enumerate(text.splitlines(), start=1):
        if "***" not in raw and "oom" not in raw and "memory limit" not in raw:
            continue
        line = raw.strip()
        if m := _STEPD_CANCEL.search(line):
            events.append(StepdEvent(i, line, "cancelled", m.group(1), m.group(2), m.group(3) or m.group(6),
                                     m.group(4), m.group(5)))
        elif m := _STEPD_FAILED.search(line):
            events.append(StepdEvent(i, line, "failed", m.group(1), m.group(2), m.group(3),
                                     reason=m.group(4)))
        elif _OOM.search(line) or _OLD_OOM.search(line):
            events.append(StepdEvent(i, line, "oom"))
    return events


@dataclass
class Leg:
    """One leg of an afterany chain, merged from sacct, squeue and scontrol."""
    job_id: str
    name: str | None = None
    user: str | None = None
    raw_state: str | None = None
    submit: str | None = None
    start: str | None = None
    end: str | None = None
    exit_code: str | None = None
    work_dir: str | None = None
    node_list: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    dependency: str | None = None
    restarts: int | None = None
    error: str | None = None
    sources: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return map_state(self.raw_state)

    @property
    def terminal(self) -> bool:
        return base_state(self.raw_state) in terminal_slurm_states()


def job_id_key(job_id: str) -> tuple[int, int]:
    """Sort key of ``"123"`` / ``"123_4"`` (submission order)."""
    main, _, task = job_id.partition("_")
    main_n = read_count(main) if main.isdigit() else None
    task_n = read_count(task) if task.isdigit() else None
    return (0 if main_n is None else main_n, -1 if task_n is None else task_n)


def merge_leg(legs: dict[str, Leg], job_id: str, source: str, **values) -> Leg:
    """Fold values from one source into the leg; a later source fills only what is still empty,
    except the state, where scontrol (live, authoritative) beats squeue beats sacct."""
    leg = legs.setdefault(job_id, Leg(job_id=job_id))
    leg.sources.append(source)
    for key, value in values.items():
        if value in (None, "", "(null)", "Unknown", "N/A", "None"):
            continue
        if key == "raw_state" and leg.raw_state and source == "sacct":
            continue
        if key == "raw_state" or getattr(leg, key) in (None, ""):
            setattr(leg, key, value)
    return leg


def chain_state(legs: list[Leg]) -> str:
    """Controller state of a whole afterany chain: running if any leg runs (or is being set up),
    else pending if a leg still waits, else the mapped state of the last leg."""
    states = [leg.state for leg in legs]
    for wanted in ("running", "building", "pending"):
        if wanted in states:
            return wanted
    return legs[-1].state if legs else "absent"
