"""The documentation resolves inside the repository.

Code, data files, tests and docs cite the source documents (the contract, the operators' runbooks
"seeds", the reference notes) by short keys such as ``contract §3``, ``seed 004 §2`` or
``marin-artifacts.md §5.2``. Those documents are not in the repository, so every cited key must have
an entry in the Citation index of docs/knowledge.md. Every relative link in docs/*.md must point at
an existing file (and heading), every ``docs/knowledge.md "Section"`` pointer at a heading, and the
Thresholds table of docs/knowledge.md must list every key of rules/thresholds.yaml with its value.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
KNOWLEDGE = REPO / "docs" / "knowledge.md"

# the tracked text the citation check reads: these top-level entries, minus the incident bundles
# (captured evidence, not our prose) and this file
SCANNED_ROOTS = ("rlhealth/", "probes/", "rules/", "reports/", "tests/", "scripts/", "bench/", "docs/")
SCANNED_FILES = ("README.md",)
EXCLUDED_RE = re.compile(r"^tests/incidents/[^/]+/bundle/|^tests/test_docs\.py$")   # this file's examples are synthetic

# A citation key. Case-insensitive: "Seed 002 step 5" and "seed 002 step 5" are one key.
KEY_RE = re.compile(
    r"seed [0-9]{3}(?: §[0-9.]+| step [0-9]+| gate [0-9]+| serving LUT| LUT header)?"
    r"|contract §[0-9.]+"
    r"|style(?:\.md)? §[0-9]+"
    r"|marin-artifacts(?:\.md)? §[0-9.]+"
    r"|log-formats(?:\.md)? §[0-9.]+"
    r"|peers(?:\.md)?(?: §[0-9.]+)?",
    re.IGNORECASE)
# after a document key, further sections of the same document: ", §3.4" or a range "-7.4" / "-§3.6"
CONTINUATION_RE = re.compile(r"(?:,\s*§([0-9]+(?:\.[0-9]+)*)|\s*-\s*§?([0-9]+(?:\.[0-9]+)*))")
# plural forms the key regex does not see: "seeds 000-002", "seed 003 gates 1-2"
SEED_RANGE_RE = re.compile(r"seeds? `?([0-9]{3})`?\s*[-–]\s*`?([0-9]{3})`?", re.IGNORECASE)
GATE_RANGE_RE = re.compile(r"seed ([0-9]{3}) gates ([0-9]+)\s*[-–]\s*([0-9]+)", re.IGNORECASE)
POINTER_RE = re.compile(r'docs/knowledge\.md\s*\(?"([^"]+)"')
LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def normalize_key(raw: str) -> str:
    """One spelling per key: lower case, single spaces, no ``.md``, no trailing punctuation."""
    key = re.sub(r"\s+", " ", raw.strip().strip("`").lower())
    key = re.sub(r"\.md\b", "", key)
    return key.rstrip(".,;:")


def citation_keys(text: str) -> set[str]:
    """Every citation key in ``text``, lists and ranges expanded to one key per section."""
    keys: set[str] = set()
    for match in KEY_RE.finditer(text):
        key = normalize_key(match.group(0))
        keys.add(key)
        if " §" not in key or key.startswith("seed "):
            continue
        document = key.split(" §")[0]
        pos = match.end()
        while (more := CONTINUATION_RE.match(text, pos)) is not None:
            keys.add(f"{document} §{more.group(1) or more.group(2)}")
            pos = more.end()
    for match in SEED_RANGE_RE.finditer(text):
        first, last = int(match.group(1)), int(match.group(2))
        keys.update(f"seed {n:03d}" for n in range(first, last + 1))
    for match in GATE_RANGE_RE.finditer(text):
        first, last = int(match.group(2)), int(match.group(3))
        keys.update(f"seed {match.group(1)} gate {n}" for n in range(first, last + 1))
    return keys


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of every ATX heading outside fenced code blocks."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING_RE.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2).strip()))
    return found


def citation_index(markdown: str) -> set[str]:
    """The normalized keys of the ``###`` headings under ``## Citation index``."""
    index, inside = set(), False
    for level, text in headings(markdown):
        if level <= 2:
            inside = text.lower() == "citation index"
        elif inside and level == 3:
            index.add(normalize_key(text))
    return index


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for _, text in headings(markdown):
        base = slug(re.sub(r"`", "", text))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def scanned_files() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
        paths = [p for p in listed.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: every file under the roots
        paths = [p.relative_to(REPO).as_posix() for p in REPO.rglob("*") if p.is_file()]
    return sorted(p for p in paths
                  if (p in SCANNED_FILES or p.startswith(SCANNED_ROOTS)) and not EXCLUDED_RE.match(p)
                  and (REPO / p).is_file())


def read_text(rel: str) -> str | None:
    data = (REPO / rel).read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@pytest.fixture(scope="module")
def knowledge() -> str:
    assert KNOWLEDGE.is_file(), "docs/knowledge.md is missing"
    return KNOWLEDGE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def repo_texts() -> dict[str, str]:
    texts = {rel: text for rel in scanned_files() if (text := read_text(rel)) is not None}
    assert "README.md" in texts and "docs/knowledge.md" in texts, "the scan must see README.md and docs/"
    return texts


def test_extractor_reads_every_citation_form():
    text = ("(contract §3; seed 004 §3 Gate B; Seed 002 step 5.) marin-artifacts.md §5.2, §5.4; "
            "log-formats §7.3-7.4 and marin-artifacts §3.4-§3.6; seeds `000`-`002`; seed 003 gates 1-2; "
            "seed 004 serving LUT; style.md §6; peers")
    assert citation_keys(text) == {
        "contract §3", "seed 004 §3", "seed 002 step 5", "marin-artifacts §5.2", "marin-artifacts §5.4",
        "log-formats §7.3", "log-formats §7.4", "marin-artifacts §3.4", "marin-artifacts §3.6",
        "seed 000", "seed 001", "seed 002", "seed 003", "seed 003 gate 1", "seed 003 gate 2",
        "seed 004 serving lut", "style §6", "peers"}


def test_citation_index_parser_sees_only_the_index():
    doc = ("## Liveness\n### seed 004 §9\n## Citation index\n### contract §3\n### `Seed 004 LUT header`\n"
           "```\n### seed 004 §8\n```\n## After\n### log-formats §1.1\n")
    assert citation_index(doc) == {"contract §3", "seed 004 lut header"}


def test_every_cited_key_has_a_citation_index_entry(knowledge, repo_texts):
    index = citation_index(knowledge)
    assert index, "docs/knowledge.md has no '## Citation index' with '###' entries"
    missing: dict[str, set[str]] = {}
    for rel, text in repo_texts.items():
        for key in citation_keys(text) - index:
            missing.setdefault(key, set()).add(rel)
    assert not missing, ("citation keys with no '### <key>' entry in docs/knowledge.md's Citation index:\n"
                         + "\n".join(f"  {key}  (cited in {', '.join(sorted(files))})"
                                     for key, files in sorted(missing.items())))


def test_docs_relative_links_resolve():
    broken = []
    for doc in sorted((REPO / "docs").glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        for target in LINK_RE.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):   # http:, https:, mailto:
                continue
            path_part, _, fragment = target.partition("#")
            linked = (doc.parent / path_part).resolve() if path_part else doc
            if not linked.exists():
                broken.append(f"docs/{doc.name}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"docs/{doc.name}: {target} (no such heading)")
    assert not broken, "broken links in docs/:\n" + "\n".join(broken)


def test_knowledge_pointers_name_a_heading(knowledge, repo_texts):
    titles = [text.lower() for _, text in headings(knowledge)]
    broken = []
    for rel, text in repo_texts.items():
        for name in POINTER_RE.findall(text):
            wanted = name.lower()
            if not any(t == wanted or t.startswith(wanted + " ") for t in titles):
                broken.append(f'{rel}: docs/knowledge.md "{name}"')
    assert not broken, "pointers to docs/knowledge.md sections that do not exist:\n" + "\n".join(broken)


def test_thresholds_table_matches_thresholds_yaml(knowledge):
    thresholds = yaml.safe_load((REPO / "rules" / "thresholds.yaml").read_text(encoding="utf-8"))
    expected = {k: float(v) for k, v in thresholds.items() if k != "version"}
    documented = {}
    for match in re.finditer(r"^\| `([a-z0-9_]+)` \| ([-0-9.e]+) \|", knowledge, re.MULTILINE):
        documented[match.group(1)] = float(match.group(2))
    problems = [f"{k}: missing from the Thresholds table" for k in sorted(expected.keys() - documented.keys())]
    problems += [f"{k}: documented but not in rules/thresholds.yaml" for k in sorted(documented.keys() - expected.keys())]
    problems += [f"{k}: table says {documented[k]:g}, rules/thresholds.yaml says {expected[k]:g}"
                 for k in sorted(expected.keys() & documented.keys()) if documented[k] != expected[k]]
    assert not problems, "docs/knowledge.md Thresholds table is out of date:\n" + "\n".join(problems)
