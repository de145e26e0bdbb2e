"""`--format html`: one self-contained file that a real headless browser (chromium) loads with no
console errors and no network requests, with every plot rendered; plus the audit record as HTML."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from browser_page import open_page
from corpus import incident_dirs, load_expected, rlhealth_argv

DOCS = Path(__file__).resolve().parents[2] / "docs"


def incident(fragment):
    d = next(d for d in incident_dirs() if fragment in d.name)
    return d, load_expected(d)


def diagnose_html(fragment, out: Path, *extra) -> subprocess.CompletedProcess:
    d, e = incident(fragment)
    return subprocess.run(rlhealth_argv("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "html",
                                        "-o", str(out), *extra), capture_output=True, text=True, check=False, cwd="/")


def assert_self_contained(html: str) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", html), "a reference to an external resource"
    assert "@import" not in html and "url(" not in html.replace("url(#", "")
    assert "default-src 'none'" in html  # the page itself forbids every fetch


@pytest.mark.parametrize("fragment,plots", [
    ("colocated-deception-live", {"progress", "training", "phases", "throughput", "trials", "gpus"}),
    ("baseline-healthy-standard", {"progress", "training", "phases", "throughput"}),
])
def test_html_report_loads_in_chromium_with_every_plot_rendered(tmp_path, fragment, plots):
    out = tmp_path / "report.html"
    run = diagnose_html(fragment, out)
    assert run.returncode in (0, 10, 20), run.stderr
    html = out.read_text()
    assert_self_contained(html)
    seen = open_page(out, screenshot=tmp_path / "shot.png")
    assert seen["page_errors"] == []
    assert [m for m in seen["console"] if m[0] in ("error", "warning")] == []
    assert seen["requests"] == [] and seen["failed"] == []
    rendered = {p["plot"] for p in seen["plots"] if p["width"] > 200 and p["height"] > 100 and p["paths"] > 5}
    assert rendered == plots, seen["plots"]
    _, e = incident(fragment)
    assert seen["verdict"] == e["verdict"]
    assert (tmp_path / "shot.png").stat().st_size > 20_000


def test_html_carries_the_markdown_content(tmp_path):
    import html as html_lib

    out = tmp_path / "r.html"
    diagnose_html("colocated-wedge", out)
    d, e = incident("colocated-wedge")
    md = subprocess.run(rlhealth_argv("diagnose", str(d / "bundle"), "--now", e["now"]), capture_output=True,
                        text=True, check=False, cwd="/").stdout
    page = out.read_text()
    shown = re.search(r'<pre id="markdown">(.*?)</pre>', page, re.S).group(1)
    assert html_lib.unescape(shown).rstrip("\n") == md.rstrip("\n")
    for gate in ("LIVENESS", "RESOURCES", "ROLLOUTS", "DYNAMICS"):
        assert f'<td class="key">{gate}</td>' in page


def test_screenshot_of_the_html_report_for_the_docs(tmp_path, update_golden):
    """A full-page screenshot of a six-plot report; ``--update-golden`` writes it to docs/html-report.png."""
    import shutil

    d, e = incident("colocated-deception-live")
    bundle = tmp_path / "bundle"
    shutil.copytree(d / "bundle", bundle)
    out = tmp_path / "report.html"
    common = ["diagnose", str(bundle), "--now", e["now"], "--record"]
    # an earlier look with a tight freshness limit (stale: ERROR), then the verdict it flipped to
    subprocess.run(rlhealth_argv(*common, "--max-age", "1m"), capture_output=True, check=False, cwd="/")
    subprocess.run(rlhealth_argv(*common, "--format", "html", "-o", str(out), "--gpu", "H100-80GB-SXM", "--model",
                                 "Qwen3-8B", "--total-params-b", "8.2", "--focus", "first run with 4 engines"),
                   capture_output=True, check=False, cwd="/")
    shot = tmp_path / "html-report.png"
    seen = open_page(out, screenshot=shot)
    assert len(seen["plots"]) >= 4
    page = out.read_text()
    assert page.count('class="flipped"') == 1 and 'id="given"' in page
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width == 1200 and height > 2000, (width, height)
    if update_golden:
        DOCS.mkdir(exist_ok=True)
        (DOCS / "html-report.png").write_bytes(png)


def test_html_report_of_an_empty_bundle_still_renders(tmp_path):
    out = tmp_path / "r.html"
    (tmp_path / "empty").mkdir()        # a bundle that does not exist is a usage error, not a report
    run = subprocess.run(rlhealth_argv("diagnose", str(tmp_path / "empty"), "--now", "2026-08-01T12:00:00Z", "--format",
                                       "html", "-o", str(out)), capture_output=True, text=True, check=False, cwd="/")
    assert run.returncode == 20, run.stderr
    seen = open_page(out)
    assert seen["page_errors"] == [] and seen["requests"] == []
    assert seen["verdict"] == "ERROR" and seen["plots"] == []
