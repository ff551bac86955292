"""The report's charts: matplotlib figures rendered to inline SVG strings (nothing to fetch).

One function per chart, each taking the frames it needs and returning a :class:`Chart` whose
``svg`` goes straight into the page. Text stays text (``svg.fonttype = none``) so the page is
small and searchable; each chart gets its own id salt so several SVGs can share one page.
Cells that failed the equivalence gate are drawn hatched and labelled "not equivalent".
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rosetta import backends
from rosetta.report.fmt import fmt_ms
from rosetta.report.order import backend_order
from rosetta.report.stats import passed

# One colour per backend, fixed so a backend looks the same in every chart (Okabe-Ito, CVD-safe).
EXTRA = ["#0072B2", "#D55E00", "#F0E442", "#999999"]
BAD = "#b3261e"  # not equivalent: the page's red
WIDTH_IN = 7.5  # inches: ~720 px at 96 dpi, fits a laptop column and an A4 page


@dataclass(frozen=True)
class Chart:
    """One rendered chart: an id for anchors, a caption, and the SVG markup itself."""

    chart_id: str
    caption: str
    svg: str


def colour(backend: str) -> str:
    """The backend's colour: its package's ``COLOUR``, or a stable fallback for a backend this
    installation does not have (another installation's records)."""
    return backends.constant(backend, "COLOUR") or EXTRA[sum(map(ord, backend)) % len(EXTRA)]


def safe_id(*parts: str) -> str:
    """An HTML/SVG id from free text (run ids may hold any character)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(parts)).strip("-")


def pyplot():
    """matplotlib's pyplot on the Agg backend, names as plain text (never mathtext)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["text.parse_math"] = False  # names are plain text, never mathtext
    import matplotlib.pyplot as plt

    return plt


def plain_log(axis, ticks=None, span: tuple[float, float] | None = None) -> None:
    """Plain-number tick labels on a log ``axis`` (``ax.xaxis``/``ax.yaxis``): mathtext
    is off (names stay plain text), so matplotlib's ``10^k`` labels would show as raw TeX.
    ``ticks``: exactly these; else, with ``span`` (the data's low and high), readable ticks
    from :func:`log_ticks` (a span inside one decade would otherwise get one tick or none)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if ticks is None and span is not None:
        ticks = log_ticks(*span)
    if ticks is not None:
        axis.set_ticks(list(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def log_ticks(low: float, high: float, most: int = 8) -> list[float]:
    """Ticks for a log axis over [low, high]: the finest of the 1-2-5 ladders (1,2,5 x 10^k;
    then 1,2,3,5; then every digit 1..9 x 10^k) that puts at least three ticks in the span,
    thinned to at most ``most``; the two ends' own values when nothing fits (a span of a few
    percent)."""
    import math

    if not (low > 0 and high > low and math.isfinite(high)):
        return [low] if low > 0 else []
    ladders = ((1,), (1, 2, 5), (1, 2, 3, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9))
    k0, k1 = math.floor(math.log10(low)), math.ceil(math.log10(high))
    best: list[float] = []
    for ladder in ladders:
        ticks = [m * 10.0**k for k in range(k0, k1 + 1) for m in ladder]
        best = [float(f"{t:.6g}") for t in ticks if low <= t <= high]
        if len(best) >= 3:
            break
    if len(best) > most:
        step = math.ceil(len(best) / most)
        best = best[::step]
    if len(best) < 2:
        best = sorted({float(f"{low:.2g}"), float(f"{high:.2g}"), *best})
    return best


def to_svg(fig, chart_id: str) -> str:
    """``fig`` as SVG markup with ids salted by ``chart_id`` (several charts on one page)."""
    import matplotlib

    plt = pyplot()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": chart_id}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline in HTML
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)  # RDF with URLs
    svg = re.sub(r'(<svg[^>]*?)\swidth="[^"]*"\sheight="[^"]*"', r"\1", svg, count=1)
    return svg.replace("<svg", f'<svg role="img" aria-label="{chart_id}" class="chart"', 1)


def _label(cell: pd.Series, multi_run: bool) -> str:
    name = str(cell["backend"])
    if cell.get("machine"):  # a run spanning several machines: one bar per machine
        name += f" on {cell['machine']}"
    if multi_run:
        name += f" @ {cell['run_id']}"
    if not passed(cell["equivalent"]):
        name += " (not equivalent)"
    return name


def _ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Backends in registry order (the reference first), each backend's runs side by side."""
    rank = {b: i for i, b in enumerate(backend_order(list(rows["backend"])))}
    runs = {r: i for i, r in enumerate(dict.fromkeys(rows["run_id"]))}
    key = [(rank[b], runs[r]) for b, r in zip(rows["backend"], rows["run_id"], strict=True)]
    return rows.iloc[sorted(range(len(rows)), key=key.__getitem__)]


def step_time_chart(workload: str, cells: pd.DataFrame) -> Chart | None:
    """Median steady-state step time per backend (and run) with its 95% interval, in ms.

    Bars on a linear axis; where the medians span more than 20x (the NumPy reference against
    compiled frameworks), points on a log axis so the fast backends stay readable."""
    rows = cells[(cells["workload"] == workload) & (cells["status"] == "ok")]
    rows = _ordered(rows[rows["steady_median"].notna()])
    if rows.empty:
        return None
    plt = pyplot()
    multi = rows["run_id"].nunique() > 1
    n = len(rows)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.9 + 0.42 * n))
    y = np.arange(n)[::-1]
    med = rows["steady_median"].to_numpy(float) * 1e3
    lo = np.nan_to_num(rows["steady_low"].to_numpy(float) * 1e3, nan=0.0)
    hi = np.nan_to_num(rows["steady_high"].to_numpy(float) * 1e3, nan=0.0)
    lo, hi = np.where(lo > 0, np.minimum(lo, med), med), np.maximum(hi, med)
    log = med.max() / med.min() > 20
    for i, (_, c) in enumerate(rows.iterrows()):
        ok = passed(c["equivalent"])
        col = colour(c["backend"])
        if not log:
            ax.barh(y[i], med[i], height=0.6, color=col, alpha=0.35, lw=0)
            if not ok:  # a hatched outline on top, visible whatever the fill
                ax.barh(y[i], med[i], height=0.6, fill=False, hatch="///", edgecolor=BAD, lw=0.8)
        ax.errorbar(
            med[i],
            y[i],
            xerr=[[med[i] - lo[i]], [hi[i] - med[i]]],
            fmt="o" if ok else "x",
            color=col if log else "#111111",
            ms=6 if log else 4,
            capsize=5,
            lw=1.4,
        )
        ax.annotate(
            f"{fmt_ms(med[i] / 1e3)} ms",
            (hi[i], y[i]),
            xytext=(7, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(y, [_label(c, multi) for _, c in rows.iterrows()])
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo.min() / 1.6, hi.max() * 2.2)
        plain_log(ax.xaxis, span=ax.get_xlim())
        ax.grid(axis="x", which="major", color="#dddddd", lw=0.6)
        ax.set_xlabel("median steady-state step time (ms, log scale), whiskers: 95% interval")
    else:
        ax.set_xlim(0, max(float(hi.max()) * 1.22, 1e-9))
        ax.set_xlabel("median steady-state step time (ms), whiskers: 95% interval of the median")
    ax.set_ylim(-0.6, n - 0.4)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: steady-state step time", loc="left", fontsize=11)
    cid = safe_id("steps", workload)
    return Chart(cid, f"{workload}: median step time with 95% interval", to_svg(fig, cid))


def round_chart(workload: str, groups: pd.DataFrame) -> Chart | None:
    """Each backend's per-round median step times (dots) beside the cross-round 95% interval
    (a bar): the spread between processes that the interval summarises. None with one round."""
    rows = groups[(groups["workload"] == workload) & (groups["status"] == "ok")]
    rows = _ordered(rows[rows["steady_median"].notna()])
    if rows.empty or max(len(m) for m in rows["round_medians"]) < 2:
        return None
    plt = pyplot()
    multi = rows["run_id"].nunique() > 1
    n = len(rows)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.9 + 0.42 * n))
    y = np.arange(n)[::-1]
    for i, (_, c) in enumerate(rows.iterrows()):
        col = colour(c["backend"])
        lo, hi = c["steady_low"] * 1e3, c["steady_high"] * 1e3
        ax.plot([lo, hi], [y[i], y[i]], color=col, lw=6, alpha=0.3, solid_capstyle="butt")
        meds = np.asarray(c["round_medians"], dtype=float) * 1e3
        jitter = np.linspace(-0.15, 0.15, meds.size) if meds.size > 1 else np.zeros(1)
        ax.plot(meds, y[i] + jitter, "o" if passed(c["equivalent"]) else "x", color=col, ms=4)
        ax.plot([c["steady_median"] * 1e3] * 2, [y[i] - 0.3, y[i] + 0.3], color="#111111", lw=1)
    ax.set_yticks(y, [_label(c, multi) for _, c in rows.iterrows()])
    meds_all = np.concatenate([np.asarray(m, dtype=float) for m in rows["round_medians"]]) * 1e3
    ends = np.concatenate([meds_all, rows["steady_low"] * 1e3, rows["steady_high"] * 1e3])
    ends = ends[np.isfinite(ends) & (ends > 0)]
    if meds_all.max() / meds_all.min() > 5:  # a slow reference would squash the rest
        ax.set_xscale("log")
        ax.set_xlim(ends.min() / 1.15, ends.max() * 1.15)
        plain_log(ax.xaxis, span=ax.get_xlim())
    ax.set_xlabel("median step time of each round (ms, dots); band: 95% interval across rounds")
    ax.set_ylim(-0.6, n - 0.4)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: step time per round", loc="left", fontsize=11)
    cid = safe_id("rounds", workload)
    caption = f"{workload}: per-round medians and the interval across rounds"
    return Chart(cid, caption, to_svg(fig, cid))


def cold_start_chart(workload: str, cells: pd.DataFrame) -> Chart | None:
    """Cold start split into import, build and first step (compile/autotune land there)."""
    rows = cells[(cells["workload"] == workload) & (cells["status"] == "ok")]
    rows = _ordered(rows[rows["cold_start_s"].notna()])
    if rows.empty:
        return None
    plt = pyplot()
    multi = rows["run_id"].nunique() > 1
    n = len(rows)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.3 + 0.42 * n))
    y = np.arange(n)[::-1]
    parts = [
        ("import_s", "import", "#bbbbbb"),
        ("build_s", "build", "#7f7f7f"),
        ("first_step_s", "first step (compile, autotune)", "#404040"),
    ]
    left = np.zeros(n)
    split = rows[["import_s", "build_s", "first_step_s"]].notna().all(axis=1).to_numpy()
    for col, name, shade in parts:
        v = np.where(split, np.nan_to_num(rows[col].to_numpy(float)), 0.0)
        ax.barh(y, v, left=left, height=0.6, color=shade, label=name, edgecolor="white")
        left += v
    whole = rows["cold_start_s"].to_numpy(float)
    rest = np.where(split, 0.0, whole)  # records without the split: one plain bar
    if rest.any():
        ax.barh(y, rest, left=left, height=0.6, color="#999999", label="cold start (not split)")
    for i in range(n):
        ax.text(whole[i], y[i], f"  {whole[i]:.3g} s", va="center", fontsize=8)
    ax.set_yticks(y, [_label(c, multi) for _, c in rows.iterrows()])
    ax.set_xlabel("seconds from import to the end of the first step")
    ax.set_xlim(0, max(float(whole.max()) * 1.2, 1e-9))
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=3, fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: cold start", loc="left", fontsize=11, pad=22)
    cid = safe_id("cold", workload)
    return Chart(cid, f"{workload}: cold start (import, build, first step)", to_svg(fig, cid))


def loss_chart(
    workload: str, run_id: str, cells: pd.DataFrame, losses: pd.DataFrame, reference: str
) -> Chart | None:
    """Every backend's per-step training loss overlaid; below, its difference from the reference.

    They start from the same canonical weights, so the curves coincide until dropout masks and
    rounding part them."""
    sel = losses[(losses["workload"] == workload) & (losses["run_id"] == run_id)]
    if sel.empty:
        return None
    plt = pyplot()
    cell_of = cells[(cells["workload"] == workload) & (cells["run_id"] == run_id)]
    equiv = dict(zip(cell_of["backend"], cell_of["equivalent"], strict=False))
    groups = dict(list(sel.groupby("backend", sort=False)))
    curves = {b: groups[b].sort_values("step") for b in backend_order(list(groups))}
    has_ref = reference in curves and len(curves) > 1
    fig, axes = plt.subplots(
        2 if has_ref else 1,
        1,
        figsize=(WIDTH_IN, 4.6 if has_ref else 3.2),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1.3]} if has_ref else None,
        squeeze=False,
    )
    ax = axes[0][0]
    for b, g in curves.items():
        label = b if passed(equiv.get(b)) else f"{b} (not equivalent)"
        ax.plot(
            g["step"],
            g["loss"],
            color=colour(b),
            lw=1.3,
            alpha=0.85,
            label=label,
            ls="-" if passed(equiv.get(b)) else "--",
        )
    ax.set_ylabel("training loss")
    ax.legend(fontsize=8, frameon=False, ncols=min(len(curves), 3))
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: training loss per step ({run_id})", loc="left", fontsize=11)
    if has_ref:
        ref = curves[reference].set_index("step")["loss"]
        dx = axes[1][0]
        for b, g in curves.items():
            if b == reference:
                continue
            d = g.set_index("step")["loss"] - ref
            dx.plot(d.index, d.to_numpy(), color=colour(b), lw=1.1)
        dx.axhline(0, color=colour(reference), lw=0.8)
        dx.set_ylabel(f"minus {reference}", fontsize=8)
        dx.spines[["top", "right"]].set_visible(False)
        axes[-1][0].set_xlabel("training step")
    else:
        ax.set_xlabel("training step")
    cid = safe_id("loss", workload, run_id)
    return Chart(cid, f"{workload}: loss curves of every backend ({run_id})", to_svg(fig, cid))
