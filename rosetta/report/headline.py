"""The three headline tables in the original comparison's form: CNN training time, ResNet-50
time per 1000 images, GRU training time; one row per backend, one column per run (and device),
test accuracy beside training times, real/synthetic data and failed equivalence marked."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rosetta.report.fmt import DASH, fmt_pct, fmt_s, missing, source_mark
from rosetta.report.frame import HEADLINE_ORDER, Tables, backend_order
from rosetta.report.stats import passed


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


TITLES = {
    "cnn": "CNN (VGG-style, CIFAR-10): training time",
    "resnet50": "ResNet-50 feature extraction: average time per 1000 images",
    "gru": "GRU (IMDB): training time",
}


def column_keys(cells: pd.DataFrame) -> dict[int, str]:
    """Headline column of every cell (by index): its run, with the device in brackets. A run
    whose cells ran on several devices gets one column per device; a cell that did not run
    (no device recorded) joins its run's only device."""
    out = {}
    for run_id, group in cells.groupby("run_id", sort=False):
        devices = list(dict.fromkeys(d for d in group["device"] if not missing(d)))
        for i, c in group.iterrows():
            dev = c["device"] if len(devices) > 1 else (devices[0] if devices else "")
            out[i] = f"{run_id} ({dev or '?'})" if devices else str(run_id)
    return out


def headlines(t: Tables) -> list[Headline]:
    """The three headline tables (and one per further workload), in the original's form."""
    cells = t.cells
    if cells.empty:
        return []
    keys = column_keys(cells)
    cols = list(dict.fromkeys(keys.values()))
    present = list(dict.fromkeys(cells["workload"]))
    order = [w for w in HEADLINE_ORDER if w in present] + sorted(
        w for w in present if w not in HEADLINE_ORDER
    )
    out = []
    for w in order:
        rows_w = cells[cells["workload"] == w]
        task = next((x for x in rows_w["task"] if not missing(x)), None)
        train = task != "features"
        measure = "training time (s)" if train else "time per 1000 images (s)"
        rows = []
        for b in backend_order(list(rows_w["backend"])):
            by_col = {keys[i]: c for i, c in rows_w[rows_w["backend"] == b].iterrows()}
            rows.append((b, tuple(_head_cell(by_col.get(k), train) for k in cols)))
        title = TITLES.get(w, f"{w}: {measure}")
        out.append(Headline(w, title, measure, train, tuple(cols), tuple(rows)))
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
