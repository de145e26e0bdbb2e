"""Per-call memory growth of a long-lived process: one Python process diagnosing the packaged
examples again and again (``rlhealth.diagnose.diagnose``), and one ``rlhealth mcp`` server
answering ``diagnose`` tool calls from the official MCP SDK client (when the ``mcp`` extra is
installed). RSS (``VmRSS``) is read after the warm-up calls and after the measured calls; the
growth per call is their difference over the count.

    python bench/longlived.py [--calls N] [--warmup W]      # prints one line per mode, JSON with --json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

NOW = "2026-01-01T00:00:00Z"


def _rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _examples() -> list[str]:
    import rlhealth.examples as ex
    root = Path(ex.__file__).parent
    return [str(root / n) for n in ("colocated-wedge", "healthy-agentic")]


def _in_process(calls: int, warmup: int) -> dict:
    from rlhealth.diagnose import diagnose
    from rlhealth.usage import parse_now

    now, bundles = parse_now(NOW), _examples()
    diagnose(Path(bundles[0]), now=now)
    first = _rss_mib()
    for i in range(1, warmup):
        diagnose(Path(bundles[i % 2]), now=now)
    base, t0 = _rss_mib(), time.perf_counter()
    for i in range(calls):
        diagnose(Path(bundles[i % 2]), now=now)
    return {"mode": "in-process diagnose()", "calls": calls, "warmup": warmup, "first_mib": first,
            "after_warmup_mib": base, "end_mib": _rss_mib(), "s_per_call": (time.perf_counter() - t0) / calls}


def _mcp(calls: int, warmup: int) -> dict | None:
    try:
        import anyio
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError:
        return None
    exe = str(Path(sys.executable).parent / "rlhealth")
    bundles = _examples()

    def server_pid() -> int:
        me = os.getpid()
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    stat = open(f"/proc/{name}/stat", "rb").read()
                except OSError:
                    continue
                if int(stat[stat.rfind(b")") + 2:].split()[1]) == me:
                    return int(name)
        raise RuntimeError("no rlhealth mcp process")

    async def run() -> dict:
        async with stdio_client(StdioServerParameters(command=exe, args=["mcp"], cwd="/")) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                pid = server_pid()

                async def call(i):
                    res = await s.call_tool("diagnose", {"bundle": bundles[i % 2], "now": NOW})
                    if res.is_error:
                        raise RuntimeError(f"diagnose tool failed: {res}")
                await call(0)
                first = _rss_mib(pid)
                for i in range(1, warmup):
                    await call(i)
                base, t0 = _rss_mib(pid), time.perf_counter()
                for i in range(calls):
                    await call(i)
                return {"mode": "rlhealth mcp (SDK client)", "calls": calls, "warmup": warmup, "first_mib": first,
                        "after_warmup_mib": base, "end_mib": _rss_mib(pid),
                        "s_per_call": (time.perf_counter() - t0) / calls}
    return anyio.run(run)


def measure(calls: int = 200, warmup: int = 20) -> list[dict]:
    """Both modes, the in-process one in a fresh interpreter (this process' own heap is not it)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--calls", str(calls),
                          "--warmup", str(warmup)], capture_output=True, text=True, check=True)
    rows = [json.loads(out.stdout)]
    mcp = _mcp(calls, warmup)
    if mcp is not None:
        rows.append(mcp)
    for r in rows:
        r["growth_kib_per_call"] = (r["end_mib"] - r["after_warmup_mib"]) * 1024 / r["calls"]
    return rows


def table(rows: list[dict]) -> list[str]:
    lines = ["| process | RSS after 1st call | after warm-up | after N more calls | growth per call | s per call |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['first_mib']:.0f} MiB | {r['after_warmup_mib']:.0f} MiB (W={r['warmup']}) | "
                     f"{r['end_mib']:.0f} MiB (N={r['calls']}) | **{r['growth_kib_per_call']:.1f} KiB** | "
                     f"{r['s_per_call']:.3f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_in_process(args.calls, args.warmup)))
        return 0
    rows = measure(args.calls, args.warmup)
    print(json.dumps(rows, indent=2) if args.json else "\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
