"""`rlhealth audit --format html`: the completion record as one self-contained page, loaded in chromium."""
from __future__ import annotations

import json

from browser_page import open_page


def test_audit_html_is_the_json_record_and_loads_cleanly(std_run, cli, tmp_path):
    run, bundle = std_run
    code, rec, _ = cli(run, "--bundle", bundle)
    hcode, page, err = cli(run, "--bundle", bundle, fmt="html")
    assert hcode == code == 0, err
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "default-src 'none'" in page
    for section in ("terminal_state", "selection", "candidates", "inventory"):
        assert f'id="section-{section}"' in page
    assert rec["source_revision"]["value"] in page and rec["status"] in page
    out = tmp_path / "audit.html"
    out.write_text(page)
    seen = open_page(out)
    assert seen["page_errors"] == [] and seen["requests"] == [] and seen["failed"] == []
    assert [m for m in seen["console"] if m[0] in ("error", "warning")] == []
    assert seen["title"].startswith("RL-RUN-AUDIT") and json.dumps(rec["status"]).strip('"') in seen["title"]
