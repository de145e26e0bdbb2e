#!/usr/bin/env python3
"""The Kubernetes probe's cost on a wide job: time and API requests per pod.

    bench/run --k8s [--pods 64] [--runs 3] [--json FILE]

Serves ``tests/k8s/scenarios.wide_exec_forbidden`` (N running pods on N nodes, every pods/exec
refused with HTTP 403, neighbours' events in the namespace) from the loopback API server of the
tests (real TLS, the real ``kubernetes`` client), runs the probe's capture in this process with
the command line's defaults (``--polls 3 --poll-interval 10s --command-timeout 60s --deadline 5m``,
no ``iris`` CLI on PATH) and reports the median wall time of ``--runs`` captures and the requests
the server received, by kind, with the requests per pod. Targets: at most 10 s and 4 requests per
pod for 64 pods.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "k8s"))
from fake_apiserver import FakeApiServer  # noqa: E402
import scenarios  # noqa: E402

TARGET_SECONDS = 10.0
TARGET_REQUESTS_PER_POD = 4.0


def _kind(path: str) -> str:
    if path.startswith("/api/v1/nodes/"):
        return "node"
    tail = path.rsplit("/", 1)[-1]
    return tail if tail in ("exec", "log", "events", "pods") else "pod"


def one_capture(pods: int, workdir: Path) -> tuple[float, Counter]:
    from rlhealth.cli import build_parser, probe_options
    from rlhealth.probes.backends import get_backend
    from rlhealth.usage import parse_now

    sc = scenarios.wide_exec_forbidden(pods)
    with FakeApiServer(sc.incident, workdir / "apiserver") as server:
        kubeconfig = server.write_kubeconfig()
        args = build_parser().parse_args(
            ["probe", "--backend", "iris", "--cluster", scenarios.CLUSTER, "--job", scenarios.JOB_ID,
             "--kubeconfig", str(kubeconfig), "--bundle-root", str(workdir / "bundles"), "--now", scenarios.NOW_ISO])
        options = probe_options(args)
        t0 = time.monotonic()
        get_backend("iris").capture(options, now=parse_now(args.now))
        took = time.monotonic() - t0
        kinds = Counter(_kind(r.path) for r in server.requests)
    return took, kinds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the result here as JSON")
    args = ap.parse_args(argv)
    # no iris CLI: the probe derives the controller state from the pods (as in tests/k8s)
    os.environ["PATH"] = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                         if d and not (Path(d) / "iris").exists())
    times, kinds = [], Counter()
    for _ in range(args.runs):
        workdir = Path(tempfile.mkdtemp(prefix="rlhealth-k8s-bench-"))
        try:
            took, kinds = one_capture(args.pods, workdir)
            times.append(took)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    total = sum(kinds.values())
    result = {"pods": args.pods, "runs": args.runs, "seconds_median": round(statistics.median(times), 2),
              "seconds": [round(t, 2) for t in times], "requests": total,
              "requests_per_pod": round(total / args.pods, 2), "requests_by_kind": dict(sorted(kinds.items())),
              "target_seconds": TARGET_SECONDS, "target_requests_per_pod": TARGET_REQUESTS_PER_POD}
    print(f"| pods | probe time (median of {args.runs}) | requests | requests per pod | by kind |")
    print("|---:|---:|---:|---:|---|")
    print(f"| {args.pods} | {result['seconds_median']:.2f} s | {total} | {result['requests_per_pod']:.2f} | "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) + " |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    within = result["seconds_median"] <= TARGET_SECONDS and result["requests_per_pod"] <= TARGET_REQUESTS_PER_POD
    print(f"targets (<= {TARGET_SECONDS:g} s, <= {TARGET_REQUESTS_PER_POD:g} requests per pod): "
          + ("met" if within else "MISSED"))
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
