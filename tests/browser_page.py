"""A real headless browser (Debian's chromium driven by playwright) for the HTML report tests."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def open_page(path: Path, screenshot: Path | None = None) -> dict:
    """Load ``path`` (file://) and return what the page did: console messages, page errors,
    every request other than the page itself, the rendered plots and their sizes."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not installed at {CHROMIUM} (scripts/services/browser.sh installs it)")
    url = path.resolve().as_uri()
    seen = {"console": [], "page_errors": [], "requests": [], "failed": []}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: seen["console"].append((m.type, m.text)))
            page.on("pageerror", lambda e: seen["page_errors"].append(str(e)))
            page.on("request", lambda r: seen["requests"].append(r.url) if r.url != url else None)
            page.on("requestfailed", lambda r: seen["failed"].append(r.url))
            page.goto(url, wait_until="load")
            seen["plots"] = page.eval_on_selector_all(
                "figure.plot svg",
                "els => els.map(e => { const b = e.getBoundingClientRect();"
                " return {plot: e.closest('figure').dataset.plot, width: b.width, height: b.height,"
                " paths: e.querySelectorAll('path').length}; })")
            seen["title"] = page.title()
            seen["verdict"] = page.text_content("#verdict") if page.query_selector("#verdict") else None
            if screenshot is not None:
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return seen
