"""vLLM stats-logger lines in every era, and enforce_eager evidence.

Eras (log-formats §1.2): V0 ``... Running: R reqs, Swapped: S reqs, Pending: P reqs, GPU KV
cache usage: K%, CPU KV cache usage: C%.``; early V1 ``... Running: R reqs, Waiting: W reqs ``;
V1 ``Engine NNN: ... Waiting: W reqs, GPU KV cache usage: K%, Prefix cache hit rate: H%``;
2026 V1 with extra ``X cache hit rate`` fields. The engine identity is the Ray actor /
process prefix plus the ``Engine NNN`` index when present.

The stats line is described once, as data (``STATS_LINE``): ``STATS_RE`` is generated from it, and
the C reader (probes/_linescan.c ``StatsReader``, built from ``stats_reader_spec()``) interprets
the same description; tests/unit/test_linescan.py checks that both read every line alike.
"""
from __future__ import annotations

import operator
import re

from typing import NamedTuple

from rlhealth.probes.parse import DECIMAL


class FieldKind(NamedTuple):
    """What a field of a stats line holds: a run of ASCII digits (``\\d`` in the regex), with at
    most one "." among them when ``dot`` (then it is a ``DECIMAL``), of at most ``max_digits``
    digits (0: any), read as ``value`` (float, int or str)."""
    dot: bool
    max_digits: int
    value: type

    @property
    def regex(self) -> str:
        if self.dot:
            if self.max_digits or self.value is not float:
                raise ValueError("a decimal field has no digit cap and reads as a float")
            return DECIMAL
        return rf"\d{{1,{self.max_digits}}}" if self.max_digits else r"\d+"

    @property
    def chars(self) -> str:
        return "0123456789." if self.dot else "0123456789"


NUMBER = FieldKind(dot=True, max_digits=0, value=float)
"""A decimal number that ``float()`` reads: a garbled "1.2.3" or "." makes no stats line."""
COUNT = FieldKind(dot=False, max_digits=18, value=int)
"""A request count: one longer than any real one makes no stats line (int() refuses 4,300 digits)."""
DIGITS = FieldKind(dot=False, max_digits=0, value=str)
"""Digits kept as text (an engine index "000")."""


class Field(NamedTuple):
    name: str
    kind: FieldKind


class Group(NamedTuple):
    """Literal texts (a str, or a tuple of alternatives) with a field between each two."""
    optional: bool
    items: tuple


STATS_LINE = (
    Group(True, ("Engine ", Field("engine", DIGITS), ": ")),
    Group(False, ("Avg prompt throughput: ", Field("prompt", NUMBER), " tokens/s, Avg generation throughput: ",
                  Field("gen", NUMBER), " tokens/s, Running: ", Field("running", COUNT), " reqs")),
    Group(True, (", Swapped: ", Field("swapped", DIGITS), " reqs")),
    Group(True, ((", Pending: ", ", Waiting: "), Field("waiting", COUNT), " reqs")),
    Group(True, (", GPU KV cache usage: ", Field("kv", NUMBER), "%")),
)
"""The stats line: ``(?:Engine N: )?Avg prompt throughput: X tokens/s, Avg generation throughput:
Y tokens/s, Running: R reqs(, Swapped: S reqs)?(, (Pending|Waiting): W reqs)?(, GPU KV cache
usage: K%)?``, searched anywhere in a line. Shape (what lets the C reader match it without
backtracking, checked by ``_check_grammar``): at most one optional group before the one required
group, optional groups after it; each group alternates literals and fields, starting and ending
with a literal; the first literal of the required group (the anchor) is one text; a literal
next to a field starts / ends with a character the field cannot hold; no alternative is a
prefix of another; no character of the group before the anchor, nor a field there, can hold
the anchor's first character."""

ERA_MARKERS = ("MM cache hit rate", "External prefix")
"""Field names only the 2026 V1 stats lines print."""
IDENTITY_FIELDS = ("engine",)
"""The fields whose text ``engine_and_era`` reads (besides which optional groups matched, whether
any of the ``ERA_MARKERS`` is in the line, and the actor prefix)."""


def _literals(item) -> tuple[str, ...]:
    return item if isinstance(item, tuple) else (item,)


def _check_grammar(groups) -> None:
    required = [i for i, g in enumerate(groups) if not g.optional]
    if len(required) != 1 or required[0] > 1:
        raise ValueError("one required group, after at most one optional group")
    for group in groups:
        items = group.items
        if not items or len(items) % 2 == 0:
            raise ValueError("a group alternates literals and fields, from a literal to a literal")
        for k, item in enumerate(items):
            if k % 2:
                if not isinstance(item, Field):
                    raise ValueError(f"field expected at {item!r}")
                item.kind.regex     # noqa: B018  (refuses a kind the readers cannot read)
                before, after = _literals(items[k - 1]), _literals(items[k + 1])
                if any(t[-1] in item.kind.chars for t in before) or any(t[0] in item.kind.chars for t in after):
                    raise ValueError(f"a literal next to {item.name} could continue it")
            else:
                texts = _literals(item)
                if not texts or not all(isinstance(t, str) and t and t.isascii() for t in texts):
                    raise ValueError(f"literal texts expected at {item!r}")
                if any(a != b and b.startswith(a) for a in texts for b in texts):
                    raise ValueError(f"one alternative is a prefix of another in {item!r}")
    anchor = groups[required[0]].items[0]
    if isinstance(anchor, tuple) and len(anchor) != 1:
        raise ValueError("the anchor is one literal")
    if required[0] == 1:
        prefix = groups[0].items
        first = _literals(anchor)[0][0]
        if any(first in t for item in prefix[::2] for t in _literals(item)) or \
                any(first in item.kind.chars for item in prefix[1::2]):
            raise ValueError("the group before the anchor could hold the anchor")


def _item_regex(item) -> str:
    if isinstance(item, Field):
        return f"(?P<{item.name}>{item.kind.regex})"
    texts = _literals(item)
    return re.escape(texts[0]) if len(texts) == 1 else "(?:" + "|".join(map(re.escape, texts)) + ")"


def grammar_regex(groups) -> str:
    """The regex of a grammar shaped as ``STATS_LINE``."""
    _check_grammar(groups)
    parts = []
    for group in groups:
        body = "".join(_item_regex(item) for item in group.items)
        parts.append(f"(?:{body})?" if group.optional else body)
    return "".join(parts)


def stats_reader_spec(groups=STATS_LINE, markers=ERA_MARKERS, identity=IDENTITY_FIELDS) -> tuple:
    """The arguments of ``_linescan.StatsReader`` for a grammar shaped as ``STATS_LINE``, flattened:
    ``(literals, steps, groups, fields, identity, markers)``: literals as bytes; steps as ``(first,
    count, field)`` (the alternatives ``literals[first:first + count]``, then the field of that
    index, -1 for none); groups as ``(optional, first step, end step)``; fields as ``(dot,
    max_digits, value)``, value "f", "i" or "s" (float, int, str); identity as field indices;
    markers as bytes."""
    _check_grammar(groups)
    fields = [item for group in groups for item in group.items[1::2]]
    index = {field.name: i for i, field in enumerate(fields)}
    literals, steps, spans = [], [], []
    for group in groups:
        first = len(steps)
        for k in range(0, len(group.items), 2):
            texts = _literals(group.items[k])
            field = group.items[k + 1] if k + 1 < len(group.items) else None
            steps.append((len(literals), len(texts), -1 if field is None else index[field.name]))
            literals.extend(text.encode() for text in texts)
        spans.append((group.optional, first, len(steps)))
    kinds = tuple((f.kind.dot, f.kind.max_digits, {float: "f", int: "i", str: "s"}[f.kind.value]) for f in fields)
    return (tuple(literals), tuple(steps), tuple(spans), kinds, tuple(index[name] for name in identity),
            tuple(m.encode() for m in markers))


STATS_FIELDS = tuple(item for group in STATS_LINE for item in group.items[1::2])
"""The fields of ``STATS_LINE`` in order (the order of ``stats_values`` and the C reader's values)."""
_NUMBER = NUMBER.regex
_COUNT = COUNT.regex
STATS_RE = re.compile(grammar_regex(STATS_LINE))
_ANCHOR = next(_literals(g.items[0])[0] for g in STATS_LINE if not g.optional)
_BEFORE_ANCHOR = STATS_LINE[0].items[0] if STATS_LINE[0].optional else None
"""The literal "Engine " that starts the group before the anchor, found nowhere else in it (what
``stats_match`` relies on)."""
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
        era = "v1-2026" if any(marker in text for marker in ERA_MARKERS) else "v1"
    else:
        era = "v1-early"
    return engine, era


def stats_match(text: str) -> re.Match | None:
    """The ``STATS_RE`` match of a line (the ASCII form for ASCII text). The leftmost match starts
    at the first anchor ("Avg prompt throughput: ") or at the "Engine " just before it (the group
    before the anchor cannot hold one): searching from there finds the same match as searching
    the whole line, faster."""
    pos = text.find(_ANCHOR)
    if pos < 0:
        return None
    if _BEFORE_ANCHOR is not None:
        before = text.rfind(_BEFORE_ANCHOR, 0, pos)
        pos = before if before >= 0 else pos
    return (STATS_RE_ASCII if text.isascii() else STATS_RE).search(text, pos)


def stats_values(m: re.Match) -> tuple:
    """The values of a match's ``STATS_FIELDS`` (None for a field that did not match), as the C
    reader's ``fields`` gives them."""
    return tuple(None if text is None else field.kind.value(text)
                 for field, text in zip(STATS_FIELDS, m.group(*_FIELD_NAMES)))


_FIELD_NAMES = tuple(field.name for field in STATS_FIELDS)
_SAMPLE_FIELDS = tuple(_FIELD_NAMES.index(name) for name in ("prompt", "gen", "running", "waiting", "kv"))
_sample_values = operator.itemgetter(*_SAMPLE_FIELDS)
_new_sample = StatsSample._make


def sample_of_values(text: str, values: tuple, engine: str, era: str, source: str, line: int,
                     ts: float | None) -> StatsSample:
    """The sample of a stats line from its ``stats_values`` and its ``engine_and_era``."""
    prompt, gen, running, waiting, kv = _sample_values(values)
    # positional, in field order (engine, ts, prompt_tok_s, gen_tok_s, running, waiting, kv_pct,
    # source, line, era, text): thousands are built per bundle
    return _new_sample((engine, ts, prompt, gen, running, waiting or 0, kv, source, line, era, text))


def stats_sample(text: str, m: re.Match, engine: str, era: str, source: str, line: int, ts: float | None) -> StatsSample:
    """The sample of a stats line from its match and its ``engine_and_era``."""
    return sample_of_values(text, stats_values(m), engine, era, source, line, ts)


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
