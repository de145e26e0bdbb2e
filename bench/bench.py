#!/usr/bin/env python3
"""rlhealth diagnose vs grep+cat on large generated bundles, warm and cold page cache, with the
memory of the whole process tree, and triage throughput -- one run, one table.

    bench/run --all                    # the README table: 3 scale points x warm/cold + memory + triage
    bench/run --all --markdown bench/out/table.md     # ... and the same tables as Markdown
    bench/run --all --quick            # the same at small sizes (a few minutes)
    bench/run                          # 1 GiB of logs / 20,000 trials, warm cache only
    bench/run --scaling                # plus 4 GiB / 20,000 and 1 GiB / 100,000 (warm only)

For each scale point it generates (or reuses) a deterministic healthy agentic bundle under
``--workdir`` (default ``bench/out``, git-ignored), writes the extended-regex form of the
signature catalog the diagnosis scans for (``<workdir>/patterns.ere``), and times as whole
processes, alternating:

  (a) ``rlhealth diagnose <bundle> --now <t> --format json``
  (b) ``grep -cEf <patterns> <every log file the diagnosis reads> | cat > /dev/null`` (not straight
      to /dev/null: GNU grep then stops at the first match, like -q), then
      ``find <bundle>/trace_jobs -name result.json -print0 | xargs -0 cat > /dev/null``

warm: after one untimed run of each (both read from the page cache); cold: the bundle is evicted
from the page cache before every timed run of either command (``--cold-method``: ``drop_caches``
writes 3 to /proc/sys/vm/drop_caches after sync -- the whole machine's page cache, dentries and
inodes, so rlhealth's own code is cold too; ``fadvise`` calls POSIX_FADV_DONTNEED on every file of
the bundle -- its data pages only, directory entries and inodes stay cached; ``auto`` is
drop_caches when permitted (root, writable), else fadvise). Medians of ``--runs`` runs.

Memory comes from separate runs of (a) whose process tree is sampled from /proc (``rss.py``: the
diagnosing process, its forked readers, and the tree's sum), never from a timed run. The memory
growth per call of a long-lived process (in-process ``diagnose`` and ``rlhealth mcp``, the packaged
examples, ``--longlived-calls`` calls after 20 warm-up calls) comes from ``longlived.py``.
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
import rss  # noqa: E402

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
            elif e == "r":
                out.append("\r")             # a literal carriage return
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


def measure(root: Path, patterns: Path, runs: int, grep_env: dict, cache: str = "warm",
            cold_method: str = "fadvise") -> dict:
    """Median wall times of (a) the diagnosis and (b) grep+cat, alternating, ``runs`` each.

    ``cache="warm"``: after one untimed run of each; ``"cold"``: ``rss.evict(root, cold_method)``
    before every timed run of either."""
    files = [str(p) for p in log_files(root)]
    diag = rlhealth_argv() + ["diagnose", str(root), "--now", gen.NOW, "--format", "json"]
    # grep's output goes through a pipe: GNU grep stops at the first match when stdout is /dev/null
    script = ('p=$1; t=$2; shift 2; grep -cEf "$p" -- "$@" | cat > /dev/null; '
              'find "$t" -name result.json -print0 | xargs -0 cat > /dev/null')
    base = ["sh", "-c", script, "sh", str(patterns), str(root / "trace_jobs"), *files]
    # untimed first run: checks the diagnosis works (and, warm, fills the page cache for both)
    _, _, code, out = run_timed(diag)
    report = json.loads(out)
    if cache == "warm":
        run_timed(base, grep_env)
    d_times, d_rss, b_times, resident = [], [], [], []
    for _ in range(runs):
        if cache == "cold":
            rss.evict(root, cold_method)
            resident.append(rss.resident_mib(files))
        w, maxrss, code2, out2 = run_timed(diag)
        if out2 != out:
            print("WARNING: the diagnosis report changed between runs (sources edited meanwhile, or nondeterminism)")
            out = out2
        d_times.append(w)
        d_rss.append(maxrss)
        if cache == "cold":
            rss.evict(root, cold_method)
        w, _, _, _ = run_timed(base, grep_env)
        b_times.append(w)
    known = [r for r in resident if r is not None]
    return {"cache": cache, "diag_s": statistics.median(d_times), "base_s": statistics.median(b_times),
            "diag_all": d_times, "base_all": b_times, "ru_maxrss_mib": max(d_rss) / 1024,
            "resident_log_mib_after_evict": max(known) if known else None,
            "verdict": report.get("verdict"), "exit": code, "files": len(files)}


def measure_memory(root: Path, runs: int) -> dict:
    """The largest of ``runs`` sampled diagnoses (warm cache), column by column."""
    diag = rlhealth_argv() + ["diagnose", str(root), "--now", gen.NOW, "--format", "json"]
    samples = [rss.sample_tree(diag) for _ in range(runs)]
    peak = {k: max(s[k] for s in samples) for k in samples[0] if k not in ("exit", "exact")}
    peak["exit"], peak["exact"] = samples[-1]["exit"], all(s["exact"] for s in samples)
    if not peak["exact"]:
        print("WARNING: the exact peaks were not recorded (the wrapper failed): sampled values shown")
    return peak


def cold_method_for(requested: str) -> str:
    if requested == "auto":
        return "drop_caches" if rss.drop_caches_allowed() else "fadvise"
    if requested == "drop_caches" and not rss.drop_caches_allowed():
        print("cold cache: /proc/sys/vm/drop_caches is not writable here (needs root); using fadvise instead")
        return "fadvise"
    return requested


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


QUICK = {"log_gib": 0.125, "trials": 2000, "scale_log_gib": 0.5, "scale_trials": 10000, "runs": 3, "triage_runs": 2}
FULL = {"log_gib": 1.0, "trials": 20000, "scale_log_gib": 4.0, "scale_trials": 100000, "runs": 5, "triage_runs": 2}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def time_table(results: list[dict]) -> list[str]:
    caches = [c for c in ("warm", "cold") if any(c in m["timing"] for m in results)]
    head = "| point | logs | trials | verdict | " + " | ".join(
        f"{c}: diagnose (s) | {c}: grep+cat (s) | {c}: ratio" for c in caches) + " | load avg 1/5 min |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for m in results:
        cells = []
        for c in caches:
            t = m["timing"].get(c)
            cells.append(f"{t['diag_s']:.2f} | {t['base_s']:.2f} | **{t['diag_s'] / t['base_s']:.2f}x**" if t else "- | - | -")
        rows.append(f"| {m['tag']} | {m['log_gib']:.2f} GiB | {m['trials']:,} | {m.get('verdict')} | " + " | ".join(cells)
                    + f" | {m['load']} |")
    return rows


def memory_table(results: list[dict]) -> list[str]:
    rows = ["| point | diagnosing process: peak RSS | its anon / file RSS at its sampled peak | forked readers seen | "
            "largest reader: peak RSS | largest reader: unique (USS) | whole tree: peak PSS sum | whole tree: peak RSS sum | "
            "ru_maxrss (old figure) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for m in results:
        k = m.get("memory")
        if not k:
            continue
        rows.append(f"| {m['tag']} | **{k['main_peak_rss_mib']:.0f}** | {k['main_anon_mib_at_peak']:.0f} / "
                    f"{k['main_file_mib_at_peak']:.0f} | {k['readers']} | **{k['readers_peak_rss_mib']:.0f}** | "
                    f"{k['reader_peak_uss_mib']:.0f} | **{k['tree_peak_pss_mib']:.0f}** | {k['tree_peak_rss_sum_mib']:.0f} | "
                    f"{k['ru_maxrss_mib']:.0f} |")
    return rows


def triage_table(rows: list[dict]) -> list[str]:
    out = ["| corpus | jobs | one diagnosis, whole process: median / max (s) | one-by-one (s) | triage --jobs 1 (s) | "
           "triage (s) | one-by-one jobs/min | triage jobs/min | speedup vs one-by-one | pool speedup | a perfect pool now | "
           "same verdicts | load avg 1/5 min |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['corpus']} | {r['jobs']} | **{r['per_job_median_s']:.3f}** / {r['per_job_max_s']:.3f} | "
                   f"{r['one_by_one_s']:.2f} | {r['triage_one_worker_s']:.2f} | "
                   f"{r['triage_s']:.2f} | {r['one_by_one_jobs_per_min']:.0f} | {r['triage_jobs_per_min']:.0f} | "
                   f"**{r['speedup']:.2f}x** | **{r['pool_speedup']:.2f}x** | {r.get('available_parallelism', 0):.2f}x | "
                   f"{'yes' if r['same_verdicts'] else 'NO'} | "
                   f"{r.get('load', '?')} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--all", action="store_true",
                    help="every scale point, warm and cold cache, memory, and triage throughput, in one table")
    ap.add_argument("--quick", action="store_true",
                    help=f"small sizes: {QUICK['log_gib']:g} GiB / {QUICK['trials']:,} trials, {QUICK['scale_log_gib']:g} GiB, "
                         f"{QUICK['scale_trials']:,} trials, {QUICK['runs']} runs")
    ap.add_argument("--log-gib", type=float, help=f"log size of the base point (GiB; default {FULL['log_gib']:g})")
    ap.add_argument("--trials", type=int, help=f"trial directories of the base point (default {FULL['trials']:,})")
    ap.add_argument("--scaling", action="store_true", help="also run the large-log and many-trial points")
    ap.add_argument("--scale-log-gib", type=float)
    ap.add_argument("--scale-trials", type=int)
    ap.add_argument("--runs", type=int, help="timed runs per command and cache state (median reported; default 5, quick 3)")
    ap.add_argument("--cache", choices=["warm", "cold", "both"], help="page cache state(s) to time (default: both with --all, else warm)")
    ap.add_argument("--cold-method", choices=["auto", "drop_caches", "fadvise"], default="auto",
                    help="how the bundle is made cold (auto: drop_caches when root may, else fadvise)")
    ap.add_argument("--memory-runs", type=int, default=1, help="sampled (untimed) diagnoses per point for the memory table")
    ap.add_argument("--with-triage", action="store_true", help="also measure triage throughput (implied by --all)")
    ap.add_argument("--no-triage", action="store_true")
    ap.add_argument("--longlived-calls", type=int, default=200,
                    help="diagnoses of the packaged examples in one long-lived process, in-process and through "
                         "rlhealth mcp (per-call memory growth; 0 skips it)")
    ap.add_argument("--copies", type=int, default=20, help="copies of the base bundle in the triage corpus")
    ap.add_argument("--triage-runs", type=int, help="runs per triage measurement (default 2)")
    ap.add_argument("--grep-locale", default="C", help="LC_ALL for grep (C is the faster, stricter baseline)")
    ap.add_argument("--check-patterns", action="store_true",
                    help="also count matching lines with hyperscan and with grep -E (they must agree)")
    ap.add_argument("--clean", action="store_true", help="delete the generated bundles afterwards")
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    ap.add_argument("--markdown", type=Path, help="write the tables here as Markdown (what the README's table is pasted from)")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for key in ("log_gib", "trials", "scale_log_gib", "scale_trials", "runs", "triage_runs"):
        if getattr(args, key) is None:
            setattr(args, key, sizes[key])
    scaling = args.scaling or args.all
    caches = {"warm": ["warm"], "cold": ["cold"], "both": ["warm", "cold"]}[args.cache or ("both" if args.all else "warm")]
    cold_method = cold_method_for(args.cold_method) if "cold" in caches else None
    do_triage = (args.all or args.with_triage) and not args.no_triage

    started = time.perf_counter()
    grep_env = dict(os.environ, LC_ALL=args.grep_locale)
    info = machine()
    header = [f"machine: {info['nproc']} CPU(s), {info['cpu']}, RAM {info['ram']}, Python {info['python']}, "
              f"{info['grep']} (LC_ALL={args.grep_locale}), Linux {info['kernel']}",
              f"runs: {args.runs} per command and cache state (medians); cache: {', '.join(caches)}"
              + (f"; cold = {cold_method}" if cold_method else "") + f"; load average at start {_load()}"]
    for line in header:
        print(line)
    patterns = args.workdir / "patterns.ere"
    n = write_patterns(patterns)
    print(f"patterns: {n} extended regexes -> {patterns}")
    points = [("base", args.log_gib, args.trials)]
    if scaling:
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
        m = {"tag": tag, "log_gib": ginfo["log_bytes"] / GIB, "trials": trials, "timing": {}}
        load_before = _load()
        for cache in caches:
            t = measure(root, patterns, args.runs, grep_env, cache, cold_method or "fadvise")
            m["timing"][cache] = t
            m["verdict"] = t["verdict"]
            if t["verdict"] != "NO-KILL":
                print(f"WARNING: the generated bundle is healthy, but the diagnosis says {t['verdict']}")
            left = "" if t["resident_log_mib_after_evict"] is None else \
                f"  (log files resident after eviction: {t['resident_log_mib_after_evict']:.0f} MiB)"
            print(f"[{tag}] {cache}: diagnose median {t['diag_s']:.2f}s  runs {', '.join(f'{x:.2f}' for x in t['diag_all'])}  "
                  f"verdict {t['verdict']}{left}")
            print(f"[{tag}] {cache}: grep+cat median {t['base_s']:.2f}s  runs {', '.join(f'{x:.2f}' for x in t['base_all'])}")
            print(f"[{tag}] {cache}: ratio diagnose/baseline = {t['diag_s'] / t['base_s']:.2f}x")
        if args.memory_runs > 0:
            k = m["memory"] = measure_memory(root, args.memory_runs)
            print(f"[{tag}] memory: diagnosing process peak RSS {k['main_peak_rss_mib']:.0f} MiB "
                  f"(anon {k['main_anon_mib_at_peak']:.0f} + file {k['main_file_mib_at_peak']:.0f} at its sampled peak); "
                  f"{k['readers']} forked readers seen, largest peak RSS {k['readers_peak_rss_mib']:.0f} MiB "
                  f"(unique {k['reader_peak_uss_mib']:.0f}); tree peak PSS {k['tree_peak_pss_mib']:.0f} MiB, "
                  f"RSS sum {k['tree_peak_rss_sum_mib']:.0f} MiB; ru_maxrss {k['ru_maxrss_mib']:.0f} MiB "
                  f"({k['samples']} samples)")
        m["load"] = f"{load_before} -> {_load()}"
        results.append(m)

    triage_rows = []
    if do_triage:
        import triage_bench

        triage_rows = triage_bench.run_all(args.workdir, args.log_gib, args.trials, args.copies, args.triage_runs)
        for r in triage_rows:
            r.setdefault("load", "?")

    longlived_rows = []
    if args.longlived_calls > 0:
        import longlived

        longlived_rows = longlived.measure(args.longlived_calls)
        for r in longlived_rows:
            print(f"long-lived: {r['mode']}: {r['growth_kib_per_call']:.1f} KiB of RSS per call over {r['calls']} calls "
                  f"after {r['warmup']} ({r['after_warmup_mib']:.0f} -> {r['end_mib']:.0f} MiB)")

    tables = ["### diagnose vs grep+cat", "", *time_table(results), "",
              "### memory (MiB, warm cache; peaks of the diagnosing process and of its largest reader exact, sums sampled)", "", *memory_table(results)]
    if triage_rows:
        tables += ["", "### triage throughput (warm cache)", "", *triage_table(triage_rows)]
    if longlived_rows:
        tables += ["", "### long-lived process: memory growth per diagnosis (packaged examples)", "",
                   *longlived.table(longlived_rows)]
    base = results[0]
    notes = []
    for m in results[1:]:
        what = "log size" if m["tag"] == "logs-x" else "trials"
        factor = m["log_gib"] / base["log_gib"] if what == "log size" else m["trials"] / base["trials"]
        bt, mt = base["timing"][caches[0]], m["timing"][caches[0]]
        line = (f"{what} x{factor:.2f} ({caches[0]}): diagnose time x{mt['diag_s'] / bt['diag_s']:.2f}, baseline time "
                f"x{mt['base_s'] / bt['base_s']:.2f}, ratio {bt['diag_s'] / bt['base_s']:.2f}x -> {mt['diag_s'] / mt['base_s']:.2f}x")
        if base.get("memory") and m.get("memory"):
            b0, m0 = base["memory"], m["memory"]
            line += (f"; diagnosing process peak RSS {b0['main_peak_rss_mib']:.0f} -> {m0['main_peak_rss_mib']:.0f} MiB, "
                     f"tree peak PSS {b0['tree_peak_pss_mib']:.0f} -> {m0['tree_peak_pss_mib']:.0f} MiB")
        notes.append(line)
    elapsed = time.perf_counter() - started
    footer = notes + [f"bench wall time {elapsed / 60:.1f} min; load average at end {_load()}"]
    print("\n" + "\n".join(tables) + "\n\n" + "\n".join(footer))
    if args.markdown:
        cmd = "bench/run " + " ".join(argv if argv is not None else sys.argv[1:])
        md = [f"`{cmd.strip()}`", "", *[f"- {h}" for h in header], "", *tables, "", *[f"- {x}" for x in footer]]
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text("\n".join(md) + "\n")
        print(f"markdown -> {args.markdown}")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "cold_method": cold_method, "results": results,
                                         "triage": triage_rows, "longlived": longlived_rows}, indent=2))
    if args.clean:
        for tag, gib, trials in points:
            shutil.rmtree(args.workdir / f"{gib:g}g-{trials}t", ignore_errors=True)
    return 0 if all(r["same_verdicts"] for r in triage_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
