"""Start-up: a small bundle's diagnosis imports only what it needs (no numpy for small files, no
probe, audit, HTML or MCP libraries), and the newline counts of the small-block path equal numpy's."""
from __future__ import annotations

import subprocess
import sys

from rlhealth.probes import scan as S

from corpus import incident_dirs


def test_small_bundle_diagnosis_imports_no_heavy_library():
    bundle = next(d for d in incident_dirs() if "baseline-healthy-agentic" in d.name) / "bundle"
    code = ("import sys, io, contextlib\n"
            "from rlhealth.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['diagnose', {str(bundle)!r}, '--now', '2026-08-01T15:30:00Z', '--format', 'json'])\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    loaded = set(out.stdout.split())
    assert "rlhealth" in loaded and "hyperscan" in loaded
    heavy = {"numpy", "pandas", "matplotlib", "kubernetes", "paramiko", "safetensors", "jsonschema", "mcp", "playwright"}
    from rlhealth.packaged import stored_document
    if stored_document("sets.yaml") is not None:     # an install stored the parsed knowledge files
        heavy.add("yaml")
    assert loaded & heavy == set()


def test_small_and_big_block_paths_count_the_same_lines(tmp_path, monkeypatch):
    lines = []
    for i in range(40_000):
        if i % 997 == 0:
            lines.append(f"2026-08-01 12:00:00 ERROR boom {i}")
        elif i % 13 == 0:
            lines.append("")
        else:
            lines.append(f"INFO routine line {i} " + "x" * (i % 50))
    path = tmp_path / "log.txt"
    path.write_text("\n".join(lines) + "\nno trailing newline ERROR boom")
    assert path.stat().st_size > 4 * S.NUMPY_MIN_BYTES

    def scan(threshold):
        monkeypatch.setattr(S, "NUMPY_MIN_BYTES", threshold)
        scanner = S.Scanner([S.Pattern(key="boom", regex=r"ERROR boom")])
        hits = []
        total = scanner.scan_file(path, "log.txt", lambda h: hits.append((h.lineno, h.text)), block_bytes=64 * 1024)
        return total, hits

    small, big = scan(1 << 40), scan(0)
    assert small == big
    assert len(small[1]) == len([x for x in lines if "boom" in x]) + 1
    assert small[1][0] == (1, "2026-08-01 12:00:00 ERROR boom 0")


def test_the_command_exits_without_teardown_but_runs_exit_handlers_and_flushes(tmp_path):
    """``rlhealth`` (``cli.run``) ends with ``os._exit``: the report (block-buffered into a pipe),
    exit handlers and the verdict's exit code all survive."""
    bundle = next(d for d in incident_dirs() if "baseline-healthy-agentic" in d.name) / "bundle"
    code = ("import atexit, sys\n"
            "from rlhealth import cli\n"
            "atexit.register(lambda: sys.stdout.write('EXIT-HANDLER-RAN\\n'))\n"
            f"sys.argv = ['rlhealth', 'diagnose', {str(bundle)!r}, '--now', '2026-08-01T15:30:00Z', '--format', 'json']\n"
            "cli.run()\n"
            "raise SystemExit(99)   # not reached\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    report, _, tail = out.stdout.rpartition("}\n")
    assert tail == "EXIT-HANDLER-RAN\n", out.stdout[-300:]
    import json

    from rlhealth.cli import VERDICT_EXIT
    assert out.returncode == VERDICT_EXIT[json.loads(report + "}")["verdict"]], out.stderr


def _collector_state_after(command: list[str]) -> str:
    """``gc.isenabled()`` seen by an exit handler of ``rlhealth`` (``cli.run``) running ``command``."""
    code = ("import atexit, gc, sys\n"
            "from rlhealth import cli\n"
            "atexit.register(lambda: sys.stderr.write(f'COLLECTOR={gc.isenabled()}\\n'))\n"
            f"sys.argv = ['rlhealth', *{command!r}]\n"
            "cli.run()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    return out.stderr.strip().splitlines()[-1]


def test_the_command_starts_without_the_collector_and_only_diagnose_keeps_it_off():
    bundle = next(d for d in incident_dirs() if "baseline-healthy-agentic" in d.name) / "bundle"
    assert _collector_state_after(["diagnose", str(bundle), "--now", "2026-08-01T15:30:00Z", "--format", "json"]) == "COLLECTOR=False"
    assert _collector_state_after(["schema", "report"]) == "COLLECTOR=True"
    assert _collector_state_after(["rules", "list"]) == "COLLECTOR=True"
