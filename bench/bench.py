#!/usr/bin/env python3
"""rlhealth diagnose vs grep+cat on a large generated bundle (issue 3).

    bench/run                      # 1 GiB of logs / 20,000 trials, 5 timed runs each
    bench/run --scaling            # plus 4 GiB / 20,000 and 1 GiB / 100,000
    bench/run --log-gib 0.25 --trials 2000 --runs 3    # a quick look

For each scale point it generates (or reuses) a deterministic healthy agentic bundle under
``--workdir`` (default ``bench/out``, git-ignored), writes the extended-regex form of the
signature catalog the diagnosis scans for (``<workdir>/patterns.ere``), and times as whole
processes, alternating, after one untimed warm-up of each (so both read from the page cache):

  (a) ``rlhealth diagnose <bundle> --now <t> --format json``
  (b) ``grep -cEf <patterns> <every log file the diagnosis reads> | cat > /dev/null`` (not straight
      to /dev/null: GNU grep then stops at the first match, like -q), then
      ``find <bundle>/trace_jobs -name result.json -print0 | xargs -0 cat > /dev/null``

It prints medians, the ratio a/b, the peak RSS of the diagnosis (``ru_maxrss`` of that very
child, from ``os.wait4``), and how both change between the scale points.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen  # noqa: E402

GIB = 1024 ** 3


# ----------------------------------------------------------------------------- patterns
def to_ere(regex: str, caseless: bool = False) -> str:
    """Hyperscan/PCRE syntax -> GNU ``grep -E`` syntax (for the catalog's constructs).

    ``(?:`` -> ``(``; ``\\d`` -> ``[0-9]``; ``\\"`` -> ``"``; ``\\b``, ``\\s``, ``\\S``, ``\\w`` kept
    (GNU extensions); caseless patterns get ``[xX]`` for every letter (ERE has no ``(?i)``).
    """
    out: list[str] = []
    i, n = 0, len(regex)
    while i < n:
        c = regex[i]
        if c == "\\" and i + 1 < n:
            e = regex[i + 1]
            if e == "d":
                out.append("[0-9]")
            elif e == "D":
                out.append("[^0-9]")
            elif e in "bBsSwW<>":
                out.append("\\" + e)
            elif e == "n":
                out.append("^")               # grep matches one line at a time: a newline is a line start
            elif e.isalnum():
                raise ValueError(f"unsupported escape \\{e} in {regex!r}")
            elif e in ".[]()*+?{}|^$\\/":
                out.append("\\" + e)
            else:
                out.append(e)                 # \" \' \- \: ... -> the literal character
            i += 2
            continue
        if regex.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        if regex.startswith("(?", i):
            raise ValueError(f"unsupported group {regex[i:i + 4]!r} in {regex!r}")
        if c == "[":
            j = regex.index("]", i + 2 if regex.startswith("[^]", i) or regex.startswith("[]", i) else i + 1)
            cls = regex[i:j + 1].replace("\\d", "0-9")
            for esc in ('\\"', "\\'", "\\.", "\\/"):
                cls = cls.replace(esc, esc[1:])      # inside [...] ERE has no escapes
            out.append(cls)
            i = j + 1
            continue
        if caseless and c.isalpha():
            out.append(f"[{c.lower()}{c.upper()}]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def catalog_patterns() -> list[tuple[str, str, bool]]:
    """(key, regex, caseless) exactly as the diagnosis compiles them into its hyperscan database."""
    from rlhealth.catalog import load_catalog
    from rlhealth.probes.bundle import EXTRACTORS

    catalog = load_catalog()
    pats = [(s.id, s.pattern, s.caseless) for s in catalog.signatures.values()]
    pats += [(k, v, False) for k, v in EXTRACTORS.items()]
    return pats


def write_patterns(path: Path) -> int:
    lines = [to_ere(rx, cl) for _, rx, cl in catalog_patterns()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    check = subprocess.run(["grep", "-cEf", str(path), "/dev/null"], capture_output=True, text=True)
    if check.returncode == 2:
        raise SystemExit(f"grep rejects {path}: {check.stderr.strip()}")
    return len(lines)


def log_files(root: Path) -> list[Path]:
    """The log files the diagnosis scans (its own file lister)."""
    from rlhealth.probes.bundle import _log_files
    return [p for p, _ in _log_files(root, None)]


# ----------------------------------------------------------------------------- timing
def run_timed(argv: list[str], env: dict | None = None) -> tuple[float, int, int, bytes]:
    """(wall seconds, peak RSS KiB of that child, exit code, stdout)."""
    out_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"rlhealth-bench-{os.getpid()}.out"
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read()
        proc.stderr.close()
    data = out_path.read_bytes()
    out_path.unlink()
    if proc.returncode not in (0, 1, 2, 3) or (err and b"Traceback" in err):
        sys.stderr.write(err.decode("utf-8", "replace"))
    return wall, usage.ru_maxrss, proc.returncode, data


def rlhealth_argv() -> list[str]:
    exe = shutil.which("rlhealth", path=str(Path(sys.executable).parent)) or shutil.which("rlhealth")
    return [exe] if exe else [sys.executable, "-m", "rlhealth"]


def measure(root: Path, patterns: Path, runs: int, grep_env: dict) -> dict:
    files = [str(p) for p in log_files(root)]
    diag = rlhealth_argv() + ["diagnose", str(root), "--now", gen.NOW, "--format", "json"]
    # grep's output goes through a pipe: GNU grep stops at the first match when stdout is /dev/null
    script = ('p=$1; t=$2; shift 2; grep -cEf "$p" -- "$@" | cat > /dev/null; '
              'find "$t" -name result.json -print0 | xargs -0 cat > /dev/null')
    base = ["sh", "-c", script, "sh", str(patterns), str(root / "trace_jobs"), *files]
    # warm-up (untimed): fills the page cache for both, checks the diagnosis works
    _, _, code, out = run_timed(diag)
    report = json.loads(out)
    run_timed(base, grep_env)
    d_times, d_rss, b_times = [], [], []
    for _ in range(runs):
        w, rss, code2, out2 = run_timed(diag)
        if out2 != out:
            print("WARNING: the diagnosis report changed between runs (sources edited meanwhile, or nondeterminism)")
            out = out2
        d_times.append(w)
        d_rss.append(rss)
        w, _, _, _ = run_timed(base, grep_env)
        b_times.append(w)
    return {"diag_s": statistics.median(d_times), "base_s": statistics.median(b_times),
            "diag_all": d_times, "base_all": b_times, "rss_mib": max(d_rss) / 1024, "rss_all_mib": [r / 1024 for r in d_rss],
            "verdict": report.get("verdict"), "exit": code, "files": len(files)}


def check_patterns(root: Path, patterns: Path, grep_env: dict) -> tuple[int, int]:
    """(lines hyperscan matches, lines grep -E matches) over the same files: the ERE form is faithful."""
    from rlhealth.probes.bundle import scanner_for
    from rlhealth.catalog import load_catalog
    scanner = scanner_for(load_catalog())
    hs = 0
    files = log_files(root)

    def count(_hit):
        nonlocal hs
        hs += 1
    for p in files:
        scanner.scan_file(p, p.name, count)
    out = subprocess.run(["grep", "-chEf", str(patterns), "--", *map(str, files)], capture_output=True, text=True, env=grep_env)
    return hs, sum(int(x) for x in out.stdout.split())


# ----------------------------------------------------------------------------- machine
def machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "?"
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    grep_v = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram": mem, "python": platform.python_version(), "grep": grep_v,
            "kernel": platform.release()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--log-gib", type=float, default=1.0, help="log size of the base point (GiB)")
    ap.add_argument("--trials", type=int, default=20000, help="trial directories of the base point")
    ap.add_argument("--scaling", action="store_true", help="also run the large-log and many-trial points")
    ap.add_argument("--scale-log-gib", type=float, default=4.0)
    ap.add_argument("--scale-trials", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per command (median reported)")
    ap.add_argument("--grep-locale", default="C", help="LC_ALL for grep (C is the faster, stricter baseline)")
    ap.add_argument("--check-patterns", action="store_true",
                    help="also count matching lines with hyperscan and with grep -E (they must agree)")
    ap.add_argument("--clean", action="store_true", help="delete the generated bundles afterwards")
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    args = ap.parse_args(argv)

    grep_env = dict(os.environ, LC_ALL=args.grep_locale)
    info = machine()
    print(f"machine: {info['nproc']} CPU(s), {info['cpu']}, RAM {info['ram']}, Python {info['python']}, "
          f"{info['grep']} (LC_ALL={args.grep_locale}), Linux {info['kernel']}")
    patterns = args.workdir / "patterns.ere"
    n = write_patterns(patterns)
    print(f"patterns: {n} extended regexes -> {patterns}")
    points = [("base", args.log_gib, args.trials)]
    if args.scaling:
        points += [("logs-x", args.scale_log_gib, args.trials), ("trials-x", args.log_gib, args.scale_trials)]
    results = []
    for tag, gib, trials in points:
        t0 = time.perf_counter()
        free = shutil.disk_usage(args.workdir).free
        if free < gib * GIB * 1.3:
            raise SystemExit(f"not enough disk under {args.workdir} for {gib} GiB of logs ({free / GIB:.1f} GiB free)")
        root, ginfo = gen.generate(args.workdir, f"{gib:g}g-{trials}t", int(gib * GIB), trials)
        print(f"\n[{tag}] bundle {root}: {ginfo['log_bytes'] / GIB:.2f} GiB in {ginfo['log_files']} log files, {trials} trials "
              f"({ginfo['trial_bytes'] / 1024 ** 2:.0f} MiB of trial files); generated in "
              f"{ginfo['gen_logs_s'] + ginfo['gen_trials_s']:.1f}s (reused: {time.perf_counter() - t0 < 1})")
        if args.check_patterns:
            hs, gr = check_patterns(root, patterns, grep_env)
            print(f"[{tag}] matching lines: hyperscan {hs}, grep -E {gr} -> {'same' if hs == gr else 'DIFFERENT'}")
        m = measure(root, patterns, args.runs, grep_env)
        m.update(tag=tag, log_gib=ginfo["log_bytes"] / GIB, trials=trials)
        results.append(m)
        print(f"[{tag}] diagnose  median {m['diag_s']:.2f}s  runs {', '.join(f'{x:.2f}' for x in m['diag_all'])}  "
              f"verdict {m['verdict']}  peak RSS {m['rss_mib']:.0f} MiB")
        print(f"[{tag}] grep+cat  median {m['base_s']:.2f}s  runs {', '.join(f'{x:.2f}' for x in m['base_all'])}")
        print(f"[{tag}] ratio diagnose/baseline = {m['diag_s'] / m['base_s']:.2f}x")

    print("\n| point | logs | trials | diagnose (s) | grep+cat (s) | ratio | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for m in results:
        print(f"| {m['tag']} | {m['log_gib']:.2f} GiB | {m['trials']:,} | {m['diag_s']:.2f} | {m['base_s']:.2f} | "
              f"{m['diag_s'] / m['base_s']:.2f}x | {m['rss_mib']:.0f} |")
    base = results[0]
    for m in results[1:]:
        what = "log size" if m["tag"] == "logs-x" else "trials"
        factor = m["log_gib"] / base["log_gib"] if what == "log size" else m["trials"] / base["trials"]
        print(f"{what} x{factor:.2f}: diagnose time x{m['diag_s'] / base['diag_s']:.2f}, baseline time "
              f"x{m['base_s'] / base['base_s']:.2f}, ratio {base['diag_s'] / base['base_s']:.2f}x -> "
              f"{m['diag_s'] / m['base_s']:.2f}x, peak RSS {base['rss_mib']:.0f} -> {m['rss_mib']:.0f} MiB "
              f"({(m['rss_mib'] / base['rss_mib'] - 1) * 100:+.1f}%)")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "results": results}, indent=2))
    if args.clean:
        for tag, gib, trials in points:
            shutil.rmtree(args.workdir / f"{gib:g}g-{trials}t", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
