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
    block_end: int | None = field(default=None, repr=False)
    """Where the scanned block ends inside ``block`` (None: at ``len(block)``)."""

    def following_lines(self, limit: int = 200, max_bytes: int = 256 * 1024) -> Iterable[str]:
        """Lines after this one inside the same block (bounded)."""
        pos = self.end + 1
        size = len(self.block) if self.block_end is None else self.block_end
        stop = min(size, pos + max_bytes)
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
        import numpy   # vectorized newline positions: the per-byte work stays in C

        self._np = numpy
        self._keys = [p.key for p in self.patterns]
        self._key_cache: dict[int, tuple[str, ...]] = {}
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(expressions=[p.regex.encode() for p in self.patterns],
                         ids=list(range(len(self.patterns))), elements=len(self.patterns), flags=flags)

    def scan_file(self, path: Path, source: str, on_hit: Callable[[LineHit], None],
                  block_bytes: int = BLOCK_BYTES) -> int:
        """Scan one file, calling ``on_hit`` for each matching line in order.

        Returns the number of lines read. Raises OSError if the file cannot be opened/read.
        """
        lineno = 0
        for block, end, count, hits in self.iter_blocks(path, block_bytes):
            if hits:
                for start, line_end, line_index, keys in hits:
                    raw = block[start:line_end]
                    if len(raw) > MAX_LINE_BYTES:
                        raw = raw[:MAX_LINE_BYTES]
                    on_hit(LineHit(source=source, lineno=lineno + line_index + 1, keys=keys, text=clean_line(raw),
                                   block=block, end=line_end, block_end=end))
            lineno += count
        return lineno

    def iter_blocks(self, path: Path, block_bytes: int = BLOCK_BYTES):
        """Yield ``(buffer, end, newlines, hits)`` per newline-aligned block of one file.

        The block is ``buffer[:end]`` (``buffer`` may extend past it). ``hits`` lists the matching
        lines in order as ``(line_start, line_end, line_index_in_block, keys)``; ``newlines`` is the
        number of newlines in the block. Blocks are cut exactly as ``scan_file`` has always cut them:
        at the last newline of ``carry + read(block_bytes)``, a line without newline being carried
        until it reaches ``MAX_LINE_BYTES`` (then scanned as a segment of its own).
        """
        carry = b""
        with open(path, "rb", buffering=0) as handle:
            seekable = handle.seekable()
            reread = 0      # bytes of the previous block re-read instead of carried
            while True:
                data = _read_full(handle, block_bytes + reread)
                reread = 0
                eof = not data
                if carry:
                    block = carry + data
                    carry = b""
                else:
                    block = data
                if not block:
                    break
                if eof:
                    end = len(block)
                else:
                    nl = block.rfind(b"\n")
                    if nl < 0:
                        if len(block) < MAX_LINE_BYTES:
                            carry = block
                            continue
                        end = len(block)   # giant line: scan this segment, keep its line number
                    else:
                        end = nl + 1
                        if end < len(block):
                            if seekable and end > len(block) - len(data):
                                # re-read the partial last line with the next block instead of copying
                                # the whole block into ``carry + data``: same bytes, same blocks
                                reread = len(block) - end
                                handle.seek(-reread, 1)
                            else:
                                carry = block[end:]
                yield block, end, *self._scan_block(block, end)
                if eof:
                    break

    def _scan_block(self, block: bytes, end: int) -> tuple[int, list]:
        """Scan ``block[:end]``: (newlines in it, matching lines)."""
        matches: list[tuple[int, int]] = []
        append = matches.append

        def on_match(pid, _from, to, _flags, _ctx):
            append((to, pid))

        view = memoryview(block)[:end] if end != len(block) else block
        self._db.scan(view, match_event_handler=on_match)
        arr = self._np.frombuffer(block, dtype=self._np.uint8, count=end)
        if not matches:
            return int(self._np.count_nonzero(arr == 10)), []
        newlines = self._np.flatnonzero(arr == 10)
        total = len(newlines)
        if len(matches) > 1:
            matches.sort()
        # the line of a match holds its last byte (offset to-1); k = newlines before that byte
        anchors = [to - 1 if to > 0 else 0 for to, _ in matches]
        ks = self._np.searchsorted(newlines, anchors, side="left").tolist()
        nl = newlines.tolist() if total <= 4 * len(matches) else None
        key_cache = self._key_cache
        hits = []
        i = 0
        n = len(matches)
        while i < n:
            k = ks[i]
            if nl is not None:
                start = nl[k - 1] + 1 if k > 0 else 0
                line_end = nl[k] if k < total else end
            else:
                start = int(newlines[k - 1]) + 1 if k > 0 else 0
                line_end = int(newlines[k]) if k < total else end
            pids = [matches[i][1]]
            i += 1
            while i < n and matches[i][0] - 1 <= line_end:
                pids.append(matches[i][1])
                i += 1
            if len(pids) == 1:
                keys = key_cache.get(pids[0])
                if keys is None:
                    keys = key_cache[pids[0]] = (self._keys[pids[0]],)
            else:
                keys = tuple(sorted({self._keys[p] for p in pids}))
            hits.append((start, line_end, k, keys))
        return total, hits


def _read_full(handle, size: int) -> bytes:
    """Read up to ``size`` bytes (fewer only at end of file)."""
    data = handle.read(size)
    if data and len(data) < size:
        parts = [data]
        got = len(data)
        while got < size:
            more = handle.read(size - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        data = b"".join(parts)
    return data or b""


_PREFIX = re.compile(r"^\s*\([^)]{1,200}\)\s?")


def strip_actor_prefix(text: str) -> str:
    """Remove a leading Ray actor prefix such as ``(skyrl_entrypoint pid=12)``."""
    return _PREFIX.sub("", text, count=1)
