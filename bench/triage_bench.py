#!/usr/bin/env python3
"""Triage throughput (jobs per minute): ``rlhealth triage ROOT`` against diagnosing the same
bundles one after another, each as a whole process (how a supervisor without triage runs them).

    bench/run --triage                        # incident corpus + 20 hard-linked copies of the base bundle
    bench/triage_bench.py --copies 20 --log-gib 1 --trials 20000 --runs 3

Two corpora: the replayed incidents (``tests/incidents/``, small bundles) and ``--copies`` copies
of the generated benchmark bundle (hard links: no extra disk, one page cache), laid out as a
syncdown root ``jobs/<cluster>/<user>/<job-NN>/``. Each measurement runs after one untimed
warm-up; medians of ``--runs`` alternating runs are reported. The verdicts of triage and of the
one-by-one runs are compared, job by job.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))


def _rlhealth() -> list[str]:
    import shutil

    exe = shutil.which("rlhealth", path=str(Path(sys.executable).parent)) or shutil.which("rlhealth")
    return [exe] if exe else [sys.executable, "-m", "rlhealth"]


def _timed(argv: list[str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0, proc.stdout


def one_by_one(bundles: list[Path], now: str, per_job: list[float] | None = None) -> tuple[float, dict[str, str]]:
    """Each bundle diagnosed by its own ``rlhealth diagnose`` process, one after the other; the
    wall time of each process is appended to ``per_job``."""
    verdicts, t0 = {}, time.perf_counter()
    for b in bundles:
        wall, out = _timed(_rlhealth() + ["diagnose", str(b), "--now", now, "--format", "json"])
        verdicts[str(b)] = json.loads(out)["verdict"]
        if per_job is not None:
            per_job.append(wall)
    return time.perf_counter() - t0, verdicts


def triage(root: Path, now: str, jobs: int | None) -> tuple[float, dict[str, str]]:
    argv = _rlhealth() + ["triage", str(root), "--now", now, "--format", "json"] + (["--jobs", str(jobs)] if jobs else [])
    wall, out = _timed(argv)
    return wall, {r["path"]: r["verdict"] for r in json.loads(out)["jobs"]}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x ^= i
    return x


def available_parallelism(workers: int = 2, seconds: float = 1.0) -> float:
    """What a perfect pool of ``workers`` processes could gain right now: the wall time of a fixed
    CPU-bound work done in one process over that of the same work split across ``workers`` forked
    processes (2.0 on two idle cores; less when other work holds the CPUs)."""
    import multiprocessing

    n = 1_000_000
    t0 = time.perf_counter()
    _spin(n)
    n = max(1, int(n * seconds / max(1e-3, time.perf_counter() - t0)))
    t0 = time.perf_counter()
    for _ in range(workers):
        _spin(n)
    one = time.perf_counter() - t0
    ctx = multiprocessing.get_context("fork")
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_spin, args=(n,)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return one / (time.perf_counter() - t0)


def measure(name: str, root: Path, bundles: list[Path], now: str, runs: int, jobs: int | None) -> dict:
    load_before = _load()
    from rlhealth.triage import usable_cores

    one_by_one(bundles, now), triage(root, now, jobs)  # warm-up: page cache, compiled bytecode
    seq, par, single, avail, per_job = [], [], [], [], []
    same = True
    for _ in range(runs):
        avail.append(available_parallelism(jobs or usable_cores()))
        w, v1 = one_by_one(bundles, now, per_job)
        seq.append(w)
        w, v2 = triage(root, now, jobs)
        par.append(w)
        w, v3 = triage(root, now, 1)
        single.append(w)
        same = same and v1 == v2 == v3
    s, p, one = statistics.median(seq), statistics.median(par), statistics.median(single)
    n = len(bundles)
    row = {"corpus": name, "jobs": n, "one_by_one_s": s, "triage_s": p, "triage_one_worker_s": one,
           "one_by_one_jobs_per_min": 60 * n / s, "triage_jobs_per_min": 60 * n / p, "speedup": s / p,
           "pool_speedup": one / p, "same_verdicts": same, "one_by_one_all": seq, "triage_all": par,
           "triage_one_worker_all": single, "load": f"{load_before} -> {_load()}",
           "available_parallelism": statistics.median(avail), "available_parallelism_all": avail,
           "per_job_median_s": statistics.median(per_job), "per_job_max_s": max(per_job)}
    print(f"[{name}] {n} jobs: one-by-one median {s:.2f}s ({row['one_by_one_jobs_per_min']:.0f} jobs/min), "
          f"triage median {p:.2f}s ({row['triage_jobs_per_min']:.0f} jobs/min), speedup {row['speedup']:.2f}x; "
          f"triage --jobs 1 {one:.2f}s (pool speedup {row['pool_speedup']:.2f}x; a perfect pool would get "
          f"{row['available_parallelism']:.2f}x now); one diagnosis (whole process) median {row['per_job_median_s']:.3f}s, "
          f"max {row['per_job_max_s']:.3f}s; same verdicts: {same}")
    return row


def copies_root(workdir: Path, base: Path, copies: int) -> Path:
    """``copies`` hard-linked copies of ``base`` as a syncdown root (rebuilt when the count changes)."""
    import shutil

    root = workdir / f"triage-{copies}x-{base.name}"
    stamp = root / "copied.json"
    want = {"base": str(base), "copies": copies, "base_mtime": (base / "manifest.json").stat().st_mtime}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return root
    shutil.rmtree(root, ignore_errors=True)
    for i in range(copies):
        dest = root / "jobs" / "cw-us-east-02a" / "bench" / f"{base.name}-{i:02d}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-al", str(base), str(dest)], check=True)
    stamp.write_text(json.dumps(want))
    return root


def run_all(workdir: Path, log_gib: float, trials: int, copies: int, runs: int, jobs: int | None = None,
            incidents: Path = REPO / "tests" / "incidents", incidents_now: str = "2026-08-01T15:30:00Z") -> list[dict]:
    """Both corpora: the incident corpus, and ``copies`` copies of the generated bundle (0: skipped)."""
    from rlhealth.triage import find_bundles, usable_cores

    print(f"\ntriage workers: {jobs or usable_cores()} (usable cores: {usable_cores()}, CPUs: {os.cpu_count()})")
    rows = []
    if incidents.is_dir():
        rows.append(measure("incidents", incidents, find_bundles(incidents), incidents_now, runs, jobs))
    if copies:
        import gen

        base, _ = gen.generate(workdir, f"{log_gib:g}g-{trials}t", int(log_gib * gen.GIB), trials)
        root = copies_root(workdir, base, copies)
        rows.append(measure(f"{copies}x {log_gib:g} GiB/{trials} trials", root, find_bundles(root), gen.NOW, runs, jobs))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--incidents", type=Path, default=REPO / "tests" / "incidents")
    ap.add_argument("--incidents-now", default="2026-08-01T15:30:00Z")
    ap.add_argument("--copies", type=int, default=20, help="copies of the generated bundle (0: skip that corpus)")
    ap.add_argument("--log-gib", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, help="triage workers (default: triage's own, the usable cores)")
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    args = ap.parse_args(argv)
    rows = run_all(args.workdir, args.log_gib, args.trials, args.copies, args.runs, args.jobs, args.incidents,
                   args.incidents_now)
    print("\n| corpus | jobs | one-by-one (s) | triage --jobs 1 (s) | triage (s) | one-by-one jobs/min | triage jobs/min "
          "| speedup vs one-by-one | pool speedup |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['corpus']} | {r['jobs']} | {r['one_by_one_s']:.2f} | {r['triage_one_worker_s']:.2f} | {r['triage_s']:.2f} | "
              f"{r['one_by_one_jobs_per_min']:.0f} | {r['triage_jobs_per_min']:.0f} | **{r['speedup']:.2f}x** | "
              f"{r['pool_speedup']:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["same_verdicts"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
