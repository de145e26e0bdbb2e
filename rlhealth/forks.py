"""Work handed to a forked child while this process goes on, and when forking is safe.

A fork is used only on Linux, with two CPUs or more, and with no other Python thread running (a
forked child would inherit the locks those threads hold). Whatever a child fails to deliver is
computed again in this process, so a fork never changes an answer, only when it is ready.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from typing import Any, Callable


def may_fork() -> bool:
    """Linux, and no other thread running."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _start_child(target: Callable[..., None], args: tuple, name: str, *, duplex: bool) -> tuple[Any, Any] | None:
    """``target(child_end, *args)`` in a forked daemon child when a fork is safe and a second CPU
    is there: ``(process, this process's end of the pipe)``, or None (no child)."""
    if cpus() < 2 or not may_fork():
        return None
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe(duplex=duplex)
    gc.freeze()         # the child never collects the parent's objects (no copy-on-write for it)
    try:
        proc = ctx.Process(target=target, name=name, daemon=True, args=(there, *args))
        proc.start()
    except (OSError, ValueError, AssertionError):   # AssertionError: a daemonic process has no children
        here.close()
        there.close()
        return None
    finally:
        gc.unfreeze()
    there.close()
    return proc, here


def reap(proc) -> None:
    """Collect a child that delivered its value: now if it has exited, else later (multiprocessing
    collects it when the next child starts, or at exit). A join would wait while the kernel frees
    the child's memory, which the other CPU does meanwhile."""
    proc.join(0)


class Forked:
    """``fn(*args)`` computed in a forked child when a fork is safe and a second CPU is there;
    ``result()`` returns its value (received pickled), or computes it here if no child ran or the
    child did not deliver (it died, raised, or its value could not be pickled)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "rlhealth-forked"):
        self._fn, self._args = fn, args
        self._child = _start_child(_deliver, (fn, args), name, duplex=False)

    @property
    def forked(self) -> bool:
        return self._child is not None

    def result(self) -> Any:
        if self._child is not None:
            proc, recv = self._child
            self._child = None
            try:
                delivered, value = recv.recv()
            except Exception:  # noqa: BLE001 - EOF (a dead child), a torn or unloadable message
                delivered, value = False, None
            finally:
                recv.close()
                reap(proc)
            if delivered:
                return value
        return self._fn(*self._args)


def _deliver(send, fn: Callable[..., Any], args: tuple) -> None:
    try:
        send.send((True, fn(*args)))
    except BaseException:  # noqa: BLE001 - the parent computes it again and meets the failure there
        pass
    finally:
        send.close()


class Standby:
    """A forked child that runs ``prepare()`` at once, then computes one ``fn(*args)`` when asked
    (``call``): for work whose set-up (loading a library, a model) can run on a second CPU while
    this process does something else, before the arguments are known. ``call`` computes here when
    no child runs or the child does not deliver; ``close`` ends a child that was never asked (also
    safe after ``call``)."""

    def __init__(self, prepare: Callable[[], Any], fn: Callable[..., Any], *, name: str = "rlhealth-standby"):
        self._fn = fn
        self._child = _start_child(_stand_by, (prepare, fn), name, duplex=True)

    @property
    def forked(self) -> bool:
        return self._child is not None

    def call(self, *args: Any) -> Any:
        if self._child is not None:
            proc, conn = self._child
            self._child = None
            try:
                conn.send(args)
                delivered, value = conn.recv()
            except Exception:  # noqa: BLE001 - a dead child, a torn or unloadable message
                delivered, value = False, None
            finally:
                conn.close()
                reap(proc)
            if delivered:
                return value
        return self._fn(*args)

    def close(self) -> None:
        if self._child is None:
            return
        proc, conn = self._child
        self._child = None
        conn.close()
        proc.terminate()        # it may still be preparing: its work is not wanted
        proc.join()


def _stand_by(conn, prepare: Callable[[], Any], fn: Callable[..., Any]) -> None:
    try:
        try:
            prepare()
        except Exception:  # noqa: BLE001 - the call below meets the same failure, or none
            pass
        args = conn.recv()
        conn.send((True, fn(*args)))
    except BaseException:  # noqa: BLE001 - EOF, or a failure the caller meets again when it computes
        pass
    finally:
        conn.close()
