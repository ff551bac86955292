"""The roofline section: per workload, each backend's achieved GFLOP/s against the step's
arithmetic intensity, under the run's two measured ceilings (compute, memory bandwidth), and a
table saying per backend which one bounds it (the figures: :mod:`rosetta.report.ceilings`).

One point per (run, workload, backend, point): the median achieved GFLOP/s over its ok rounds.
The intensity is the spec's (the same for every backend of a point: what differs is how close
each gets to the roof above it).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rosetta.report.charts import Chart, colour, plain_log, pyplot, safe_id, to_svg
from rosetta.report.fmt import DASH, fmt_num, fmt_pct
from rosetta.report.frame import Tables
from rosetta.report.groups import group_machine
from rosetta.report.order import workload_order
from rosetta.report.stats import passed

POINT_KEYS = ["run_id", "workload", "backend", "point", "machine"]


def points(t: Tables) -> pd.DataFrame:
    """One row per (run, workload, backend, point, machine) with a roofline position: the
    median GFLOP/s over its ok rounds, its standing (first round's), whether every round passed
    the gate."""
    cells = t.cells.assign(machine=group_machine(t.cells))  # "" on a one-machine run
    ok = cells[(cells["status"] == "ok") & cells["gflops"].notna()]
    ok = ok[[s is not None and s.intensity is not None for s in ok["standing"]]]
    rows = []
    for _, g in ok.groupby(POINT_KEYS, sort=False, dropna=False):
        first = g.iloc[0]
        rows.append(
            {
                **{k: first[k] for k in POINT_KEYS},
                "precision": first["precision"],
                "gflops": float(np.median(g["gflops"].astype(float))),
                "standing": first["standing"],
                "equivalent": all(passed(e) for e in g["equivalent"]),
            }
        )
    return pd.DataFrame(
        rows, columns=[*POINT_KEYS, "precision", "gflops", "standing", "equivalent"]
    )


def rows(p: pd.DataFrame) -> list[dict]:
    """The roofline table: intensity, achieved, attainable, the share of it and the bound."""
    out = []
    for _, r in p.iterrows():
        st = r["standing"]
        attainable = st.attainable
        several = (
            len(
                p[(p["run_id"] == r["run_id"]) & (p["workload"] == r["workload"])]["point"].unique()
            )
            > 1
        )
        out.append(
            {
                "run_id": r["run_id"],
                "workload": r["workload"] + (f" ({r['point']})" if several else ""),
                "backend": r["backend"] + (f" on {r['machine']}" if r["machine"] else ""),
                "intensity": fmt_num(st.intensity, ".3g"),
                "gflops": fmt_num(r["gflops"], ".3g"),
                "attainable": fmt_num(attainable, ".3g"),
                "of_attainable": fmt_pct(r["gflops"] / attainable) if attainable else DASH,
                "bound": f"{st.bound}-bound" if st.bound else "no bandwidth measured",
                "equivalent": bool(r["equivalent"]),
            }
        )
    return out


def chart(workload: str, run_id: str, p: pd.DataFrame, ceilings, label_run: bool) -> Chart | None:
    """The roofline of one workload in one run: both ceilings as lines, a point per backend."""
    mine = p[(p["workload"] == workload) & (p["run_id"] == run_id)]
    if mine.empty:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    xs = [r["standing"].intensity for _, r in mine.iterrows()]
    ys = list(mine["gflops"])
    roofs = [c for c in ceilings.compute if c.precision in set(mine["precision"]) | {"fp32"}]
    bw = ceilings.bandwidth_gbs
    ridges = [c.gflops / bw for c in roofs] if bw else []
    lo = min([*xs, *ridges]) / 8
    hi = max([*xs, *ridges]) * 8
    for c in roofs:  # the roofline: the memory line up to the ridge, the ceiling after it
        ridge = c.gflops / bw if bw else lo
        style = "-" if c.precision == "fp32" else "--"
        ax.plot([max(ridge, lo), hi], [c.gflops, c.gflops], color="#333333", lw=1.4, ls=style)
        ax.annotate(
            f"{c.label}: {c.gflops:.0f} GFLOP/s",
            (max(ridge, lo) * 1.1, c.gflops * 1.05),
            ha="left",
            va="bottom",
            fontsize=8,
        )
    if bw:
        top = max(c.gflops for c in roofs) if roofs else max(ys)
        x_mem = np.array([lo, top / bw])
        ax.plot(x_mem, x_mem * bw, color="#0b57d0", lw=1.4)
        ax.annotate(
            f"memory {bw:.0f} GB/s",
            (lo * 1.3, lo * 1.3 * bw / 1.3),
            color="#0b57d0",
            va="top",
            fontsize=8,
        )
    for _, r in mine.iterrows():
        name = str(r["backend"]) + (f" on {r['machine']}" if r["machine"] else "")
        name += f" ({r['point']})" if len(set(mine["point"])) > 1 else ""
        bad = not r["equivalent"]
        ax.scatter(
            [r["standing"].intensity],
            [r["gflops"]],
            color=colour(str(r["backend"])),
            marker="x" if bad else "o",
            s=40,
            zorder=3,
            label=name + (" (not equivalent)" if bad else ""),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    y_lo = min([*ys, lo * bw if bw else min(ys)]) / 2
    y_hi = max([*ys, *(c.gflops for c in roofs)]) * 2
    ax.set_ylim(y_lo, y_hi)
    plain_log(ax.xaxis, log_ticks(lo, hi))
    plain_log(ax.yaxis, log_ticks(y_lo, y_hi))
    ax.set_xlabel("arithmetic intensity (spec FLOP per byte a step must move)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="major", color="#e4e4e8", lw=0.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    where = f" ({run_id})" if label_run else ""
    chart_id = safe_id("roofline", workload, run_id)
    return Chart(
        chart_id,
        f"{workload}{where}: achieved GFLOP/s against arithmetic intensity, under "
        + " and ".join([*(c.label for c in roofs), *([f"memory {bw:.0f} GB/s"] if bw else [])])
        + ("" if bw else " (no bandwidth measured in this run)"),
        to_svg(fig, chart_id),
    )


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks between ``lo`` and ``hi`` (1-10 where the range spans more than 3 decades)."""
    steps = (1, 2, 5) if hi / lo <= 1e3 else (1,)
    k = math.floor(math.log10(lo))
    out = []
    while 10**k <= hi:
        out.extend(m * 10**k for m in steps if lo <= m * 10**k <= hi)
        k += 1
    return out


def section(t: Tables) -> dict | None:
    """The template's roofline section: {"charts": [...], "rows": [...]}; None with no point."""
    p = points(t)
    if p.empty:
        return None
    runs = {r.run_id: r for r in t.runs.runs}
    charts = []
    for run_id in dict.fromkeys(p["run_id"]):
        for w in workload_order(p[p["run_id"] == run_id]["workload"]):
            c = chart(w, run_id, p, runs[run_id].ceilings, len(runs) > 1)
            if c is not None:
                charts.append(c)
    return {"charts": charts, "rows": rows(p)}
