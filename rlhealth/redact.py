"""Credential redaction shared by every report that quotes evidence.

``redact(text) -> str`` replaces each credential shape of ``rules/secret_shapes.yaml``
(reference marin-artifacts §6.1) by ``<redacted:<shape>>``, in the file's order. It is
idempotent and fast: the shapes are compiled once at import, and text without any candidate
(the usual log line) costs a single pass of one combined regular expression.

``scan(text)`` finds the shapes without changing anything (check mode): each match carries the
shape, its character span and its 1-based line, and matches of later shapes inside an earlier
shape's match are not reported twice (an iris proxy URL embeds a JWT).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rlhealth.packaged import packaged_yaml

__all__ = ["redact", "scan", "SecretMatch", "SHAPE_NAMES"]

_FLAG_NAMES = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL}
_INLINE = {"IGNORECASE": "i", "MULTILINE": "m", "DOTALL": "s"}


@dataclass(frozen=True)
class _Shape:
    name: str
    regex: re.Pattern
    replacement: str


@dataclass(frozen=True)
class SecretMatch:
    shape: str
    start: int
    end: int
    line: int  # 1-based line of the match start


def _load_shapes() -> tuple[tuple[_Shape, ...], re.Pattern]:
    raw = packaged_yaml("secret_shapes.yaml")
    shapes: list[_Shape] = []
    parts: list[str] = []
    for entry in raw["shapes"]:
        flags = 0
        inline = ""
        for name in entry.get("flags") or []:
            flags |= _FLAG_NAMES[name]
            inline += _INLINE[name]
        shapes.append(_Shape(entry["name"], re.compile(entry["pattern"], flags), f"<redacted:{entry['name']}>"))
        parts.append(f"(?{inline}:{entry['pattern']})" if inline else f"(?:{entry['pattern']})")
    return tuple(shapes), re.compile("|".join(parts))


_SHAPES, _ANY = _load_shapes()
SHAPE_NAMES: tuple[str, ...] = tuple(s.name for s in _SHAPES)


def redact(text: str) -> str:
    """Return ``text`` with every credential shape replaced by ``<redacted:<shape>>``."""
    if not text or _ANY.search(text) is None:
        return text
    for shape in _SHAPES:
        text = shape.regex.sub(shape.replacement, text)
    return text


def scan(text: str) -> list[SecretMatch]:
    """All credential-shaped spans of ``text`` (not modified), sorted by position."""
    if not text or _ANY.search(text) is None:
        return []
    taken: list[tuple[int, int]] = []
    found: list[SecretMatch] = []
    for shape in _SHAPES:
        for m in shape.regex.finditer(text):
            s, e = m.span()
            if any(s < te and ts < e for ts, te in taken):
                continue
            taken.append((s, e))
            found.append(SecretMatch(shape.name, s, e, text.count("\n", 0, s) + 1))
    found.sort(key=lambda f: (f.start, f.shape))
    return found
