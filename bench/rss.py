"""Peak memory of a whole process tree, sampled from /proc, and the page-cache state of a bundle.

A diagnosis is one process that forks readers (the trial reader and its pool of readers, see
``probes/parse/trials.py``). ``ru_maxrss`` from ``os.wait4`` is the maximum over the waited
process *and every descendant it reaped* -- whichever of them was largest, not their sum and not
necessarily the diagnosing process -- and it also holds the peak RSS of the process that spawned
it (Linux records, at exec, the high-water mark of the image exec replaces: the spawner's, after
fork or vfork), so a benchmark that generated a bundle in-process sees its own peak there. A
forked reader's RSS also counts the pages it still shares with its parent. So ``sample_tree`` polls ``/proc`` while the command runs and reports:

- ``main``: the diagnosing process itself: peak RSS (``VmHWM``, the kernel's own high-water mark,
  read by the process itself at exit: exact) and the ``RssAnon``/``RssFile`` split and ``Pss`` at
  the sample where its RSS was highest;
- ``readers``: the largest peak RSS of any forked reader (``ru_maxrss`` of the diagnosing
  process's reaped descendants, read at its exit: exact), how many readers were seen, and the
  largest unique set of one (``Private_Clean + Private_Dirty`` of ``smaps_rollup``: what that
  reader alone adds, sampled);
- ``tree``: at each sample the sum over all live processes of the tree of RSS (double-counts
  shared pages: an upper bound) and of PSS (shared pages split between their sharers: the memory
  the tree really holds); the peaks of both sums.

Sampling costs CPU (a /proc scan per tick), so timed runs are never sampled.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

KIB = 1024


def _ppids() -> dict[int, int]:
    """pid -> parent pid of every process (this kernel has no /proc/<pid>/task/<tid>/children)."""
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields follow the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    ppid = _ppids()
    kids: dict[int, list[int]] = {}
    for pid, parent in ppid.items():
        kids.setdefault(parent, []).append(pid)
    found, stack = [], list(kids.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(kids.get(pid, []))
    return found


def _status_kib(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError):
        return {}
    return out


def _rollup_kib(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Pss", "Private_Clean", "Private_Dirty"):
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError):
        return {}
    return out


def sample_tree(argv: list[str], interval_s: float = 0.01, env: dict | None = None) -> dict:
    """Run ``argv`` (a Python console script, ``python SCRIPT ...`` or ``python -m MODULE ...``;
    stdout/stderr discarded) and
    sample its process tree until it exits.

    The program runs inside this file's ``--exact`` wrapper -- the same process, no extra one --
    which at exit records its own ``VmHWM`` (the diagnosing process's exact peak, even when it comes
    after the last sample) and ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the largest peak RSS of
    any descendant it reaped: every forked reader, exactly, not sampled)."""
    import sys
    import tempfile

    fd, exact_path = tempfile.mkstemp(prefix="rlhealth-bench-rss-")
    os.close(fd)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--exact", exact_path, "--", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    main = {"hwm": 0, "rss": 0, "anon": 0, "file": 0, "pss": 0}
    readers: dict[int, dict[str, int]] = {}
    tree_rss = tree_pss = samples = 0
    usage = None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        samples += 1
        st = _status_kib(proc.pid)
        if st:
            rollup = _rollup_kib(proc.pid)
            main["hwm"] = max(main["hwm"], st.get("VmHWM", 0))
            if st.get("VmRSS", 0) >= main["rss"]:
                main.update(rss=st.get("VmRSS", 0), anon=st.get("RssAnon", 0), file=st.get("RssFile", 0),
                            pss=rollup.get("Pss", 0))
            sum_rss, sum_pss = st.get("VmRSS", 0), rollup.get("Pss", 0)
            for kid in descendants(proc.pid):
                kst = _status_kib(kid)
                if not kst:
                    continue
                kroll = _rollup_kib(kid)
                r = readers.setdefault(kid, {"hwm": 0, "uss": 0})
                r["hwm"] = max(r["hwm"], kst.get("VmHWM", 0))
                r["uss"] = max(r["uss"], kroll.get("Private_Clean", 0) + kroll.get("Private_Dirty", 0))
                sum_rss += kst.get("VmRSS", 0)
                sum_pss += kroll.get("Pss", 0)
            tree_rss, tree_pss = max(tree_rss, sum_rss), max(tree_pss, sum_pss)
        time.sleep(interval_s)
    wall = time.perf_counter() - t0
    mib = 1 / KIB
    try:
        exact = {k: int(v) for k, v in (line.split() for line in Path(exact_path).read_text().splitlines())}
    except (OSError, ValueError):
        exact = {}
    os.unlink(exact_path)
    return {
        "wall_s": wall, "exit": os.waitstatus_to_exitcode(status), "samples": samples,
        "exact": bool(exact),
        "main_peak_rss_mib": exact.get("self_hwm_kib", main["hwm"]) * mib,
        "readers_peak_rss_mib": exact.get("children_maxrss_kib", max((r["hwm"] for r in readers.values()), default=0)) * mib,
        "main_sampled_peak_rss_mib": main["hwm"] * mib, "main_anon_mib_at_peak": main["anon"] * mib,
        "main_file_mib_at_peak": main["file"] * mib, "main_pss_mib_at_peak": main["pss"] * mib,
        "readers": len(readers),
        "reader_sampled_peak_rss_mib": max((r["hwm"] for r in readers.values()), default=0) * mib,
        "reader_peak_uss_mib": max((r["uss"] for r in readers.values()), default=0) * mib,
        "tree_peak_rss_sum_mib": tree_rss * mib, "tree_peak_pss_mib": tree_pss * mib,
        "ru_maxrss_mib": usage.ru_maxrss * mib if usage is not None else 0.0,
    }


# ----------------------------------------------------------------------------- page cache
def drop_caches_allowed() -> bool:
    return os.geteuid() == 0 and os.access("/proc/sys/vm/drop_caches", os.W_OK)


def bundle_files(root: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def evict(root: Path, method: str) -> None:
    """Make ``root``'s files cold: ``drop_caches`` (sync, then the whole page cache, dentries and
    inodes of the machine) or ``fadvise`` (sync, then POSIX_FADV_DONTNEED on every file of the
    bundle: its data pages only; directory entries and inodes stay cached)."""
    if method == "drop_caches":
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return
    os.sync()  # dirty pages (a freshly generated bundle) are not dropped by DONTNEED
    for path in bundle_files(root):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_mib(paths: list[str]) -> float | None:
    """MiB of ``paths`` in the page cache (util-linux ``fincore``), None without it."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *paths],
                             capture_output=True, text=True, check=False)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return sum(int(x) for x in out.stdout.split()) / KIB / KIB


def _exact_main(argv: list[str]) -> None:
    """``rss.py --exact FILE -- PROGRAM ARGS...``: run PROGRAM in this process; at exit write this
    process's VmHWM and its reaped descendants' largest ru_maxrss (KiB) to FILE."""
    import atexit
    import resource
    import runpy
    import sys

    out = argv[2]
    prog = argv[4:]

    def record() -> None:
        hwm = _status_kib(os.getpid()).get("VmHWM", 0)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        Path(out).write_text(f"self_hwm_kib {hwm}\nchildren_maxrss_kib {kids}\n")

    atexit.register(record)
    if os.path.basename(prog[0]).startswith("python") and len(prog) >= 2 and prog[1] != "-m":
        prog = prog[1:]                          # python SCRIPT ARGS...: run SCRIPT
    if len(prog) >= 3 and prog[1] == "-m":
        sys.argv = [prog[0], *prog[3:]]
        sys.path[0] = os.getcwd()          # as ``python -m`` has it (not this file's directory)
        runpy.run_module(prog[2], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(prog)
        sys.path[0] = os.path.dirname(os.path.abspath(prog[0]))   # as running the script has it
        runpy.run_path(prog[0], run_name="__main__")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 3 and sys.argv[1] == "--exact" and sys.argv[3] == "--":
        _exact_main(sys.argv)
