"""Streaming multi-pattern scan of log files with one compiled hyperscan database.

Each file is read in large newline-aligned blocks; hyperscan scans the block and
reports (pattern id, end offset) for every match; line numbers and line text are
recovered only for matching lines. Memory is bounded by the block size plus
``MAX_LINE_BYTES`` whatever the file size; a line longer than that is scanned in
segments that keep its line number.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import hyperscan

from rlhealth.probes.textio import QUOTE_MAX_CHARS, clean_line

PURE_PYTHON = os.environ.get("RLHEALTH_PURE_PYTHON", "") not in ("", "0")
"""``RLHEALTH_PURE_PYTHON=1``: the C extension is not loaded (the Python implementation runs)."""
_linescan = None
if not PURE_PYTHON:
    try:
        from rlhealth.probes import _linescan
    except ImportError:     # a build without the C extension: the Python implementation
        _linescan = None

LINE_ENGINE = "c" if _linescan is not None else "python"
"""Who turns a block's matches into matching lines: "c" (``rlhealth.probes._linescan``, no newline mask,
no numpy) or "python" (``Scanner._lines_python``); both give the same lines (tests/unit/test_linescan.py).
With "c", the log routing reads stats lines with ``_linescan.StatsReader`` (probes/extractors/stats.py)."""

BLOCK_BYTES = 8 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
NUMPY_MIN_BYTES = 256 * 1024
"""Blocks at least this big count newlines with numpy; smaller ones with bytes.count (no numpy import)."""


@dataclass(frozen=True)
class Pattern:
    key: str
    regex: str
    caseless: bool = False
    parts: tuple[str, ...] = ()
    """The expressions hyperscan compiles in the place of ``regex``, each under this key: a line
    matches one of them exactly when it matches ``regex`` (written so hyperscan finds literals in
    them). Empty: ``regex`` itself."""

    def expressions(self) -> tuple[str, ...]:
        """What hyperscan compiles for this pattern: ``parts``, else ``scan_expressions(regex)``."""
        return self.parts or scan_expressions(self.regex)


_LINE_START = "(?:^|\\n)"


def scan_expressions(regex: str) -> tuple[str, ...]:
    """``regex`` as hyperscan compiles it: a top-level branch ``(?:^|\\n)R`` (R at a line start)
    as the two expressions ``^R`` and ``\\nR``, the other branches joined as one. The same matches
    end at the same offsets (an alternation distributes over what follows it), but hyperscan ran
    the joined start over every byte: a fifth of the whole scan for one such branch. ``(regex,)``
    when it has no such branch, or holds a construct this split does not read."""
    if _LINE_START not in regex:
        return (regex,)
    branches = _top_level_branches(regex)
    if branches is None:
        return (regex,)
    others, starts = [], []
    for b in branches:
        rest = b[len(_LINE_START):]
        if b.startswith(_LINE_START) and rest and rest[0] not in "*+?{|)":
            starts += ["^" + rest, "\\n" + rest]
        else:
            others.append(b)
    if not starts:
        return (regex,)
    return tuple((["|".join(others)] if others else []) + starts)


def _top_level_branches(regex: str) -> list[str] | None:
    """The branches of ``regex``'s top-level alternation (of the group spanning it all, if one
    does); None when it holds an inline flag, a comment, a quoted span or a nested class."""
    whole = regex
    for _ in range(2):
        branches, depth, start, i, n = [], 0, 0, 0, len(whole)
        closes_at_end = False
        while i < n:
            c = whole[i]
            if c == "\\":
                if i + 1 < n and whole[i + 1] in "QE":
                    return None
                i += 2
                continue
            if c == "[":
                i += 1
                if i < n and whole[i] == "^":
                    i += 1
                if i < n and whole[i] == "]":
                    i += 1
                while i < n and whole[i] != "]":
                    if whole[i] == "[":
                        return None        # a POSIX class or a nested set
                    i += 2 if whole[i] == "\\" else 1
                if i >= n:
                    return None
            elif c == "(":
                if whole.startswith("(?", i) and not whole.startswith(("(?:", "(?=", "(?!", "(?<=", "(?<!"), i):
                    return None            # inline flags, comments, named groups: not split
                depth += 1
            elif c == ")":
                depth -= 1
                if depth < 0:
                    return None
                if depth == 0 and i == n - 1 and whole.startswith("(?:"):
                    closes_at_end = True
            elif c == "|" and depth == 0:
                branches.append(whole[start:i])
                start = i + 1
            i += 1
        if depth != 0:
            return None
        branches.append(whole[start:])
        if len(branches) == 1 and closes_at_end and _group_spans(whole):
            whole = whole[3:-1]            # "(?:A|B)": the branches of A|B
            continue
        return branches
    return None


def _group_spans(regex: str) -> bool:
    """Whether the group opening ``regex`` closes at its last character."""
    depth, i = 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < len(regex) and regex[i] == "^":
                i += 1
            if i < len(regex) and regex[i] == "]":
                i += 1
            while i < len(regex) and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i == len(regex) - 1
        i += 1
    return False


@dataclass
class LineHit:
    """One line that matched at least one pattern."""
    source: str
    lineno: int
    keys: tuple[str, ...]
    text: str
    block: bytes = field(repr=False)
    """The scanned block (bytes or a reused bytearray): valid only during the ``on_hit`` call."""
    end: int = field(repr=False)
    """Offset in ``block`` just past this line (before its newline)."""
    block_end: int | None = field(default=None, repr=False)
    """Where the scanned block ends inside ``block`` (None: at ``len(block)``)."""
    at: int | None = None
    """For a line longer than a quote: where the middle of its first signature match lies in
    ``text`` (a character offset; the quote is taken around it). None for a shorter line."""

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

    def line_bytes(self) -> bytes:
        """The bytes of this line as scanned (its segment, for a line longer than a block)."""
        return bytes(self.block[self.block.rfind(b"\n", 0, self.end) + 1: self.end])

    def preceding_bytes(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the block ending at the end of this line."""
        return self.block[max(0, self.end - max_bytes): self.end]


def pattern_arguments(patterns: list[Pattern]) -> tuple[list[bytes], list[int]]:
    """The expressions and flags a database of ``patterns`` is compiled from (ids: positions in
    ``expression_patterns(patterns)``)."""
    return ([e.encode() for p in patterns for e in p.expressions()],
            [hyperscan.HS_FLAG_CASELESS if p.caseless else 0 for p in patterns for _ in p.expressions()])


def expression_patterns(patterns: list[Pattern]) -> list[Pattern]:
    """The pattern of each compiled expression, by expression id."""
    return [p for p in patterns for _ in p.expressions()]


class Scanner:
    """A compiled hyperscan database over a fixed list of patterns."""

    def __init__(self, patterns: list[Pattern]):
        self.patterns = list(patterns)
        self._np = None   # numpy, imported by the first block big enough to need it (start-up time)
        self._expression_patterns = expression_patterns(self.patterns)
        self._keys = [p.key for p in self._expression_patterns]
        """The key of each compiled expression, by id (what hyperscan reports)."""
        self._key_cache: dict[int, tuple[str, ...]] = {}
        self._python_rx: dict[int, re.Pattern | None] = {}
        self._buffers = None
        self._buffer_lock = threading.Lock()
        self._db = compiled_database(*pattern_arguments(self.patterns))
        ids = [i for i, key in enumerate(self._keys) if key == "x_stats"]   # one expression keyed x_stats
        self.stats_id: int | None = ids[0] if len(ids) == 1 else None
        """The id of the one pattern keyed ``x_stats`` (what a ``StatsSink`` takes), else None."""

    def _numpy(self):
        if self._np is None:
            import numpy   # vectorized newline counts for big blocks: the per-byte work stays in C

            self._np = numpy
            # numpy.count_nonzero is a Python wrapper around this C function (called once per
            # matching line: the wrapper was a third of the cost)
            core = getattr(numpy, "_core", None) or getattr(numpy, "core", None)
            self._count_nonzero = getattr(getattr(core, "_multiarray_umath", None), "count_nonzero", numpy.count_nonzero)
        return self._np

    def preload_numpy(self) -> None:
        """Import numpy now if the scan will use it (a process about to fork readers that scan
        big files shares it); the C line engine does not."""
        if LINE_ENGINE != "c":
            self._numpy()

    def scan_file(self, path: Path, source: str, on_hit: Callable[[LineHit], None],
                  block_bytes: int = BLOCK_BYTES) -> int:
        """Scan one file, calling ``on_hit`` for each matching line in order.

        Returns the number of lines read. Raises OSError if the file cannot be opened/read.
        """
        lineno = 0
        for block, end, count, hits in self.iter_blocks(path, block_bytes):
            if hits:
                for start, line_end, line_index, keys in hits:
                    text, at = self.hit_text(block[start:line_end], keys)
                    on_hit(LineHit(source=source, lineno=lineno + line_index + 1, keys=keys, text=text,
                                   block=block, end=line_end, block_end=end, at=at))
            lineno += count
        return lineno

    def hit_text(self, raw: bytes | bytearray, keys: tuple[str, ...]) -> tuple[str, int | None]:
        """The text of a matching line (its first ``MAX_LINE_BYTES``) and, for a line longer than a
        quote, where the middle of its match lies in that text (``LineHit.at``). The match is found
        by scanning this one line again (only long lines: most lines are returned as they are). A
        match beyond ``MAX_LINE_BYTES`` (the end of a giant line) gives the line's head, `` … ``, and
        the text around the match, so the line still starts as it did (timestamp, prefixes) and
        holds its match."""
        max_line = MAX_LINE_BYTES
        if len(raw) <= QUOTE_MAX_CHARS:
            return clean_line(raw), None
        if all(k.startswith("x_") for k in keys):   # extractors only (metric records): no signature to centre on
            return clean_line(raw[:max_line]), None
        span = self.match_span(raw, keys)
        if span is None:
            return clean_line(raw[:max_line]), None
        start, end = span
        middle = start + min(end - start, int(QUOTE_MAX_CHARS * 0.8)) // 2
        if end <= max_line:
            return clean_line(raw[:max_line]), len(clean_line(raw[:middle]))
        head = clean_line(raw[:QUOTE_MAX_CHARS]) + " … "
        lo = max(QUOTE_MAX_CHARS, middle - 2 * QUOTE_MAX_CHARS)
        before = clean_line(raw[lo:middle])
        return head + before + clean_line(raw[middle:middle + 2 * QUOTE_MAX_CHARS]), len(head) + len(before)

    def match_span(self, raw: bytes | bytearray, keys: tuple[str, ...]) -> tuple[int, int] | None:
        """``(start, end)`` byte offsets of the first match in ``raw`` of a pattern keyed by one of
        ``keys`` (signatures before extractors, the ``x_`` keys), or None. Hyperscan reports where a
        match ends; its start is found with Python's ``re`` on the bytes before that end (a pattern
        ``re`` cannot compile, or no match ending there: the match is taken as ending there)."""
        wanted = set(keys)
        ends: dict[bool, tuple[int, int]] = {}

        def on_match(pid, _from, to, _flags, _ctx):
            key = self._keys[pid]
            if key in wanted:
                extractor = key.startswith("x_")
                if extractor not in ends or to < ends[extractor][0]:
                    ends[extractor] = (to, pid)

        data = bytes(raw)
        self._db.scan(data, match_event_handler=on_match)
        found = ends.get(False) or ends.get(True)
        if found is None:
            return None
        end, pid = found
        rx = self._python_regex(pid)
        if rx is not None:
            for m in rx.finditer(data, max(0, end - 8192), end):
                if m.end() == end:
                    return m.start(), end
        return end, end

    def _python_regex(self, pid: int):
        cache = self._python_rx
        if pid not in cache:
            p = self._expression_patterns[pid]
            try:
                cache[pid] = re.compile(p.regex.encode(), re.IGNORECASE if p.caseless else 0)
            except (re.error, ValueError, OverflowError):
                cache[pid] = None
        return cache[pid]

    def iter_blocks(self, path: Path, block_bytes: int = BLOCK_BYTES, sink=None):
        """Yield ``(buffer, end, newlines, hits)`` per newline-aligned block of one file.

        ``sink``: a ``_linescan.StatsSink`` (C line engine only) that takes the lines matched by
        its pattern alone, as it documents; they are then not among the hits.

        The block is ``buffer[:end]`` (``buffer`` may extend past it). ``hits`` lists the matching
        lines in order as ``(line_start, line_end, line_index_in_block, keys)``; ``newlines`` is the
        number of newlines in the block. Blocks are cut exactly as ``scan_file`` has always cut them:
        at the last newline of ``carry + read(block_bytes)``, a line without newline being carried
        until it reaches ``MAX_LINE_BYTES`` (then scanned as a segment of its own).
        """
        max_line = MAX_LINE_BYTES
        cap = block_bytes + max_line
        # One read buffer and one newline mask (Python line engine), reused for every block of every file: a fresh
        # 8 MiB bytes object (and comparison array) per block fragmented the malloc heap, so RSS
        # grew with the number of blocks, i.e. with the log size. The yielded buffer is only valid
        # until the next block is read. A concurrent scan with the same Scanner gets its own.
        owned = self._buffer_lock.acquire(blocking=False)
        try:
            small = LINE_ENGINE == "c" or _file_size(path) < NUMPY_MIN_BYTES     # no newline mask needed
            if owned:
                if self._buffers is None or len(self._buffers[0]) != cap or (not small and self._buffers[1] is None):
                    self._buffers = None
                    self._buffers = (bytearray(cap), None if small else self._numpy().empty(cap, dtype=bool))
                buf, mask = self._buffers
            else:
                buf, mask = bytearray(cap), None if small else self._numpy().empty(cap, dtype=bool)
            yield from self._blocks(path, block_bytes, max_line, cap, buf, mask, sink)
        finally:
            if owned:
                self._buffer_lock.release()

    def _blocks(self, path: Path, block_bytes: int, max_line: int, cap: int, buf: bytearray, mask, sink=None):
        view = memoryview(buf)
        carry = b""
        with open(path, "rb", buffering=0) as handle:
            seekable = handle.seekable()
            reread = 0      # bytes of the previous block re-read instead of carried
            while True:
                want = block_bytes + reread
                reread = 0
                if carry or want > cap:
                    # a line longer than a block is being carried: plain bytes, as always
                    data = _read_full(handle, want)
                    eof = not data
                    block = carry + data if carry else data
                    carry = b""
                    size, new = len(block), len(data)
                else:
                    size = new = _readinto_full(handle, view[:want])
                    eof = size == 0
                    block = buf
                if size == 0:
                    break
                if eof:
                    end = size
                else:
                    nl = block.rfind(b"\n", 0, size)
                    if nl < 0:
                        if size < max_line:
                            carry = bytes(block[:size])
                            continue
                        end = size   # giant line: scan this segment, keep its line number
                    else:
                        end = nl + 1
                        if end < size:
                            if seekable and end > size - new:
                                # re-read the partial last line with the next block instead of
                                # carrying it: same bytes, same blocks
                                reread = size - end
                                handle.seek(-reread, 1)
                            else:
                                carry = bytes(block[end:size])
                yield block, end, *self._scan_block(block, end, mask, sink)
                if eof:
                    break

    def _scan_block(self, block: bytes | bytearray, end: int, mask=None, sink=None) -> tuple[int, list]:
        """Scan ``block[:end]``: (newlines in it, matching lines). ``mask``: a reusable bool array
        (the Python path's newline mask); ``sink``: see ``iter_blocks``."""
        data = memoryview(block)[:end] if end != len(block) else block
        if LINE_ENGINE == "c":
            collector = _linescan.Collector()
            self._db.scan(data, match_event_handler=collector)
            return collector.lines(block, end, self._key_cache, self._keys, sink)
        matches: list[tuple[int, int]] = []
        append = matches.append

        def on_match(pid, _from, to, _flags, _ctx):
            append((to, pid))

        self._db.scan(data, match_event_handler=on_match)
        return self._lines_python(block, end, matches, mask)

    def _lines_python(self, block: bytes | bytearray, end: int, matches: list[tuple[int, int]], mask) -> tuple[int, list]:
        """What ``_linescan.Collector.lines`` computes, in Python (for a build without the extension)."""
        if end < NUMPY_MIN_BYTES:
            count_bytes = block.count

            def newlines(a: int, b: int) -> int:
                return count_bytes(b"\n", a, b)
        else:
            np = self._numpy()
            arr = np.frombuffer(block, dtype=np.uint8, count=end)
            is_nl = np.equal(arr, 10, out=mask[:end]) if mask is not None and len(mask) >= end else arr == 10
            count_nonzero = self._count_nonzero

            def newlines(a: int, b: int) -> int:
                return int(count_nonzero(is_nl[a:b]))
        if not matches:
            return newlines(0, end), []
        if len(matches) > 1:
            matches.sort()
        # Line bounds from bytes.rfind/find (memchr); line numbers by counting the newline mask
        # between consecutive matching lines (no per-block index arrays: no allocation churn).
        key_cache = self._key_cache
        keys_of = self._keys
        find, rfind = block.find, block.rfind
        hits = []
        pos = 0
        k = 0           # newlines before ``pos``
        i = 0
        n = len(matches)
        while i < n:
            to = matches[i][0]
            # the line of a match holds its last byte (offset to-1)
            start = rfind(b"\n", 0, to - 1 if to > 0 else 0) + 1
            if start > pos:
                k += newlines(pos, start)
                pos = start
            line_end = find(b"\n", start, end)
            if line_end < 0:
                line_end = end
            first = matches[i][1]
            i += 1
            if i < n and matches[i][0] - 1 <= line_end:
                pids = {first}
                while i < n and matches[i][0] - 1 <= line_end:
                    pids.add(matches[i][1])
                    i += 1
                keys = tuple(sorted({keys_of[p] for p in pids}))
            else:
                keys = key_cache.get(first)
                if keys is None:
                    keys = key_cache[first] = (keys_of[first],)
            hits.append((start, line_end, k, keys))
        total = k + newlines(pos, end)
        return total, hits


def database_cache_dir() -> Path | None:
    """Where compiled pattern databases are kept: ``$RLHEALTH_CACHE_DIR`` when it names an
    absolute directory, else nowhere. Off by default: the read-only guarantee (contract section 6)
    lists every file rlhealth writes, and a cache is written only when the operator asks for it."""
    configured = os.environ.get("RLHEALTH_CACHE_DIR", "").strip()
    return Path(configured) if os.path.isabs(configured) else None


PACKAGED_DATABASE_DIR = "compiled"
"""Where an install keeps the database of the packaged signatures, under ``rlhealth/rules/``
(written by ``setup.py``'s build step, ``write_packaged_database``; read-only at run time)."""


def database_key(expressions: list[bytes], flags: list[int]) -> str:
    """What a database is compiled from: the hyperscan version, the mode, the expressions with
    their ids and flags (a file of another key is never loaded for these)."""
    import hashlib

    ids = list(range(len(expressions)))
    return hashlib.sha256(repr((getattr(hyperscan, "__version__", ""), hyperscan.HS_MODE_BLOCK,
                                expressions, ids, flags)).encode()).hexdigest()[:32]


def _database_name(key: str) -> str:
    return f"patterns-{key}.hsdb"


def _load_database(data: bytes) -> hyperscan.Database:
    """A serialized database; hyperscan refuses one of another version or CPU platform
    (hyperscan.error) and validates what it deserializes."""
    db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    return db


def _packaged_database(key: str) -> hyperscan.Database | None:
    """The database the install compiled for these patterns, if there is one that loads."""
    from importlib import resources

    try:
        entry = resources.files("rlhealth.rules").joinpath(PACKAGED_DATABASE_DIR, _database_name(key))
        if not entry.is_file():
            return None
        return _load_database(entry.read_bytes())
    except (OSError, hyperscan.error, TypeError, ValueError, ModuleNotFoundError):
        return None


def _compile_database(expressions: list[bytes], flags: list[int]) -> hyperscan.Database:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions), flags=flags)
    return db


def compiled_database(expressions: list[bytes], flags: list[int]) -> hyperscan.Database:
    """A block-mode database of ``expressions`` (ids = positions): the one the install compiled
    (``write_packaged_database``: the packaged signatures' patterns, compiled by the same hyperscan
    on the same machine), else one cached by an earlier run (``$RLHEALTH_CACHE_DIR``), else
    compiled now (0.1-0.5 s of CPU; loading takes well under a millisecond) and cached when a
    cache directory is set. A missing, unreadable, corrupt, mismatched or another user's file
    only costs the compilation (hyperscan validates what it deserializes); nothing here fails
    because of a stored database."""
    key = database_key(expressions, flags)
    db = _packaged_database(key)
    if db is not None:
        return db
    cache_dir = database_cache_dir()
    path = cache_dir / _database_name(key) if cache_dir is not None else None
    if path is not None:
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_uid != os.geteuid():
                    raise PermissionError("another user's cache file")   # in a shared cache directory
                return _load_database(handle.read())
        except (OSError, hyperscan.error, TypeError, ValueError):
            pass
    db = _compile_database(expressions, flags)
    if path is not None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(hyperscan.dumpb(db))
            os.replace(tmp, path)   # atomic: concurrent diagnoses read a whole file or none
            _prune_database_cache(path.parent)
        except (OSError, hyperscan.error):
            try:
                tmp.unlink()
            except OSError:
                pass
    return db


def write_packaged_database(patterns: list[Pattern], rules_dir: Path) -> Path:
    """Compile the database of ``patterns`` into ``rules_dir/compiled/`` (the install's build step:
    ``rules_dir`` is the built ``rlhealth/rules``), named by its key, alone there. Returns its path."""
    expressions, flags = pattern_arguments(patterns)
    out = Path(rules_dir) / PACKAGED_DATABASE_DIR
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("patterns-*.hsdb"):
        old.unlink()
    path = out / _database_name(database_key(expressions, flags))
    path.write_bytes(hyperscan.dumpb(_compile_database(expressions, flags)))
    return path


DATABASE_CACHE_KEEP = 16
"""Cached databases kept (newest first); older ones (earlier catalogs) are removed."""


def _prune_database_cache(cache_dir: Path) -> None:
    stamped = []
    for p in cache_dir.glob("patterns-*.hsdb"):
        try:
            stamped.append((p.stat().st_mtime, p))
        except OSError:
            continue
    for _, p in sorted(stamped, reverse=True)[DATABASE_CACHE_KEEP:]:
        try:
            p.unlink()
        except OSError:
            pass


def _file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return NUMPY_MIN_BYTES   # unknown: the open() that follows reports the error


def _readinto_full(handle, view: memoryview) -> int:
    """Fill ``view`` (fewer bytes only at end of file); return the number of bytes read."""
    got = 0
    size = len(view)
    while got < size:
        n = handle.readinto(view[got:])
        if not n:
            break
        got += n
    return got


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


_PREFIX = re.compile(r"^\s*(?:(?:\([^)]{1,200}\)|\[rank[0-9]{1,6}\]:)\s?){1,4}")


def actor_prefix(text: str) -> str:
    """The leading Ray actor / torchrun rank prefixes of a line, whitespace removed ("" if none):
    the stream a line of an aggregated log belongs to."""
    m = _PREFIX.match(text)
    return "".join(m.group(0).split()) if m else ""


def strip_actor_prefix(text: str) -> str:
    """Remove leading Ray actor prefixes such as ``(skyrl_entrypoint pid=12)`` -- nested ones too,
    ``(LLMRayActor pid=1) (EngineCore_DP0 pid=2)`` -- and torchrun's per-rank ``[rank3]:``."""
    return _PREFIX.sub("", text, count=1)
