"""vLLM stats-logger lines in every era, and enforce_eager evidence.

Eras (log-formats §1.2): V0 ``... Running: R reqs, Swapped: S reqs, Pending: P reqs, GPU KV
cache usage: K%, CPU KV cache usage: C%.``; early V1 ``... Running: R reqs, Waiting: W reqs ``;
V1 ``Engine NNN: ... Waiting: W reqs, GPU KV cache usage: K%, Prefix cache hit rate: H%``;
2026 V1 with extra ``X cache hit rate`` fields. The engine identity is the Ray actor /
process prefix plus the ``Engine NNN`` index when present.
"""
from __future__ import annotations

import re

from typing import NamedTuple

from rlhealth.probes.parse import DECIMAL

_NUMBER = DECIMAL     # a garbled "1.2.3" or "." makes no stats line
_COUNT = r"\d{1,18}"  # nor does a request count longer than any real one (int() refuses 4,300 digits)
STATS_RE = re.compile(
    rf"(?:Engine (?P<engine>\d+): )?Avg prompt throughput: (?P<prompt>{_NUMBER}) tokens/s, "
    rf"Avg generation throughput: (?P<gen>{_NUMBER}) tokens/s, Running: (?P<running>{_COUNT}) reqs"
    r"(?:, Swapped: (?P<swapped>\d+) reqs)?"
    rf"(?:, (?:Pending|Waiting): (?P<waiting>{_COUNT}) reqs)?"
    rf"(?:, GPU KV cache usage: (?P<kv>{_NUMBER})%)?")
PREFIX_RE = re.compile(r"^\s*\((?P<actor>[A-Za-z0-9_]+) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9.:a-f]+))?\)")
# The same patterns for ASCII text (``str.isascii()``, constant time): identical matches there
# (``\s`` spelled as the ASCII characters Unicode calls whitespace), found faster.
STATS_RE_ASCII = re.compile(STATS_RE.pattern, re.ASCII)
PREFIX_RE_ASCII = re.compile(PREFIX_RE.pattern.replace(r"\s", r"[\t\n\x0b\x0c\r\x1c-\x1f ]"), re.ASCII)
EAGER_TRUE_RE = re.compile(r"(?:enforce_eager\s*[=:]\s*['\"]?(?:True|true|1)\b|Cudagraph is disabled under eager mode|Enforce eager set, disabling)")
EAGER_FALSE_RE = re.compile(r"(?:enforce_eager\s*[=:]\s*['\"]?(?:False|false|0)\b|Graph capturing finished|Capturing CUDA graphs)")


class StatsSample(NamedTuple):
    """One vLLM stats line (a plain record: thousands are kept per bundle, built from parsed values)."""
    engine: str
    ts: float | None
    prompt_tok_s: float
    gen_tok_s: float
    running: int
    waiting: int
    kv_pct: float | None
    source: str
    line: int
    era: str
    text: str = ""
    """The line as read (quoted as evidence)."""


def engine_and_era(text: str, m: re.Match, source: str) -> tuple[str, str]:
    """The engine identity (actor:ip:pid[#index], or the file) and the stats-line era of a match."""
    prefix = (PREFIX_RE_ASCII if text.isascii() else PREFIX_RE).search(text)
    engine_idx = m.group("engine")
    if prefix:
        who = f"{prefix.group('actor')}:{prefix.group('ip') or '-'}:{prefix.group('pid')}"
    else:
        who = source
    engine = f"{who}#{engine_idx}" if engine_idx is not None else who
    if m.group("swapped") is not None:
        era = "v0"
    elif engine_idx is not None:
        era = "v1-2026" if "MM cache hit rate" in text or "External prefix" in text else "v1"
    else:
        era = "v1-early"
    return engine, era


def stats_match(text: str) -> re.Match | None:
    """The ``STATS_RE`` match of a line (the ASCII form for ASCII text). The leftmost match starts
    at the first "Avg prompt throughput: " or at the "Engine " just before it: searching from
    there finds the same match as searching the whole line, faster."""
    pos = text.find("Avg prompt throughput: ")
    if pos < 0:
        return None
    engine_pos = text.rfind("Engine ", 0, pos)
    return (STATS_RE_ASCII if text.isascii() else STATS_RE).search(text, engine_pos if engine_pos >= 0 else pos)


def stats_sample(text: str, m: re.Match, engine: str, era: str, source: str, line: int, ts: float | None) -> StatsSample:
    """The sample of a stats line from its match and its ``engine_and_era``."""
    prompt, gen, running, waiting, kv = m.group("prompt", "gen", "running", "waiting", "kv")
    return StatsSample(engine=engine, ts=ts, prompt_tok_s=float(prompt), gen_tok_s=float(gen), running=int(running),
                       waiting=int(waiting or 0), kv_pct=float(kv) if kv else None, source=source, line=line, era=era,
                       text=text)


def parse_stats(text: str, source: str, line: int, ts: float | None) -> StatsSample | None:
    m = stats_match(text)
    if not m:
        return None
    engine, era = engine_and_era(text, m, source)
    return stats_sample(text, m, engine, era, source, line, ts)


def eager_from_line(text: str) -> bool | None:
    """True/False when an engine init/config line states enforce_eager, else None."""
    if EAGER_TRUE_RE.search(text):
        return True
    if EAGER_FALSE_RE.search(text):
        return False
    return None


def eager_from_config(config_text: str) -> bool | None:
    """enforce_eager from a resolved launch configuration / entrypoint text (last setting wins)."""
    found = None
    for m in re.finditer(r"enforce_eager[\"']?\s*[=:]\s*[\"']?(true|false|True|False|1|0)\b", config_text):
        found = m.group(1).lower() in ("true", "1")
    return found


_INIT_MODEL_RE = re.compile(r"with config: model=['\"]([^'\",]+)['\"]")


def model_from_init_line(text: str) -> str | None:
    """The model of a vLLM engine init line (``Initializing a V1 LLM engine (v0.8.5) with config:
    model='Qwen/Qwen3-8B', ...``), or None."""
    m = _INIT_MODEL_RE.search(text)
    return m.group(1) if m else None
