"""The C trial-file reader (probes/parse/_fileread.c) gives what the os.open/os.read path gives.

``trials._read_file`` and ``trials._read_result`` are run with both readers on every kind of
path a hostile trace mirror can hold: a small, an empty, a large (head and tail) and an
over-limit file, a missing one, one under a file, a symlink loop, a dangling symlink, a FIFO
(never read, never blocks), a directory, a device, and a path with a NUL byte.
"""
from __future__ import annotations

import os

import pytest

from rlhealth.probes.parse import trials as T

from rlhealth.probes.parse import _fileread     # built by every install: its absence fails here


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except OSError as exc:
        return ("oserror", type(exc).__name__, exc.errno, exc.strerror)
    except ValueError as exc:
        return ("valueerror", str(exc))


def _both(monkeypatch, fn, *args):
    got = []
    for reader in ("c", "python"):
        monkeypatch.setattr(T, "FILE_READER", reader)
        got.append(_outcome(fn, *args))
    return got


@pytest.fixture()
def paths(tmp_path):
    p = {}
    (tmp_path / "small.json").write_bytes(b'{"reward": 1.0}')
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "large.json").write_bytes(b'{"reward": 0.5, "pad": "' + b"x" * (T.RESULT_FULL_READ_BYTES + 10) + b'"}')
    (tmp_path / "text.txt").write_bytes(b"RuntimeError: boom\n" * 1000)
    (tmp_path / "a_file").write_bytes(b"x")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name in ("small.json", "empty.json", "large.json", "text.txt", "missing", "loop1", "dangling", "fifo", "dir"):
        p[name] = os.fsencode(tmp_path / name)
    p["under_a_file"] = os.fsencode(tmp_path / "a_file" / "x.json")
    p["device"] = b"/dev/null"
    p["nul"] = os.fsencode(tmp_path) + b"/bad\0name"
    return p


@pytest.mark.parametrize("name", ["small.json", "empty.json", "large.json", "text.txt", "missing", "loop1", "dangling",
                                  "fifo", "dir", "under_a_file", "device", "nul"])
def test_read_result_is_the_same_with_both_readers(paths, monkeypatch, name):
    c, py = _both(monkeypatch, T._read_result, paths[name])
    assert c == py


@pytest.mark.parametrize("name", ["small.json", "empty.json", "large.json", "text.txt", "missing", "loop1", "dangling",
                                  "fifo", "dir", "under_a_file", "device", "nul"])
@pytest.mark.parametrize("limit", [0, 1, 15, 16, 4096, 10**9])
def test_read_file_is_the_same_with_both_readers(paths, monkeypatch, name, limit):
    c, py = _both(monkeypatch, T._read_file, paths[name], limit)
    assert c == py


def test_what_the_readers_return(paths, monkeypatch):
    monkeypatch.setattr(T, "FILE_READER", "c")
    assert T._read_file(paths["missing"], 10) is None
    assert T._read_file(paths["text.txt"], 25) == (b"RuntimeError: boom\n" * 2)[:25]
    obj, raw, problem = T._read_result(paths["small.json"])
    assert obj == {"reward": 1.0} and raw is None and problem is None
    assert T._read_result(paths["fifo"]) == (None, None, "unreadable (not a regular file)")
    assert T._read_result(paths["dir"])[2].startswith("unreadable (Is a directory")
    assert T._read_result(paths["large.json"])[1].startswith(b'{"reward": 0.5')      # head and tail, not parsed
    assert _fileread.read_file(paths["large.json"], 100, 1000) == os.path.getsize(paths["large.json"])
    assert _fileread.read_file(paths["device"], 100, 1000) == -1
