"""The HTML report's layout in headless Chromium: no word broken inside a table cell (every cell
measured against its longest word), WHY as a nested tree of ``<details>`` matching the Markdown's
nesting, no duplicated table rows or fired rules, the trainer-progress plot, and one
distinguishable line per engine in the throughput plot."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from browser_page import CHROMIUM, CHROMIUM_ARGS
from corpus import incident_dirs, load_expected, rlhealth_argv

WORD = r"[A-Za-z0-9]{2,30}"
"""A word: a run of letters and digits (longer runs are tokens such as hashes, wrapped by design)."""

_MEASURE = """
(WORD) => {
  const re = new RegExp(WORD, 'g');
  const canvas = document.createElement('canvas');
  const ctx = canvas.getContext('2d');
  const out = [];
  const blockOf = (el) => { while (el && !['block', 'table-cell', 'list-item', 'flow-root'].includes(getComputedStyle(el).display)) el = el.parentElement; return el; };
  for (const cell of document.querySelectorAll('table td, table th')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let longest = {word: '', width: 0, room: Infinity};
    const broken = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (parent.closest('td, th') !== cell) continue;   // a nested table's cell is measured on its own
      const style = getComputedStyle(parent);
      ctx.font = style.font;
      const block = blockOf(parent);
      const bs = getComputedStyle(block);
      const room = block.clientWidth - parseFloat(bs.paddingLeft) - parseFloat(bs.paddingRight);
      for (const m of node.data.matchAll(re)) {
        const width = ctx.measureText(m[0]).width;
        if (width > longest.width) longest = {word: m[0], width, room};
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
    out.push({table: cell.closest('table').id || '', text: cell.textContent.slice(0, 60), word: longest.word,
              width: longest.width, room: longest.room, broken});
  }
  return out;
}
"""


def incident(fragment):
    d = next(d for d in incident_dirs() if fragment in d.name)
    return d, load_expected(d)


def _html(tmp_path: Path, fragment: str) -> tuple[Path, str]:
    d, e = incident(fragment)
    out = tmp_path / f"{fragment}.html"
    run = subprocess.run(rlhealth_argv("diagnose", str(d / "bundle"), "--now", e["now"], "--format", "html", "-o", str(out)),
                         capture_output=True, text=True, check=False, cwd="/")
    assert run.returncode in (0, 10, 20), run.stderr
    md = subprocess.run(rlhealth_argv("diagnose", str(d / "bundle"), "--now", e["now"]), capture_output=True, text=True,
                        check=False, cwd="/").stdout
    return out, md


def _page(path: Path, width: int, script: str, arg=None):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not installed at {CHROMIUM} (scripts/services/browser.sh installs it)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(path.resolve().as_uri(), wait_until="load")
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            return page.evaluate(script, arg)
        finally:
            browser.close()


@pytest.mark.parametrize("fragment,width", [("colocated-deception-live", 1400), ("colocated-deception-live", 1200),
                                            ("nccl-collective-timeout-abort", 1400), ("stale-evidence-with-crash", 1400),
                                            ("chain-same-failure", 1200)])
def test_no_table_cell_breaks_a_word(tmp_path, fragment, width):
    out, _ = _html(tmp_path, fragment)
    cells = _page(out, width, _MEASURE, WORD)
    assert len(cells) > 50
    broken = [(c["table"], c["text"], c["broken"]) for c in cells if c["broken"]]
    assert broken == [], broken
    narrow = [(c["table"], c["word"], round(c["width"]), round(c["room"])) for c in cells if c["width"] > c["room"] + 0.5]
    assert narrow == [], narrow
    overflow = _page(out, width, "() => Array.from(document.querySelectorAll('table')).filter("
                                 "t => t.getBoundingClientRect().right > document.body.getBoundingClientRect().right + 1).map(t => t.id)")
    assert overflow == [], overflow       # words kept whole without pushing a table past the page


def _markdown_why(md: str) -> list[tuple[int, str]]:
    block = md.split("\nWHY:\n", 1)[1].split("\nNEXT ACTION:", 1)[0]
    out = []
    for line in block.splitlines():
        body = line.lstrip(" ")
        if body.startswith("and ["):
            continue
        out.append(((len(line) - len(body)) // 2 - 1, body[3:] if body.startswith("<- ") else body))
    return out


_TREE = """
() => {
  const out = [];
  const walk = (el, depth) => {
    for (const child of el.children) {
      if (child.matches('details.why-node')) {
        out.push([depth, child.querySelector(':scope > summary').firstChild.textContent]);
        walk(child.querySelector(':scope > .why-children'), depth + 1);
      } else if (child.matches('.why-leaf, blockquote.why-quote')) {
        out.push([depth, child.firstChild.textContent]);
      }
    }
  };
  walk(document.getElementById('why'), 0);
  return out;
}
"""


@pytest.mark.parametrize("fragment", ["colocated-deception-live", "nccl-collective-timeout-abort"])
def test_why_is_a_nested_tree_matching_the_markdown(tmp_path, fragment):
    out, md = _html(tmp_path, fragment)
    tree = [tuple(x) for x in _page(out, 1400, _TREE)]
    expected = _markdown_why(md)
    assert len(tree) >= 5
    assert [d for d, _ in tree] == [d for d, _ in expected]
    for (_, shown), (_, text) in zip(tree, expected):
        if text.endswith("(quoted above)"):     # the Markdown refers to a quote printed above; the tree repeats it
            assert shown.startswith(text.split(" (quoted above)")[0].split(": ")[0])
        else:
            assert shown == text
    nested = _page(out, 1400, "() => document.querySelectorAll('#why details details details').length")
    assert nested >= 1


_ROWS = """
() => Array.from(document.querySelectorAll('table')).map(t => ({id: t.id,
  rows: Array.from(t.rows).filter(r => r.closest('table') === t).map(r => r.innerText)}))
"""


def test_no_duplicated_rows_or_fired_rules(tmp_path):
    out, _ = _html(tmp_path, "colocated-deception-live")
    for table in _page(out, 1400, _ROWS):
        dups = {r for r in table["rows"] if table["rows"].count(r) > 1}
        assert not dups, (table["id"], dups)
    fired = _page(out, 1400, "() => Array.from(document.querySelectorAll('#fired-rules code')).map(c => c.textContent)")
    assert fired and len(fired) == len(set(fired))


def test_progress_plot_marks_the_freshness_limit_and_the_evaluation_time(tmp_path):
    out, _ = _html(tmp_path, "colocated-deception-live")
    page = out.read_text()
    assert 'data-plot="progress"' in page
    svg = re.search(r'<figure class="plot" id="plot-progress".*?</figure>', page, re.S).group(0)
    assert "#cf222e" in svg      # the freshness limit (red dashed) is drawn


def test_throughput_plot_draws_one_distinguishable_line_per_engine(tmp_path):
    from rlhealth.html import engine_styles, plot_throughput

    styles = engine_styles(40)
    assert len({(s["color"], s["marker"], s["linestyle"]) for s in styles}) == 40
    assert len({(s["color"], s["marker"]) for s in styles[:8]}) == 8 and len({s["color"] for s in styles[:10]}) == 10
    rows = [[1.754e9 + 60 * i, 2000.0] for i in range(30)]       # two engines with identical samples
    svg = plot_throughput({"engine-a": rows, "engine-b": list(rows)}, 500.0, None)
    for style in styles[:2]:
        assert style["color"] in svg
    # each engine's line is drawn with its own markers (a <defs> marker path per engine)
    assert len(re.findall(r'<path id="m[0-9a-f]+"', svg)) >= 2
