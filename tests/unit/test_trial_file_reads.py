"""How a trial's files are read (``trials._read_file``, ``trials._read_result``: os.open, fstat,
os.read) on every kind of path a hostile trace mirror can hold: a small, an empty, a large (head
and tail) and an over-limit file, a missing one, one under a file, a symlink loop, a dangling
symlink, a FIFO (never read, never blocks), a directory, a device, and a path with a NUL byte.
"""
from __future__ import annotations

import errno
import os

import pytest

from rlhealth.probes.parse import trials as T


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except OSError as exc:
        return ("oserror", type(exc).__name__, exc.errno, exc.strerror)
    except ValueError as exc:
        return ("valueerror", str(exc))


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


ABSENT = ("missing", "loop1", "dangling", "under_a_file")
NOT_REGULAR = ("fifo", "device")


@pytest.mark.parametrize("name", ABSENT)
def test_an_absent_file_is_none(paths, name):
    assert T._read_result(paths[name]) is None
    for limit in (0, 1, 10**9):
        assert T._read_file(paths[name], limit) is None


@pytest.mark.parametrize("name", NOT_REGULAR)
def test_a_fifo_or_device_is_never_read(paths, name):
    assert T._read_result(paths[name]) == (None, None, "unreadable (not a regular file)")
    with pytest.raises(T.NotRegularFile):
        T._read_file(paths[name], 10)


@pytest.mark.parametrize("limit", [0, 1, 15, 16, 4096, 10**9])
def test_read_file_stops_at_its_limit(paths, limit):
    assert T._read_file(paths["small.json"], limit) == b'{"reward": 1.0}'[:limit]
    assert T._read_file(paths["text.txt"], limit) == (b"RuntimeError: boom\n" * 1000)[:limit]
    assert T._read_file(paths["empty.json"], limit) == b""
    assert _outcome(T._read_file, paths["dir"], limit) == ("oserror", "IsADirectoryError", errno.EISDIR,
                                                           os.strerror(errno.EISDIR))


def test_what_read_result_returns(paths):
    assert T._read_result(paths["small.json"]) == ({"reward": 1.0}, None, None)
    assert T._read_result(paths["empty.json"]) == (None, None, "empty result.json")
    assert T._read_result(paths["dir"]) == (None, None, f"unreadable ({os.strerror(errno.EISDIR)})")
    obj, raw, problem = T._read_result(paths["text.txt"])
    assert obj is None and raw == b"RuntimeError: boom\n" * 1000 and problem.startswith("malformed result.json")
    obj, raw, problem = T._read_result(paths["large.json"])      # head and tail, not parsed
    assert obj is None and problem is None and len(raw) == 2 * T.RESULT_EDGE_BYTES + 1
    assert raw.startswith(b'{"reward": 0.5') and raw.endswith(b'x"}')


def test_a_nul_in_a_path_is_a_value_error(paths):
    assert _outcome(T._read_result, paths["nul"])[0] == "valueerror"
    assert _outcome(T._read_file, paths["nul"], 10)[0] == "valueerror"
