"""HTML reports: one self-contained file (inline CSS, inline SVG plots, no scripts, no network).

Plots are drawn by matplotlib (Agg canvas, SVG output, text as paths so no font is referenced)
from pandas frames of the series ``rlhealth.plots_data`` measured; the page carries a
Content-Security-Policy that forbids every fetch, so opening it never touches the network.
"""
from __future__ import annotations

import io
import re
from typing import Any

_STATUS_COLORS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "ERROR": "#9a6700", "KILL": "#cf222e",
                  "NO-KILL": "#1a7f37"}
_ROLE_COLORS = {"policy": "#8250df", "inference": "#0969da", "unknown": "#6e7781"}


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "rlhealth", "font.size": 9,
                                "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 96})
    return plt


def _svg(fig) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no metadata, no external reference)."""
    plt = _mpl()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def _epoch_index(values):
    import pandas as pd

    return pd.DatetimeIndex(pd.to_datetime(list(values), unit="s", utc=True)).tz_localize(None)


def plot_training(training: dict, window: dict | None) -> str | None:
    import pandas as pd

    metrics = training.get("metrics") or {}
    if not metrics or not training.get("steps"):
        return None
    plt = _mpl()
    df = pd.DataFrame(metrics, index=pd.Index(training["steps"], name="step"), dtype="float64")
    labels = {"reward": "reward", "entropy": "entropy", "tis_imp_ratio_mean": "TIS importance ratio (mean)",
              "grad_norm": "grad norm"}
    fig, axes = plt.subplots(len(df.columns), 1, figsize=(8, 1.7 * len(df.columns) + 0.4), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], df.columns):
        df[name].plot(ax=ax, marker="." if len(df) < 60 else None, color="#0969da", linewidth=1.2)
        ax.set_ylabel(labels.get(name, name), rotation=0, ha="right", va="center")
        if window:
            ax.axvspan(window["first_step"], window["last_step"], color="#ffd33d", alpha=0.25, linewidth=0)
    axes[0, 0].set_title("training metrics per step" + (f" (judged window: steps {window['first_step']}-{window['last_step']}, shaded)"
                                                          if window else ""), loc="left")
    axes[-1, 0].set_xlabel("step")
    return _svg(fig)


def plot_phases(training: dict) -> str | None:
    import pandas as pd

    phases = training.get("phases") or {}
    if not phases:
        return None
    plt = _mpl()
    df = pd.DataFrame(phases, index=pd.Index(training["phase_steps"], name="step"), dtype="float64").fillna(0.0)
    fig, ax = plt.subplots(figsize=(8, 2.8))
    if len(df) <= 80:
        df.plot.bar(stacked=True, ax=ax, width=0.85, colormap="tab20")
        ticks = max(1, len(df) // 15)
        ax.set_xticks(range(0, len(df), ticks))
        ax.set_xticklabels([str(s) for s in df.index[::ticks]], rotation=0)
    else:
        df.plot.area(stacked=True, ax=ax, colormap="tab20", linewidth=0)
    ax.set_ylabel("seconds")
    ax.set_title("phase durations per step (stacked: the spans directly within step and its unattributed remainder)"
                 if "unattributed" in df.columns else "phase durations per step (stacked)", loc="left")
    ax.legend(fontsize=7, ncol=min(4, len(df.columns)), loc="upper left", bbox_to_anchor=(0, -0.18), frameon=False)
    return _svg(fig)


_ENGINE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_ENGINE_DASHES = ("-", "--", ":", "-.")


def engine_styles(n: int) -> list[dict[str, Any]]:
    """One distinguishable style per engine line: colour (tab10), marker and dash pattern cycle at
    lengths 10, 8 and 4, so no two of the first 40 engines share all three."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return [{"color": matplotlib.colors.to_hex(cmap(i % 10)), "marker": _ENGINE_MARKERS[i % len(_ENGINE_MARKERS)],
             "linestyle": _ENGINE_DASHES[i % len(_ENGINE_DASHES)]} for i in range(n)]


def plot_throughput(throughput: dict, floor: float | None, floor_row: str | None) -> str | None:
    import pandas as pd

    if not throughput:
        return None
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    engines = sorted(throughput.items())
    styles = engine_styles(len(engines))
    for i, ((engine, rows), style) in enumerate(zip(engines, styles)):
        s = pd.Series([r[1] for r in rows], index=_epoch_index([r[0] for r in rows]), name=engine)
        # overlapping engines (the same samples) stay visible: markers thinned per engine at an offset
        every = max(1, len(s) // 12)
        s.plot(ax=ax, linewidth=1.4, color=style["color"], linestyle=style["linestyle"], marker=style["marker"],
               markersize=4, markevery=(i % every, every), alpha=0.9, label=engine if len(engines) <= 12 else None)
    if floor is not None:
        ax.axhline(floor, color="#cf222e", linestyle="--", linewidth=1.2,
                   label=f"table floor {floor:g} tok/s" + (f" ({floor_row})" if floor_row else ""))
    ax.set_ylabel("generation tok/s")
    ax.set_xlabel("")
    ax.set_ylim(bottom=0)
    ax.set_title(f"generation throughput per engine over time, UTC ({len(throughput)} engines)"
                 + ("" if len(engines) <= 12 else "; legend of the first 12 omitted"), loc="left")
    fig.autofmt_xdate()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.3), ncol=3, frameon=False)
    return _svg(fig)


def plot_progress(progress: dict | None) -> str | None:
    """Trainer steps against time, with the newest progress, the freshness limit the rules applied
    to its age, the newest evidence time and the evaluation time marked: a wedge is a flat line that
    ends before the limit while the evaluation time lies beyond it."""
    import pandas as pd

    if not progress or not (progress.get("points") or progress.get("last_progress")):
        return None
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    points = progress.get("points") or []
    if points:
        s = pd.Series([p[1] for p in points], index=_epoch_index([p[0] for p in points]))
        s.plot(ax=ax, drawstyle="steps-post", marker="o", markersize=3, color="#0969da", linewidth=1.4,
               label="completed step (dated metric records)")
    last = progress.get("last_progress")
    when = lambda t: _epoch_index([t])[0]  # noqa: E731
    if last is not None:
        ax.axvline(when(last), color="#1a7f37", linewidth=1.2, label="newest trainer progress line")
        limit = progress.get("limit_s")
        if limit is not None:
            from rlhealth.units import age_text

            ax.axvline(when(last + limit), color="#cf222e", linestyle="--", linewidth=1.4,
                       label=f"freshness limit: newest progress + {age_text(limit)}")
            end = max(t for t in (progress.get("evidence_time"), progress.get("evaluated"), last + limit) if t is not None)
            if end > last + limit:
                ax.axvspan(when(last + limit), when(end), color="#cf222e", alpha=0.08, linewidth=0)
    if progress.get("evidence_time") is not None:
        ax.axvline(when(progress["evidence_time"]), color="#6e7781", linestyle=":", linewidth=1.2,
                   label="newest evidence (ages are measured here)")
    if progress.get("evaluated") is not None:
        ax.axvline(when(progress["evaluated"]), color="#1f2328", linestyle="-.", linewidth=1.2, label="evaluation time (--now)")
    ax.set_ylabel("step")
    ax.set_xlabel("")
    ax.set_ylim(bottom=0)
    ax.set_title("trainer progress over time, UTC" + ("" if progress.get("limit_s") is not None else
                                                      " (no rule found the trainer frozen: no freshness limit crossed)"), loc="left")
    fig.autofmt_xdate()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.3), ncol=2, frameon=False)
    return _svg(fig)


def plot_trials(trials: dict | None) -> str | None:
    import pandas as pd

    if not trials or (not trials.get("rewards") and not any(trials.get("outcomes", {}).values())):
        return None
    plt = _mpl()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 2.6), gridspec_kw={"width_ratios": [3, 2]})
    rewards = pd.Series(trials.get("rewards") or [], dtype="float64")
    if len(rewards):
        rewards.plot.hist(ax=ax1, bins=min(30, max(5, rewards.nunique())), color="#0969da")
    ax1.set_title(f"trial reward histogram ({len(rewards)} trials)", loc="left")
    ax1.set_xlabel("reward")
    outcomes = pd.Series(trials.get("outcomes") or {}, dtype="float64")
    outcomes = outcomes[outcomes > 0]
    if len(outcomes):
        outcomes.sort_index().plot.barh(ax=ax2, color="#8250df")
    ax2.set_title("trial outcome mix", loc="left")
    ax2.set_xlabel("trials")
    fig.tight_layout()
    return _svg(fig)


def plot_gpus(rows: list[dict]) -> str | None:
    import pandas as pd

    if not rows:
        return None
    plt = _mpl()
    df = pd.DataFrame(rows)
    df["time"] = _epoch_index(df["t"])
    df["mem_gib"] = df["mem_used_mib"].astype("float64") / 1024.0
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 2.6))
    for role, group in sorted(df.groupby("role"), key=lambda kv: kv[0]):
        per_poll = group.groupby("time")[["util_pct", "mem_gib"]].mean()
        color = _ROLE_COLORS.get(role, "#6e7781")
        per_poll["util_pct"].plot(ax=ax1, marker="o", color=color, label=f"{role} ({group[['host', 'gpu']].drop_duplicates().shape[0]} GPUs)")
        per_poll["mem_gib"].plot(ax=ax2, marker="o", color=color, label=role)
    ax1.set_title("GPU utilization per role (mean, live polls)", loc="left")
    ax1.set_ylabel("util %")
    ax1.set_ylim(-2, 102)
    ax2.set_title("GPU memory used per role (mean)", loc="left")
    ax2.set_ylabel("GiB")
    for ax in (ax1, ax2):
        ax.set_xlabel("poll time (UTC)")
        ax.legend(fontsize=7)
    fig.autofmt_xdate()
    return _svg(fig)


def report_plots(series: dict | None) -> list[dict[str, str]]:
    """``[{"id", "title", "svg"}]`` for every plot the series support (absent data: no plot)."""
    if not series:
        return []
    training = series.get("training") or {}
    plots = [("progress", "Trainer progress over time vs the freshness limit",
              lambda: plot_progress(series.get("progress"))),
             ("training", "Reward, entropy, TIS and grad-norm", lambda: plot_training(training, series.get("window"))),
             ("phases", "Phase durations per step", lambda: plot_phases(training)),
             ("throughput", "Generation throughput per engine vs the table floor",
              lambda: plot_throughput(series.get("throughput") or {}, series.get("floor_tok_s"), series.get("floor_row"))),
             ("trials", "Trial rewards and outcomes", lambda: plot_trials(series.get("trials"))),
             ("gpus", "GPU utilization and memory per role", lambda: plot_gpus(series.get("gpu") or []))]
    out = []
    for pid, title, draw in plots:
        try:
            svg = draw()
        except Exception as exc:  # noqa: BLE001 - a plot that cannot be drawn is reported, the report still renders
            out.append({"id": pid, "title": title, "svg": None, "error": f"{type(exc).__name__}: {exc}"})
            continue
        if svg:
            out.append({"id": pid, "title": title, "svg": svg, "error": None})
    return out


_QUOTE_PREFIXES = ("> ", "= ")


def why_tree(lines: list[str]) -> list[dict[str, Any]]:
    """The WHY chain (``Report.why``: two spaces of indent per level) as a tree of
    ``{"text", "also", "quote", "children"}``, nested exactly as the Markdown prints it: a line is a
    child of the nearest line above it indented one level less; an ``and [rule] ...`` line is an
    alternative statement of the node above it."""
    roots: list[dict[str, Any]] = []
    stack: list[tuple[int, dict[str, Any]]] = []
    for raw in lines:
        body = raw.lstrip(" ")
        depth = (len(raw) - len(body)) // 2
        if body.startswith("and [") and stack:
            stack[-1][1]["also"].append(body)
            continue
        if body.startswith("<- "):
            body = body[3:]
        node = {"text": body, "also": [], "quote": body.startswith(_QUOTE_PREFIXES), "children": []}
        while stack and stack[-1][0] >= depth:
            stack.pop()
        (stack[-1][1]["children"] if stack else roots).append(node)
        stack.append((depth, node))
    return roots


_BREAK_AFTER = re.compile(r"([/:._=,|-]+)")


def with_break_points(text: Any):
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each separator of a long
    identifier or path (``/ : . _ = , | -``): such a token wraps at its separators, never inside a word."""
    import markupsafe

    escaped = str(markupsafe.escape("" if text is None else text))
    return markupsafe.Markup(_BREAK_AFTER.sub(r"\1<wbr>", escaped) if len(escaped) > 24 else escaped)


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("rlhealth.reports", "templates"),
                             undefined=jinja2.ChainableUndefined, autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["status_color"] = lambda s: _STATUS_COLORS.get(str(s), "#57606a")
    env.filters["wbr"] = with_break_points
    return env


def render_report_html(report, *, history: list[dict[str, Any]] | None = None) -> str:
    from rlhealth.facts import GATES
    from rlhealth.render import render_markdown

    import markupsafe

    derivation = getattr(report, "derivation", None)
    return _env().get_template("report.html.j2").render(
        r=report, gate_names=GATES, plots=[{**p, "svg": markupsafe.Markup(p["svg"]) if p["svg"] else None} for p in report_plots(report.plots)],
        derivation=[d if isinstance(d, dict) else d.model_dump() for d in (derivation or [])],
        history=history or [], markdown=render_markdown(report), why=why_tree(list(getattr(report, "why", None) or [])),
        fired=_fired_counts(getattr(report, "fired_rules", None) or []))


def _fired_counts(fired: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Each fired rule once, with how many times it fired, in first-firing order."""
    counts: dict[str, int] = {}
    for f in fired:
        rule = str(f.get("rule") if isinstance(f, dict) else f)
        counts[rule] = counts.get(rule, 0) + 1
    return list(counts.items())


def render_audit_html(record: dict[str, Any]) -> str:
    return _env().get_template("audit.html.j2").render(r=record, sections=[
        (k, record[k]) for k in sorted(record) if k not in ("schema", "evaluated_at", "run", "status", "exit_code", "error")])
