"""Streaming multi-pattern scan of log files with one compiled hyperscan database.

Each file is read in large newline-aligned blocks; hyperscan scans the block and
reports (pattern id, end offset) for every match; line numbers and line text are
recovered only for matching lines. Memory is bounded by the block size plus
``MAX_LINE_BYTES`` whatever the file size; a line longer than that is scanned in
segments that keep its line number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import hyperscan

from rlhealth.probes.textio import clean_line

BLOCK_BYTES = 8 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Pattern:
    key: str
    regex: str
    caseless: bool = False


@dataclass
class LineHit:
    """One line that matched at least one pattern."""
    source: str
    lineno: int
    keys: tuple[str, ...]
    text: str
    block: bytes = field(repr=False)
    end: int = field(repr=False)
    """Offset in ``block`` just past this line (before its newline)."""

    def following_lines(self, limit: int = 200, max_bytes: int = 256 * 1024) -> Iterable[str]:
        """Lines after this one inside the same block (bounded)."""
        pos = self.end + 1
        stop = min(len(self.block), pos + max_bytes)
        for _ in range(limit):
            if pos >= stop:
                return
            nl = self.block.find(b"\n", pos, stop)
            if nl < 0:
                nl = stop
            yield clean_line(self.block[pos:nl])
            pos = nl + 1

    def preceding_bytes(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the block ending at the end of this line."""
        return self.block[max(0, self.end - max_bytes): self.end]


class Scanner:
    """A compiled hyperscan database over a fixed list of patterns."""

    def __init__(self, patterns: list[Pattern]):
        self.patterns = list(patterns)
        flags = []
        for p in self.patterns:
            f = 0
            if p.caseless:
                f |= hyperscan.HS_FLAG_CASELESS
            flags.append(f)
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(expressions=[p.regex.encode() for p in self.patterns],
                         ids=list(range(len(self.patterns))), elements=len(self.patterns), flags=flags)

    def scan_file(self, path: Path, source: str, on_hit: Callable[[LineHit], None],
                  block_bytes: int = BLOCK_BYTES) -> int:
        """Scan one file, calling ``on_hit`` for each matching line in order.

        Returns the number of lines read. Raises OSError if the file cannot be opened/read.
        """
        keys = [p.key for p in self.patterns]
        lineno = 0          # lines completed before the current block
        carry = b""
        with open(path, "rb") as handle:
            while True:
                data = handle.read(block_bytes)
                eof = not data
                block = carry + data
                carry = b""
                if not block:
                    break
                if eof:
                    cut = len(block)
                else:
                    nl = block.rfind(b"\n")
                    if nl < 0:
                        if len(block) < MAX_LINE_BYTES:
                            carry = block
                            continue
                        cut = len(block)   # giant line: scan this segment, keep its line number
                    else:
                        cut = nl + 1
                        carry = block[cut:]
                        block = block[:cut]
                lineno = self._scan_block(block, source, lineno, keys, on_hit)
                if eof:
                    break
        return lineno

    def _scan_block(self, block: bytes, source: str, lineno: int, keys: list[str],
                    on_hit: Callable[[LineHit], None]) -> int:
        """Scan one block; return the number of lines completed after it."""
        matches: list[tuple[int, int]] = []

        def on_match(pid, _from, to, _flags, _ctx):
            matches.append((to, pid))
            return 0

        self._db.scan(block, match_event_handler=on_match)
        if matches:
            matches.sort()
            pos = 0
            current = lineno
            i = 0
            while i < len(matches):
                to = matches[i][0]
                # offset `to` is one past the last matched byte; the line holds byte to-1
                anchor = max(0, to - 1)
                line_start = block.rfind(b"\n", 0, anchor) + 1
                current += block.count(b"\n", pos, line_start)
                pos = line_start
                line_end = block.find(b"\n", line_start)
                if line_end < 0:
                    line_end = len(block)
                ids = set()
                while i < len(matches) and matches[i][0] - 1 <= line_end:
                    ids.add(matches[i][1])
                    i += 1
                raw = block[line_start:line_end]
                on_hit(LineHit(source=source, lineno=current + 1, keys=tuple(sorted(keys[k] for k in ids)),
                               text=clean_line(raw[:MAX_LINE_BYTES]), block=block, end=line_end))
        return lineno + block.count(b"\n")


_PREFIX = re.compile(r"^\s*\([^)]{1,200}\)\s?")


def strip_actor_prefix(text: str) -> str:
    """Remove a leading Ray actor prefix such as ``(skyrl_entrypoint pid=12)``."""
    return _PREFIX.sub("", text, count=1)
