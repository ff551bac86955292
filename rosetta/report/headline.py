"""The headline tables in the original comparison's form (CNN training time, ResNet-50 time per
1000 images, GRU training time, and one per further workload, titled and ordered by the spec):
one row per backend, one column per run (and device), test accuracy beside training times,
real/synthetic data and failed equivalence marked. With several rounds a number is the median
over the rounds, and each table carries its stability: the rounds, the verdict with its paired
interval, and in how many rounds it held."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rosetta.report.fmt import DASH, fmt_pct, fmt_s, missing, source_mark
from rosetta.report.frame import Tables
from rosetta.report.groups import primary
from rosetta.report.order import backend_order, workload_order, workload_title
from rosetta.report.stats import TOO_FEW, TOO_FEW_ROUNDS, passed


@dataclass(frozen=True)
class HeadCell:
    """One backend in one run: the headline number, accuracy, data and gate marks, status."""

    value: str
    accuracy: str = ""
    source: str = ""
    equivalent: bool | None = None
    status: str = ""  # "" when ok; otherwise the status word
    note: str = ""


@dataclass(frozen=True)
class Headline:
    """One of the original comparison's tables: backends x (run, device)."""

    workload: str
    title: str
    measure: str
    has_accuracy: bool
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[HeadCell, ...]], ...]
    stability: tuple[str, ...] = ()  # per run: rounds, verdict [interval], held in k of R rounds


def column_keys(cells: pd.DataFrame) -> dict[int, str]:
    """Headline column of every cell (by index): its run, with the device in brackets. A run
    whose cells ran on several devices gets one column per device; a cell that did not run
    (no device recorded) joins its run's only device. Groups keyed by machine (a run spanning
    several) get one column per machine, named after it."""
    out = {}
    for run_id, group in cells.groupby("run_id", sort=False):
        devices = list(dict.fromkeys(d for d in group["device"] if not missing(d)))
        for i, c in group.iterrows():
            dev = c["device"] if len(devices) > 1 else (devices[0] if devices else "")
            out[i] = f"{run_id} ({dev or '?'})" if devices else str(run_id)
            machine = c.get("machine", "")
            out[i] += f" on {machine}" if machine else ""
    return out


def headlines(t: Tables) -> list[Headline]:
    """One headline table per workload, in the spec's order, at each run's primary point."""
    cells = primary(t)
    if cells.empty:
        return []
    keys = column_keys(cells)
    cols = list(dict.fromkeys(keys.values()))
    from rosetta.report.compare import ratios_to_fastest

    ratios = ratios_to_fastest(t, cells)
    out = []
    for w in workload_order(cells["workload"]):
        rows_w = cells[cells["workload"] == w]
        task = next((x for x in rows_w["task"] if not missing(x)), None)
        train = task != "features"
        measure = "training time (s)" if train else "time per 1000 images (s)"
        rows = []
        for b in backend_order(list(rows_w["backend"])):
            by_col = {keys[i]: c for i, c in rows_w[rows_w["backend"] == b].iterrows()}
            rows.append((b, tuple(_head_cell(by_col.get(k), train) for k in cols)))
        title = workload_title(w)
        title = title if title != w else f"{w}: {measure}"
        stab = tuple(stability_line(ratios[ratios["workload"] == w], rows_w))
        stab = (*stab, *apart_lines(ratios[ratios["workload"] == w], rows_w))
        out.append(Headline(w, title, measure, train, tuple(cols), tuple(rows), stab))
    return out


APART = "backends ran on different machines: no cross-framework verdict; see Machines"


def apart_lines(r, rows_w) -> list[str]:
    """Per run whose groups are keyed by machine: one line when its timed backends never share
    a machine, so no ratio between frameworks exists (:data:`APART`)."""
    out = []
    multi = rows_w["run_id"].nunique() > 1
    for run_id, g in r.groupby("run_id", sort=False):
        if not g["machine"].astype(bool).any() or g["backend"].nunique() < 2:
            continue
        if g.groupby("machine")["backend"].nunique().max() < 2:
            workload = str(g["workload"].iloc[0])
            out.append((f"{run_id}: " if multi else "") + f"{workload}: {APART}")
    return out


def stability_line(r, rows_w) -> list[str]:
    """Per run: 'run: 3 rounds; torch fastest, 1.21x [1.15, 1.30] ahead of jax, held in 3 of 3
    rounds' (the rounds held in beside a clear verdict only), or 'no clear difference', or
    'too few rounds for an interval'. Where a run's
    groups are keyed by machine, one line per machine: 'cnn on node-a: 3 rounds; ...'."""
    out = []
    multi = rows_w["run_id"].nunique() > 1
    for (run_id, machine), g in r.groupby(["run_id", "machine"], sort=False):
        if len(g) < 2:
            continue
        best, nxt = g.iloc[0], g.iloc[1]
        rounds = int(best["rounds"])
        head = (f"{run_id}: " if multi else "") + (
            f"{best['workload']} on {machine}: " if machine else ""
        )
        head += f"{rounds} round{'s' if rounds != 1 else ''}; "
        if nxt["clear"]:  # a clear verdict carries the rounds it held in
            what = (
                f"{best['backend']} fastest, {nxt['ratio']:.2f}x [{nxt['low']:.2f}, "
                f"{nxt['high']:.2f}] ahead of {nxt['backend']}"
            )
        elif nxt["method"] == TOO_FEW_ROUNDS:
            what = f"{best['backend']} and {nxt['backend']}: {TOO_FEW} (ratio {nxt['ratio']:.2f})"
        else:
            what = (
                f"{best['backend']} and {nxt['backend']}: no clear difference "
                f"(ratio {nxt['ratio']:.2f} [{nxt['low']:.2f}, {nxt['high']:.2f}])"
            )
        stab = nxt["stability"] if nxt["clear"] else ""
        out.append(f"{head}{what}" + (f", {stab}" if stab else ""))
    return out


def _head_cell(c: pd.Series | None, train: bool) -> HeadCell:
    if c is None:
        return HeadCell(DASH, DASH if train else "")
    if c["status"] != "ok":
        return HeadCell(DASH, DASH if train else "", status=c["status"], note=c["error"])
    value = fmt_s(c["end_to_end_s"] if train else c["time_per_1000"])
    acc = fmt_pct(c["test_accuracy"]) if train else ""
    eq = None if missing(c["equivalent"]) else passed(c["equivalent"])
    return HeadCell(value, acc, source_mark(c["data_source"]), eq)
