"""Safe text handling for evidence lines of any quality.

Bytes are decoded as UTF-8 with replacement, ANSI escapes and trailing CR are
stripped, and quoted lines are cut at ``QUOTE_MAX_CHARS``. Nothing here raises
on bad input.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

QUOTE_MAX_CHARS = 500
MAX_JSON_BYTES = 64 * 1024 * 1024
"""JSON evidence files larger than this are refused (reported, not parsed)."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_PLAIN_BYTES = bytes(range(0x20, 0x7f)) + b"\t"
"""Printable ASCII and tab: a line of only these bytes is its own clean text."""


def clean_line(raw: bytes | str) -> str:
    """Decode, strip ANSI escapes, CR/LF and other control characters."""
    if isinstance(raw, (bytes, bytearray)):
        if not raw.translate(None, _PLAIN_BYTES):
            return raw.decode("ascii")
        text = raw.decode("utf-8", "replace")
    else:
        text = raw
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.rstrip("\r\n")
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    return text


QUOTE_BEFORE_SHARE = 0.5
"""Where the match sits in a quote cut from a longer line: this share of the quote before it."""


def quote(text: str, at: int | None = None) -> str:
    """A line as quoted in a report: secrets redacted, cut at QUOTE_MAX_CHARS. A value that is no
    string (a JSON number or object where evidence should hold text) is quoted as its ``str``.

    ``at`` is where the match that made the line evidence lies in ``text`` (a character offset, the
    middle of the matched span): a longer line is then quoted around it, with ``…`` on each side
    that was cut; without it the line is quoted from its start."""
    from rlhealth.redact import redact

    raw = text if isinstance(text, str) else str(text)
    text = redact(raw)
    if len(text) <= QUOTE_MAX_CHARS:
        return text
    if at is None or at <= 0:
        return text[: QUOTE_MAX_CHARS - 1] + "…"
    at = min(len(redact(raw[:at])) if len(text) != len(raw) else at, len(text))
    start = max(0, at - int(QUOTE_MAX_CHARS * QUOTE_BEFORE_SHARE))
    if start == 0:
        return text[: QUOTE_MAX_CHARS - 1] + "…"
    if start + QUOTE_MAX_CHARS - 1 >= len(text):        # the match is near the end: cut the start only
        return "…" + text[len(text) - (QUOTE_MAX_CHARS - 1):]
    return "…" + text[start: start + QUOTE_MAX_CHARS - 2] + "…"


class JsonReadError(Exception):
    """A JSON evidence file that is missing, unreadable, oversized or malformed."""


def read_json(path: Path, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Read one JSON file defensively; raise JsonReadError with a short reason."""
    try:
        if path.is_symlink() and not path.exists():
            raise JsonReadError("dangling symlink")
        size = path.stat().st_size
        if size > max_bytes:
            raise JsonReadError(f"{size} bytes exceeds the {max_bytes}-byte limit")
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except JsonReadError:
        raise
    except OSError as exc:
        raise JsonReadError(f"unreadable: {exc.strerror or exc}") from exc
    if not data.strip():
        raise JsonReadError("empty file")
    try:
        return json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise JsonReadError(f"malformed JSON: {str(exc)[:120]}") from exc


def safe_walk(root: Path, max_depth: int = 12):
    """Yield regular files below ``root`` (sorted, no symlink loops, bounded depth).

    Symlinked directories are not followed; symlinked files are yielded only if
    they resolve inside ``root``.
    """
    root = Path(root)
    try:
        root_real = root.resolve()
    except OSError:
        return
    stack = [(root, 0)]
    while stack:
        directory, depth = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_symlink():
                    target = Path(entry.path).resolve()
                    if entry.is_file() and str(target).startswith(str(root_real) + os.sep):
                        yield Path(entry.path)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if depth < max_depth:
                        subdirs.append((Path(entry.path), depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    yield Path(entry.path)
            except OSError:
                continue
        stack.extend(reversed(subdirs))
