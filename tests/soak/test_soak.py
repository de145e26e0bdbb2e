"""Long-lived processes hold memory flat: repeated in-process diagnoses of the packaged examples,
the same through ``rlhealth mcp`` driven by the official MCP SDK client, and a triage of a root
with many bundles (the parent's and every worker's RSS).

Counts are sized for CI (about 70 s on 2 cores: 200 in-process diagnoses, 200 MCP calls, a
triage of 1,000 hard-linked bundles with 2 workers); the bound is per call: at most
``PER_CALL_KIB`` of RSS growth per diagnosis after warm-up (50 MiB per 1,000 calls) plus
``SLACK_MIB`` for allocator granularity. A leak of the size this guards against (several MiB per
call) fails within the first checkpoint.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest

import rlhealth.examples as examples
from corpus import rlhealth_argv

EXAMPLES = [Path(examples.__file__).parent / n for n in ("colocated-wedge", "healthy-agentic")]
NOW = "2026-01-01T00:00:00Z"
PER_CALL_KIB = 50          # 50 MiB per 1,000 calls
SLACK_MIB = 6.0
WARMUP = 20
CALLS = 200
TRIAGE_BUNDLES = 1000
TRIAGE_WORKER_MIB = 150    # one triage worker's peak RSS
TRIAGE_PARENT_MIB = 150    # the triage parent's peak RSS


def rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _bound(calls: int) -> float:
    return calls * PER_CALL_KIB / 1024 + SLACK_MIB


def _soak(call, rss) -> tuple[float, float]:
    """Warm up, then CALLS calls; fails at the first checkpoint whose growth exceeds the bound."""
    for i in range(WARMUP):
        call(i)
    base = rss()
    for i in range(1, CALLS + 1):
        call(i)
        if i % 20 == 0:
            grown = rss() - base
            assert grown <= _bound(i), f"RSS grew {grown:.1f} MiB over {i} calls after warm-up (bound {_bound(i):.1f})"
    return base, rss() - base


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_in_process_diagnoses_hold_rss_flat():
    from rlhealth.diagnose import diagnose
    from rlhealth.usage import parse_now

    now = parse_now(NOW)

    def call(i):
        diagnose(EXAMPLES[i % 2], now=now)
    base, grown = _soak(call, rss_mib)
    print(f"in-process: {CALLS} diagnoses after {WARMUP} warm-up: {base:.1f} MiB -> +{grown:.1f} MiB")


def test_mcp_server_diagnoses_hold_rss_flat():
    pytest.importorskip("mcp", reason="the optional extra rlhealth[mcp] (scripts/test installs it)")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def session():
        argv = rlhealth_argv("mcp")
        async with stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], cwd="/")) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                server = _child_pid()
                for i in range(WARMUP):
                    assert not (await s.call_tool("diagnose", {"bundle": str(EXAMPLES[i % 2]), "now": NOW})).is_error
                base = rss_mib(server)
                for i in range(1, CALLS + 1):
                    res = await s.call_tool("diagnose", {"bundle": str(EXAMPLES[i % 2]), "now": NOW})
                    assert not res.is_error
                    if i % 20 == 0:
                        grown = rss_mib(server) - base
                        assert grown <= _bound(i), f"the MCP server's RSS grew {grown:.1f} MiB over {i} calls"
                return base, rss_mib(server) - base
    base, grown = anyio.run(session)
    print(f"mcp: {CALLS} diagnose calls after {WARMUP} warm-up: {base:.1f} MiB -> +{grown:.1f} MiB")


def _child_pid() -> int:
    me = os.getpid()
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = open(f"/proc/{name}/stat", "rb").read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if int(fields[1]) != me:
            continue
        try:        # earlier tests of the same pytest process may have left other children (sshd, ...)
            argv = open(f"/proc/{name}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"mcp" in argv:
            kids.append(int(name))
    assert len(kids) == 1, kids
    return kids[0]


def test_triage_of_many_bundles_bounds_parent_and_worker_rss(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import rss

    root = tmp_path / "jobs"
    for i in range(TRIAGE_BUNDLES):        # hard links: 1,000 bundles cost no disk
        src = EXAMPLES[i % 2]
        for dirpath, _, files in os.walk(src):
            dest = root / f"job{i:04d}" / os.path.relpath(dirpath, src)
            dest.mkdir(parents=True, exist_ok=True)
            for f in files:
                os.link(os.path.join(dirpath, f), dest / f)
    t0 = time.perf_counter()
    out = rss.sample_tree(rlhealth_argv("triage", str(root), "--now", NOW, "--format", "json", "--jobs", "2"),
                          interval_s=0.1)
    assert out["exit"] in (0, 10), out
    print(f"triage of {TRIAGE_BUNDLES} bundles in {time.perf_counter() - t0:.0f}s: parent peak "
          f"{out['main_peak_rss_mib']:.0f} MiB, worker peak {out['reader_sampled_peak_rss_mib']:.0f} MiB")
    assert out["main_peak_rss_mib"] <= TRIAGE_PARENT_MIB
    assert out["reader_sampled_peak_rss_mib"] <= TRIAGE_WORKER_MIB
