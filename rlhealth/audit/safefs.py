"""Confined, read-only file access for the audit.

Every path the audit reads goes through a :class:`Root`: a path is read only when its real path
(symlinks resolved) lies inside the root it was found under, and it is a regular file. Anything
else -- a symlink escaping the root, a FIFO or device, an unreadable file -- is recorded as an
issue and skipped, never followed. Files are opened ``O_RDONLY | O_NONBLOCK``; nothing here can
write, create or change a file (reading may update atime on some mounts, never mtime).
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MAX_LINE_BYTES = 1 << 20       # longer lines are cut (the rest of the line is skipped)
MAX_WALK_ENTRIES = 200_000     # per walk; a larger tree is reported as truncated


@dataclass
class Root:
    label: str                 # "run", "bundle", "export", "published"
    path: Path                 # as given by the user (for display)
    issues: list = field(default_factory=list)

    def __post_init__(self):
        self.real = Path(os.path.realpath(self.path))

    # ------------------------------------------------------------------ helpers
    def rel(self, p: Path) -> str:
        try:
            return Path(os.path.abspath(p)).relative_to(Path(os.path.abspath(self.path))).as_posix() or "."
        except ValueError:
            return str(p)

    def display(self, p: Path) -> str:
        return f"{self.label}:{self.rel(p)}"

    def _issue(self, p: Path, problem: str) -> None:
        entry = {"path": self.display(p), "problem": problem}
        if entry not in self.issues:
            self.issues.append(entry)

    def resolve(self, p: Path, *, kind: str = "file") -> Path | None:
        """Real path of ``p`` if it is inside the root and of the wanted kind, else None (issue recorded)."""
        try:
            real = Path(os.path.realpath(p))
        except (OSError, RuntimeError, ValueError) as exc:
            self._issue(p, f"cannot resolve path: {type(exc).__name__}")
            return None
        if real != self.real and self.real not in real.parents:
            self._issue(p, f"symlink points outside the {self.label} tree; not followed")
            return None
        try:
            st = os.stat(real)
        except FileNotFoundError:
            if os.path.islink(p):
                self._issue(p, "dangling symlink")
            return None
        except OSError as exc:
            self._issue(p, f"cannot stat: {exc.strerror or type(exc).__name__}")
            return None
        if kind == "file" and not stat.S_ISREG(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                self._issue(p, "not a regular file; not read")
            return None
        if kind == "dir" and not stat.S_ISDIR(st.st_mode):
            return None
        return real

    def is_file(self, p: Path) -> bool:
        return self.resolve(p, kind="file") is not None

    def is_dir(self, p: Path) -> bool:
        return self.resolve(p, kind="dir") is not None

    def size(self, p: Path) -> int | None:
        real = self.resolve(p)
        if real is None:
            return None
        try:
            return os.stat(real).st_size
        except OSError:
            return None

    # ------------------------------------------------------------------ reading
    def _open(self, p: Path):
        real = self.resolve(p)
        if real is None:
            return None
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(real, flags)
        except OSError as exc:
            self._issue(p, f"unreadable: {exc.strerror or type(exc).__name__}")
            return None
        return os.fdopen(fd, "rb")

    def open_file(self, p: Path):
        """The file opened read-only for streaming (a binary file object, to be closed), or None
        when it is outside the root, not a regular file or unreadable (issue recorded)."""
        return self._open(p)

    def read_bytes(self, p: Path, limit: int, offset: int = 0) -> bytes | None:
        f = self._open(p)
        if f is None:
            return None
        try:
            with f:
                if offset:
                    f.seek(offset)
                return f.read(limit)
        except OSError as exc:
            self._issue(p, f"read failed: {exc.strerror or type(exc).__name__}")
            return None

    def read_text(self, p: Path, limit: int = 16 << 20) -> str | None:
        """Whole (small) file as text; None when unreadable, too large or not UTF-8 (issue recorded)."""
        size = self.size(p)
        if size is None:
            return None
        if size > limit:
            self._issue(p, f"too large to read ({size} bytes > {limit})")
            return None
        data = self.read_bytes(p, limit + 1)
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self._issue(p, "not UTF-8 text")
            return None

    def lines(self, p: Path) -> Iterator[tuple[int, str]]:
        """(1-based line number, line) with ANSI escapes stripped; undecodable bytes replaced."""
        f = self._open(p)
        if f is None:
            return
        try:
            with f:
                n = 0
                while True:
                    chunk = f.readline(MAX_LINE_BYTES)
                    if not chunk:
                        break
                    if not chunk.endswith(b"\n") and len(chunk) == MAX_LINE_BYTES:
                        while True:  # skip the rest of an over-long line
                            rest = f.readline(MAX_LINE_BYTES)
                            if not rest or rest.endswith(b"\n"):
                                break
                    n += 1
                    yield n, ANSI.sub("", chunk.decode("utf-8", "replace").rstrip("\r\n"))
        except OSError as exc:
            self._issue(p, f"read failed: {exc.strerror or type(exc).__name__}")

    # ------------------------------------------------------------------ listing
    def listdir(self, d: Path) -> list[Path]:
        if self.resolve(d, kind="dir") is None:
            return []
        try:
            return sorted(d / name for name in os.listdir(d))
        except OSError as exc:
            self._issue(d, f"cannot list: {exc.strerror or type(exc).__name__}")
            return []

    def walk_files(self, d: Path, max_depth: int = 8, too_deep: list | None = None) -> list[Path]:
        """Regular files below ``d`` (symlinked files inside the root included, escaping ones reported).

        Symlinked directories are never descended into; directories deeper than ``max_depth`` are
        not listed (appended to ``too_deep`` when given)."""
        out: list[Path] = []
        if self.resolve(d, kind="dir") is None:
            return out
        count = 0
        stack = [(d, 0)]
        while stack:
            cur, depth = stack.pop()
            try:
                entries = sorted(os.scandir(cur), key=lambda e: e.name)
            except OSError as exc:
                self._issue(cur, f"cannot list: {exc.strerror or type(exc).__name__}")
                continue
            for e in entries:
                count += 1
                if count > MAX_WALK_ENTRIES:
                    self._issue(d, f"more than {MAX_WALK_ENTRIES} entries; listing truncated")
                    return sorted(out)
                p = Path(e.path)
                try:
                    if e.is_symlink():
                        if self.resolve(p, kind="file") is not None:
                            out.append(p)
                        elif self.resolve(p, kind="dir") is not None:
                            self._issue(p, "symlinked directory; not descended")
                        continue
                    if e.is_dir(follow_symlinks=False):
                        if depth < max_depth:
                            stack.append((p, depth + 1))
                        elif too_deep is not None:
                            too_deep.append(p)
                    elif e.is_file(follow_symlinks=False):
                        out.append(p)
                    else:
                        self._issue(p, "not a regular file; not read")
                except OSError as exc:
                    self._issue(p, f"cannot stat: {exc.strerror or type(exc).__name__}")
        return sorted(out)
