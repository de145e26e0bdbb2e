"""Progress on stderr for long work, only when stderr is a terminal (silent when piped or captured)."""
from __future__ import annotations

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
        now = time.monotonic()
        if now < self._quiet_until:
            return
        if not force and now - self._last < self._interval and (self.total is None or self.done < self.total):
            return
        self._last = now
        if self.total:
            filled = int(20 * self.done / self.total)
            text = f"{self.label}: [{'#' * filled}{'.' * (20 - filled)}] {self.done}/{self.total} {detail}"
        else:
            text = f"{self.label}: {detail}" if detail else f"{self.label}: {self.done}"
        text = text[:160]
        self.stream.write("\r" + text.ljust(self._width))
        self._width = len(text)
        self.stream.flush()

    def step(self, detail: str) -> None:
        """A named step of work with no total (live probe steps)."""
        self.update(self.done + 1, detail, force=True)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_CURRENT: Progress | None = None
_DISABLED = False


def set_current(progress: Progress | None) -> None:
    """The progress line that deep code (the log scan, the capture writer) reports to, or None."""
    global _CURRENT
    _CURRENT = progress


def disable() -> None:
    """No progress at all in this process (triage workers share the parent's terminal)."""
    global _DISABLED
    _DISABLED = True


def current() -> Progress | None:
    return None if _DISABLED else _CURRENT


SCAN_DELAY_S = 0.5
"""A bundle scan shows progress only once it has taken this long."""


def scan_progress(total_files: int) -> Progress:
    """Progress of one bundle's log scan (files and bytes scanned); a no-op unless stderr is a TTY."""
    return Progress("scan", total_files, delay_s=SCAN_DELAY_S)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
