"""The scaling section: how each backend's step time moves along the sweep axes of a run.

Per run and workload, each part present only where the run has more than one point on its axis:

- **batch size**: throughput (samples/s) against batch size per backend, log-log, and a table of
  each batch size's throughput against the smallest, paired by round, with the verdict rule of
  :mod:`rosetta.report.stats`; memory per sample (peak RSS / batch) beside it;
- **threads**: speedup over the fewest threads and parallel efficiency (speedup x fewest / n);
- **precision**: each other precision's step time over fp32's (e.g. bf16 / fp32).

Batch-1 latency (p50 / p90 / p99 of the records that carry ``metrics.latency``) is its own
section (:func:`latency_sections`): it is measured at every run's points, swept or not.

Every ratio is computed within a round and summarised across rounds, "no clear difference"
where its interval includes 1 and "too few rounds for an interval" with one round, exactly as the
ratio table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rosetta.report import charts
from rosetta.report.fmt import fmt_interval, fmt_ms, fmt_num
from rosetta.report.frame import Tables
from rosetta.report.order import backend_order, workload_order
from rosetta.report.stats import (
    NO_CLEAR,
    TOO_FEW,
    TOO_FEW_ROUNDS,
    Estimate,
    Ratio,
    excludes_one,
    paired_ratio,
)


def sections(t: Tables) -> list[dict]:
    """One entry per (run, workload) with a swept axis; [] for a run of one point."""
    g = t.groups
    ok = g[(g["status"] == "ok") & g["steady_median"].notna()]
    out = []
    for run_id in dict.fromkeys(ok["run_id"]):
        for w in workload_order(ok[ok["run_id"] == run_id]["workload"]):
            rows = ok[(ok["run_id"] == run_id) & (ok["workload"] == w)]
            part = {
                "run_id": run_id,
                "workload": w,
                "batch": _axis(t, rows, "batch_size", ("precision", "threads")),
                "threads": _axis(t, rows, "threads", ("batch_size", "precision")),
                "precision": _precision(t, rows),
            }
            if part["batch"]:
                part["batch_chart"] = throughput_chart(run_id, w, rows)
            if part["threads"]:
                part["threads_chart"] = speedup_chart(run_id, w, part["threads"])
            if any(part[k] for k in ("batch", "threads", "precision")):
                out.append(part)
    return out


def latency_sections(t: Tables) -> list[dict]:
    """Per (run, workload) whose records carry batch-1 latency: ``{run_id, workload, rows}``
    (:func:`latency_rows`); the page shows them under their own heading, not under Scaling."""
    c = t.cells[t.cells[[f"latency_{p}" for p in LATENCY]].notna().any(axis=1)]
    out = []
    for run_id in dict.fromkeys(c["run_id"]):
        for w in workload_order(c[c["run_id"] == run_id]["workload"]):
            out.append({"run_id": run_id, "workload": w, "rows": latency_rows(t, run_id, w)})
    return out


def _est(c: pd.Series) -> Estimate:
    return Estimate(
        float(c["steady_median"]),
        float(c["steady_low"]),
        float(c["steady_high"]),
        str(c["method"]),
        tuple(c["round_medians"]),
        float(c["spread"]),
    )


def _paired(t: Tables, a: pd.Series, b: pd.Series) -> Ratio:
    """Group ``a``'s step time over group ``b``'s, paired by round (their steady rounds)."""
    return paired_ratio(t.rounds(a["steady_cells"]), t.rounds(b["steady_cells"]), _est(a), _est(b))


def _axis(t: Tables, rows: pd.DataFrame, axis: str, fixed: tuple[str, str]) -> list[dict]:
    """Rows of one axis (batch size or threads): per backend and fixed other axes, each value
    against the smallest, paired by round; [] when no backend has two values on it."""
    out = []
    vals = rows[axis].dropna()
    if vals.nunique() < 2:
        return []
    keyed = rows.astype({k: object for k in fixed})
    for (b, m, *_), g in keyed.groupby(["backend", "machine", *fixed], sort=False, dropna=False):
        g = g[g[axis].notna()].sort_values(axis)
        if len(g) < 2:
            continue
        base = g.iloc[0]
        for _, c in g.iterrows():
            r = _paired(t, base, c)
            n, n0 = float(c[axis]), float(base[axis])
            row = {
                "backend": _on(b, m),
                "fixed": ", ".join(_fmt_fixed(k, c[k]) for k in fixed if _fmt_fixed(k, c[k])),
                "value": int(n),
                "step": fmt_interval(c["steady_median"], c["steady_low"], c["steady_high"]),
                "median": float(c["steady_median"]),
            }
            # throughput(n) / throughput(n0) = (n / n0) * (t_0 / t_n); speedup: k = 1
            k = n / n0 if axis == "batch_size" else 1.0
            gain = _scaled(r, k)
            row["verdict"] = "baseline" if n == n0 else _gain_verdict(gain, axis)
            row["clear"] = gain.clear and n != n0
            if axis == "batch_size":
                row["gain"] = fmt_interval(gain.ratio, gain.low, gain.high, _x)
                row["throughput"] = fmt_num(n / c["steady_median"], ".4g")
                row["throughput_lohi"] = (n / c["steady_high"], n / c["steady_low"])
                rss = c["peak_rss_mb"]
                row["memory"] = fmt_num(None if pd.isna(rss) else rss / n, ".3g")
            else:
                # speedup = t_0 / t_n; efficiency = speedup x n0 / n (1 = perfect scaling)
                row["speedup"] = fmt_interval(r.ratio, r.low, r.high, _x)
                row["speedup_value"] = r.ratio
                row["efficiency"] = fmt_num(r.ratio * n0 / n, ".0%")
            out.append(row)
    return out


def _precision(t: Tables, rows: pd.DataFrame) -> list[dict]:
    """Each non-fp32 precision's step time over fp32's at the same batch size and threads."""
    if rows["precision"].nunique() < 2 or "fp32" not in set(rows["precision"]):
        return []
    out = []
    keyed = rows.astype({"batch_size": object, "threads": object})
    for (b, m, bs, th), g in keyed.groupby(
        ["backend", "machine", "batch_size", "threads"], sort=False, dropna=False
    ):
        ref = g[g["precision"] == "fp32"]
        if ref.empty:
            continue
        ref = ref.iloc[0]
        for _, c in g[g["precision"] != "fp32"].iterrows():
            r = _paired(t, c, ref)
            out.append(
                {
                    "backend": _on(b, m),
                    "fixed": ", ".join(
                        x for x in (_fmt_fixed("batch_size", bs), _fmt_fixed("threads", th)) if x
                    ),
                    "precision": f"{c['precision']} / fp32",
                    "fp32": fmt_ms(ref["steady_median"]),
                    "other": fmt_ms(c["steady_median"]),
                    "ratio": fmt_interval(r.ratio, r.low, r.high, lambda v: f"{v:.2f}"),
                    "verdict": r.verdict,
                    "clear": r.clear,
                }
            )
    return out


LATENCY = ("p50", "p90", "p99")


def latency_rows(t: Tables, run_id: str, workload: str) -> list[dict]:
    """p50/p90/p99 (ms) of every record of this run and workload that carries them."""
    c = t.cells[(t.cells["run_id"] == run_id) & (t.cells["workload"] == workload)]
    c = c[c[[f"latency_{p}" for p in LATENCY]].notna().any(axis=1)]
    return [
        {
            "backend": x["backend"] + (f" ({x['tag']})" if x["tag"] else ""),
            "point": x["point"],
            "n": fmt_num(x["latency_n"], ".0f"),
            **{p: fmt_ms(x[f"latency_{p}"]) for p in LATENCY},
        }
        for _, x in c.iterrows()
    ]


PANEL_SERIES = 6  # more series than this in one throughput chart: one panel per backend


def throughput_chart(run_id: str, workload: str, rows: pd.DataFrame) -> charts.Chart | None:
    """Throughput against batch size per backend (and precision/threads), log-log, whiskers
    from the cross-round interval of the step time; the legend beside the plot, never over its
    lines. More than :data:`PANEL_SERIES` series (a sweep of every backend) are split into one
    panel per backend, sharing the axes, so that each panel's few lines stay apart."""
    keyed = rows.astype({"precision": object, "threads": object})
    series = []
    for (b, m, prec, th), g in keyed.groupby(
        ["backend", "machine", "precision", "threads"], dropna=False
    ):
        g = g[g["batch_size"].notna()].sort_values("batch_size")
        if len(g) >= 2:
            series.append((b, m, prec, th, g))
    if not series:
        return None
    backends = backend_order(list(dict.fromkeys(b for b, *_ in series)))  # registry order
    settings = list(dict.fromkeys((str(p), str(t)) for _, _, p, t, _ in series))
    panels = backends if len(series) > PANEL_SERIES and len(backends) > 1 else [None]
    plt = charts.pyplot()
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(charts.WIDTH_IN, 1.2 + 2.4 * len(panels)), sharex=True,
        sharey=True, squeeze=False,
    )  # fmt: skip
    values = []
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        for b, m, prec, th, g in series:
            if panel is not None and b != panel:
                continue
            n = g["batch_size"].to_numpy(float)
            thr = n / g["steady_median"].to_numpy(float)
            lo, hi = n / g["steady_high"].to_numpy(float), n / g["steady_low"].to_numpy(float)
            values.extend([*lo, *hi])
            parts = (_on(b, m) if panel is None else "", prec, _fmt_fixed("threads", th))
            dash = DASHES[settings.index((str(prec), str(th))) % len(DASHES)]
            ax.errorbar(n, thr, yerr=[thr - lo, hi - thr], marker="o", ms=4, capsize=3,
                        color=charts.colour(b), label=" ".join(str(x) for x in parts if x),
                        lw=1.2, ls=dash)  # fmt: skip
        ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_ylabel("samples/s (log)")
        if panel is not None:
            ax.set_title(str(panel), loc="left", fontsize=9)
    ax = axes[0][0]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    charts.plain_log(ax.xaxis, sorted(set(keyed["batch_size"].dropna().astype(int))))
    finite = [v for v in values if np.isfinite(v) and v > 0]
    charts.plain_log(ax.yaxis, span=(min(finite) / 1.1, max(finite) * 1.1) if finite else None)
    if finite:
        ax.set_ylim(min(finite) / 1.1, max(finite) * 1.1)
    axes[-1][0].set_xlabel("batch size (log)")
    fig.suptitle(f"{workload}: throughput against batch size ({run_id})", x=0.02, ha="left",
                 fontsize=11)  # fmt: skip
    cid = charts.safe_id("batch", workload, run_id)
    return charts.Chart(cid, f"{workload}: throughput against batch size", charts.to_svg(fig, cid))


DASHES = ("-", "--", ":", "-.")  # one line style per precision and thread setting


def speedup_chart(run_id: str, workload: str, rows: list[dict]) -> charts.Chart | None:
    """Speedup over the fewest threads per backend, with the ideal (linear) line."""
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(charts.WIDTH_IN, 3.4))
    frame = pd.DataFrame(rows)
    for (b, fixed), g in frame.groupby(["backend", "fixed"], sort=False):
        ax.plot(g["value"], g["speedup_value"], "o-", color=charts.colour(b.split()[0]), ms=4,
                label=f"{b} {fixed}".strip())  # fmt: skip
    n = np.array(sorted(set(frame["value"])), dtype=float)
    ax.plot(n, n / n[0], ls="--", color="#999999", lw=0.8, label="ideal")
    ax.set_xlabel("threads")
    ax.set_ylabel(f"speedup over {int(n[0])} thread{'s' if n[0] != 1 else ''}")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"{workload}: speedup against threads ({run_id})", loc="left", fontsize=11)
    cid = charts.safe_id("threads", workload, run_id)
    return charts.Chart(cid, f"{workload}: speedup against threads", charts.to_svg(fig, cid))


def _on(backend: str, machine: object) -> str:
    """``backend``, with its machine where the run spans several (groups never mix them)."""
    return f"{backend} on {machine}" if machine else str(backend)


def _scaled(r: Ratio, k: float) -> Ratio:
    """``r`` times a known constant ``k``; clear where the scaled interval excludes 1 (a step
    time ratio along an axis differs by design, so the medians' overlap rule does not apply)."""
    lo, hi = r.low * k, r.high * k
    clear = r.method != TOO_FEW_ROUNDS and excludes_one(lo, hi)
    return Ratio(r.ratio * k, lo, hi, clear, r.method, r.per_round)


def _gain_verdict(gain: Ratio, axis: str) -> str:
    if gain.method == TOO_FEW_ROUNDS:
        return TOO_FEW
    if not gain.clear:
        return NO_CLEAR
    what = "throughput" if axis == "batch_size" else "speedup"
    return f"{gain.ratio:.2f}x {what}"


def _fmt_fixed(axis: str, v: object) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    if axis == "batch_size":
        return f"batch {int(v)}"
    if axis == "threads":
        return f"{int(v)} threads"
    return str(v)


def _x(v: float) -> str:
    return f"{v:.2f}x"
