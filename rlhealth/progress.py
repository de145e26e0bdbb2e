"""Progress on stderr for long work, only when stderr is a terminal (silent when piped or captured,
and under ``--quiet``: ``disable``).

``Progress`` is one status line rewritten in place; ``ScanProgress`` is a bundle's log scan (bytes
and files, block by block inside a large file, then the trial directories); the live probe's steps
go to the ``current()`` line the probe command sets.
"""
from __future__ import annotations

import os
import sys
import time


class Progress:
    """One status line rewritten in place: ``label: done/total detail``. A no-op unless stderr is a TTY."""

    def __init__(self, label: str, total: int | None = None, *, stream=None, min_interval_s: float = 0.1,
                 delay_s: float = 0.0):
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.enabled = bool(self.stream.isatty()) and not _DISABLED
        except (AttributeError, ValueError):
            self.enabled = False
        self.label, self.total, self.done = label, total, 0
        self._last = 0.0
        self._quiet_until = time.monotonic() + delay_s
        """Nothing is drawn before this (short work never flashes a progress line)."""
        self._interval = min_interval_s
        self._width = 0

    def update(self, done: int | None = None, detail: str = "", *, force: bool = False) -> None:
        self.done = self.done + 1 if done is None else done
        if not self.enabled:
            return
        if self.total:
            text = f"{self.label}: {bar(self.done, self.total)} {self.done}/{self.total} {detail}"
        else:
            text = f"{self.label}: {detail}" if detail else f"{self.label}: {self.done}"
        self.draw(text, force=force or (self.total is not None and self.done >= self.total))

    def draw(self, text: str, *, force: bool = False) -> bool:
        """Show ``text`` as the line (at most every ``min_interval_s`` unless ``force``; never
        before ``delay_s``); True when it was drawn."""
        if not self.enabled or _DISABLED:
            return False
        now = time.monotonic()
        if now < self._quiet_until or (not force and now - self._last < self._interval):
            return False
        self._last = now
        text = text[:_columns() - 1]
        try:
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
        except (OSError, ValueError):      # a terminal that went away: no more progress
            self.enabled = False
            return False
        self._width = len(text)
        global _LIVE
        _LIVE = self
        return True

    def step(self, detail: str) -> None:
        """A named step of work with no total (live probe steps)."""
        self.update(self.done + 1, detail, force=True)

    def close(self) -> None:
        if self.enabled and self._width:
            try:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._width = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def bar(done: float, total: float, width: int = 20) -> str:
    filled = int(width * min(max(done / total, 0.0), 1.0)) if total else 0
    return f"[{'#' * filled}{'.' * (width - filled)}]"


def _columns() -> int:
    """The terminal's width (160 when unknown): a longer line would wrap and break ``\\r``."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return max(40, min(columns, 400)) if columns > 0 else 160     # 0: a terminal that never said


_CURRENT: Progress | None = None
_DISABLED = False
_LIVE: Progress | None = None
"""The line drawn last (``clear_line`` wipes it before a message, e.g. on an interrupt)."""


def clear_line() -> None:
    """Wipe the progress line still on the terminal, if any."""
    if _LIVE is not None:
        _LIVE.close()


def set_current(progress: Progress | None) -> None:
    """The progress line that deep code (the log scan, the capture writer) reports to, or None."""
    global _CURRENT
    _CURRENT = progress


def disable() -> None:
    """No progress at all in this process (``--quiet``; triage workers share the parent's terminal)."""
    global _DISABLED
    _DISABLED = True


def current() -> Progress | None:
    return None if _DISABLED else _CURRENT


SCAN_DELAY_S = 0.5
"""A bundle scan shows progress only once it has taken this long."""
SCAN_INTERVAL_S = 0.1
"""The scan's line is redrawn at most this often."""


class ScanProgress:
    """One bundle's log scan on a terminal: ``scan: [####....] 412.0 MiB / 1.2 GiB, file 2/5
    finelog.log``, advanced block by block (a single gigabyte file moves the bar too), then the
    trial directories. ``enabled`` is False (and every call a no-op) unless stderr is a TTY."""

    def __init__(self, paths: list, *, stream=None, delay_s: float | None = None):
        self.line = Progress("scan", stream=stream, delay_s=SCAN_DELAY_S if delay_s is None else delay_s,
                             min_interval_s=SCAN_INTERVAL_S)
        self.enabled = self.line.enabled
        self.files, self.total_bytes = len(paths), sum(_size(p) for p in paths) if self.enabled else 0
        self.file_no, self.done_bytes, self.rel = 0, 0, ""

    def start_file(self, rel: str) -> None:
        if self.enabled:
            self.file_no += 1
            self.rel = rel
            self._draw()

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more of the current file scanned."""
        if self.enabled:
            self.done_bytes += nbytes
            self._draw()

    def note(self, detail: str) -> None:
        """A step after (or beside) the log files, e.g. the trial directories."""
        if self.enabled:
            self.line.draw(f"scan: {self._bytes()}; {detail}", force=True)

    def trials(self, done: int, total: int) -> None:
        """``done`` of ``total`` trial-directory chunks read by this process."""
        if self.enabled:
            self.line.draw(f"trials: {bar(done, total)} {done}/{total} chunks of trial directories read here")

    def _bytes(self) -> str:
        return f"{human_bytes(self.done_bytes)} / {human_bytes(self.total_bytes)}"

    def _draw(self) -> None:
        self.line.draw(f"scan: {bar(self.done_bytes, self.total_bytes)} {self._bytes()}, "
                       f"file {self.file_no}/{self.files} {self.rel}")

    def close(self) -> None:
        self.line.close()


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def scan_progress(total_files: int) -> Progress:
    """Progress of one bundle's log scan counted in files; a no-op unless stderr is a TTY."""
    return Progress("scan", total_files, delay_s=SCAN_DELAY_S)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
