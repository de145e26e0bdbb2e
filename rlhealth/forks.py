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


class Forked:
    """``fn(*args)`` computed in a forked child when a fork is safe and a second CPU is there;
    ``result()`` returns its value (received pickled), or computes it here if no child ran or the
    child did not deliver (it died, raised, or its value could not be pickled)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "rlhealth-forked"):
        self._fn, self._args = fn, args
        self._child: tuple[Any, Any] | None = None
        if cpus() < 2 or not may_fork():
            return
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        gc.freeze()         # the child never collects the parent's objects (no copy-on-write for it)
        try:
            proc = ctx.Process(target=_deliver, name=name, daemon=True, args=(send, fn, args))
            proc.start()
        except (OSError, ValueError, AssertionError):   # AssertionError: a daemonic process has no children
            recv.close()
            send.close()
            return
        finally:
            gc.unfreeze()
        send.close()
        self._child = (proc, recv)

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
                proc.join()
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
