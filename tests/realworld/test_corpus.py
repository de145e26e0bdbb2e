"""Real failure wording (tests/realworld/corpus.yaml) through the installed catalog.

Every entry's text is written to a file and scanned with the diagnosis' own compiled hyperscan
database and line routing (``rlhealth.probes.bundle.scan_signatures``: suppression, skip rules,
traceback exception lines); the first causal error is chosen by the diagnosis' own judgement
(``rlhealth.first_error.first_errors_by_attempt``). No second matcher.
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from rlhealth.catalog import load_catalog
from rlhealth.first_error import first_errors_by_attempt
from rlhealth.probes.bundle import scan_signatures
from rlhealth.probes.parse.slurm import parse_stepd_lines

CORPUS = Path(__file__).with_name("corpus.yaml")
ENTRIES = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))["entries"]
CATALOG = load_catalog()
REFERENCE = datetime(2026, 8, 1, 12, 0, 0, tzinfo=timezone.utc)
"""The capture time yearless stamps are read against (``time`` fields are UTC under it)."""
CAUSAL_SEVERITIES = {"fatal", "hang", "transient", "marker", "secondary"}


def test_corpus_size_sources_and_families():
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert len(ENTRIES) >= 80
    families = {e["family"] for e in ENTRIES}
    assert len(families) >= 12, families
    for e in ENTRIES:
        assert str(e.get("source") or "").strip(), e["id"]
        assert e["text"].strip(), e["id"]
        assert e["expect"] == "none" or e["expect"] in CATALOG.signatures, e["id"]
    benign = [e for e in ENTRIES if e["expect"] == "none"]
    assert len(benign) >= 10


def test_every_referenced_signature_has_description_remediation_and_references():
    for sig_id in {e["expect"] for e in ENTRIES if e["expect"] != "none"}:
        sig = CATALOG.signatures[sig_id]
        assert sig.description.strip() and sig.remediation.strip() and sig.references, sig_id


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_entry(entry, tmp_path):
    log = tmp_path / "excerpt.log"
    log.write_text(entry["text"], encoding="utf-8")
    read = scan_signatures([(log, "excerpt.log")], CATALOG, REFERENCE.timestamp())
    first = first_errors_by_attempt(read.signatures).get(1)
    found = sorted(read.signatures)
    if entry["expect"] == "none":
        assert first is None, (first[1], first[0].text, found)
        causal = [s for s in found if CATALOG.signatures[s].severity in CAUSAL_SEVERITIES]
        assert not causal, causal
    else:
        assert first is not None, f"nothing named; signatures seen: {found}"
        assert first[1] == entry["expect"], (first[1], first[0].text, found)
        assert CATALOG.signatures[first[1]].family == entry["family"]
        if entry.get("quote"):
            assert entry["quote"] in first[0].text, first[0].text
        if "time" in entry:
            got = first[0].ts
            want = entry["time"]
            assert (None if got is None else datetime.fromtimestamp(int(got), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")) == want
    for benign_id in entry.get("also") or []:
        assert benign_id in read.signatures, (benign_id, found)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "stepd" in e], ids=lambda e: e["id"])
def test_slurmstepd_parser_reads_real_wording(entry):
    """The Slurm probe's own reader of slurmstepd messages (chain-leg state) on the same lines."""
    events = parse_stepd_lines(entry["text"])
    assert events, entry["text"]
    want = entry["stepd"]
    first = events[0]
    assert first.kind == want["kind"], first
    for key in ("reason", "node"):
        if key in want:
            assert getattr(first, key) == want[key], first
