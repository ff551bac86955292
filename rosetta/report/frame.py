"""Records -> pandas: one wide row per cell, one tidy row per cell and measure, raw samples kept.

``cells`` (one row per cell) is what the tables read; ``tidy`` (one row per cell and measure,
with the measure's 95% interval where it has one) is what ``rosetta report --export`` writes;
``steps`` (every raw steady-state step time) and ``losses`` (every per-step training loss) are
what the charts and the ratio intervals read. Fields a record lacks become NaN/None and are shown
as "-"; fields this module does not know are ignored.

Efficiency: achieved GFLOP/s = samples/s x the spec's forward FLOPs per sample (at the record's
``manifest.input_shape``) x 3 for training (forward + backward, the backward counted as twice
the forward), and its fraction of the machine's fp32 matmul peak recorded in ``run.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from rosetta.report.load import Run, Runs, _get

HEADLINE_ORDER = ("cnn", "resnet50", "gru")  # the original comparison's order of workloads
TRAIN_FLOP_FACTOR = 3  # training step = forward + backward, backward counted as 2x forward
CHECKS = ("forward", "loss", "grads", "params")
ID_COLUMNS = ["run_id", "backend", "workload", "profile", "status", "equivalent", "data_source"]

# The tidy frame's measures: (name, unit, column in ``cells``, interval columns or None).
MEASURES = (
    ("steady_step_s", "s", "steady_median", ("steady_low", "steady_high")),
    ("cold_start_s", "s", "cold_start_s", None),
    ("import_s", "s", "import_s", None),
    ("build_s", "s", "build_s", None),
    ("first_step_s", "s", "first_step_s", None),
    ("end_to_end_s", "s", "end_to_end_s", None),
    ("throughput", "samples/s", "throughput", None),
    ("gflops", "GFLOP/s", "gflops", None),
    ("peak_fraction", "1", "peak_fraction", None),
    ("test_accuracy", "1", "test_accuracy", None),
    ("time_per_1000_images_s", "s", "time_per_1000", None),
    ("peak_rss_mb", "MiB", "peak_rss_mb", None),
    ("peak_device_memory_mb", "MiB", "peak_device_mb", None),
    ("wall_s", "s", "wall_s", None),
    *((f"violation_{c}", "x bound", f"violation_{c}", None) for c in CHECKS),
)


@dataclass(frozen=True)
class Tables:
    """The frames the report is made of, plus what was read (for run-level facts)."""

    cells: pd.DataFrame  # one row per cell
    tidy: pd.DataFrame  # one row per cell and measure: value, low, high, unit
    steps: pd.DataFrame  # run_id, backend, workload, i, seconds: raw steady-state steps
    losses: pd.DataFrame  # run_id, backend, workload, step, loss: per-step training losses
    runs: Runs


def build_tables(runs: Runs) -> Tables:
    """Flatten every record of ``runs`` into the four frames."""
    rows, steps, losses = [], [], []
    for run in runs.runs:
        for rec in run.records:
            row = cell_row(run, rec)
            rows.append(row)
            key = (row["run_id"], row["backend"], row["workload"])
            for i, s in enumerate(_floats(_get(rec, "clocks", "steady_raw_s"))):
                steps.append((*key, i, s))
            for i, v in enumerate(_floats(_get(rec, "metrics", "losses"))):
                losses.append((*key, i + 1, v))
    rows.sort(key=_row_order(rows))
    cells = pd.DataFrame(rows, columns=list(_EMPTY_ROW))
    for col in TEXT_COLUMNS:  # text stays text: "" where a record has none, never NaN
        cells[col] = cells[col].astype(object).where(cells[col].notna(), "")
    key_cols = ["run_id", "backend", "workload"]
    return Tables(
        cells=cells,
        tidy=tidy_frame(cells),
        steps=pd.DataFrame(steps, columns=[*key_cols, "i", "seconds"]),
        losses=pd.DataFrame(losses, columns=[*key_cols, "step", "loss"]),
        runs=runs,
    )


TEXT_COLUMNS = (
    "error",
    "data_source",
    "device",
    "dtype",
    "divergence",
    "gate_note",
    "load_before",
    "load_after",
    "flags",
)
_EMPTY_ROW = dict.fromkeys(
    [
        *ID_COLUMNS,
        "error",
        "device",
        "dtype",
        "task",
        "batch_size",
        "notebook",
        "steady_median",
        "steady_low",
        "steady_high",
        "steady_n",
        "import_s",
        "build_s",
        "first_step_s",
        "cold_start_s",
        "end_to_end_s",
        "throughput",
        "flops_per_sample",
        "gflops",
        "peak_fraction",
        "test_accuracy",
        "test_samples",
        "time_per_1000",
        "peak_rss_mb",
        "peak_device_mb",
        "wall_s",
        *(f"violation_{c}" for c in CHECKS),
        "divergence",
        "gate_note",
        "load_before",
        "load_after",
        "flags",
    ]
)


def backend_order(names: list[str]) -> list[str]:
    """Registry order (the reference first), then any other backend alphabetically."""
    from rosetta import backends

    reg = backends.names()
    return sorted(set(names), key=lambda b: (reg.index(b) if b in reg else len(reg), b))


def _row_order(rows: list[dict]):
    """Sort key for cell rows: run (as given), workload (headline order), backend (registry)."""
    runs = {r: i for i, r in enumerate(dict.fromkeys(row["run_id"] for row in rows))}
    wl = {w: i for i, w in enumerate(HEADLINE_ORDER)}
    be = {b: i for i, b in enumerate(backend_order([row["backend"] for row in rows]))}
    return lambda row: (
        runs[row["run_id"]],
        wl.get(row["workload"], len(wl)),
        row["workload"],
        be[row["backend"]],
    )


def cell_row(run: Run, rec: dict) -> dict:
    """One cell's row: every number the tables need, None where the record lacks it."""
    row = dict(_EMPTY_ROW)
    man = rec.get("manifest") if isinstance(rec.get("manifest"), dict) else {}
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    workload, profile = str(rec["workload"]), str(rec.get("profile") or cfg.get("profile") or "")
    row.update(
        run_id=run.run_id,
        backend=str(rec["backend"]),
        workload=workload,
        profile=profile,
        status=str(rec["status"]),
        error=_text(rec.get("error")),
        data_source=_text(man.get("data_source")),
        device=_text(man.get("device") or cfg.get("device")),
        dtype=_text(man.get("precision") or cfg.get("dtype")),
        notebook=_notebook(run, rec),
        wall_s=_num(rec.get("wall_s")),
        peak_rss_mb=_num(rec.get("peak_rss_mb")),
        peak_device_mb=_num(rec.get("peak_device_memory_mb")),
        load_before=_load(_get(rec, "load", "before")),
        load_after=_load(_get(rec, "load", "after")),
        flags="; ".join(str(f) for f in rec.get("flags") or [] if f),
    )
    eq = rec.get("equivalence")
    if isinstance(eq, dict):
        row["equivalent"] = bool(eq["equivalent"]) if "equivalent" in eq else None
        row["divergence"] = _text(eq.get("divergence"))
        row["gate_note"] = _text(eq.get("note"))
        viol = eq.get("violations") if isinstance(eq.get("violations"), dict) else {}
        for c in CHECKS:
            if c in viol:
                # null = the check ran but was inf/nan: infinitely over its bound
                row[f"violation_{c}"] = math.inf if viol[c] is None else _num(viol[c])
    spec = _spec_facts(workload, profile, man.get("input_shape"))
    row["task"], row["batch_size"], row["flops_per_sample"] = spec
    clocks = rec.get("clocks") if isinstance(rec.get("clocks"), dict) else {}
    steady = clocks.get("steady") if isinstance(clocks.get("steady"), dict) else {}
    row.update(
        steady_median=_num(steady.get("median")),
        steady_low=_num(steady.get("ci95_low")),
        steady_high=_num(steady.get("ci95_high")),
        steady_n=_num(steady.get("n")),
        import_s=_num(clocks.get("import_s")),
        cold_start_s=_num(clocks.get("cold_start_s")),
        end_to_end_s=_num(clocks.get("end_to_end_s")),
    )
    ib = _num(clocks.get("import_build_s"))
    if ib is not None and row["import_s"] is not None:
        row["build_s"] = ib - row["import_s"]
    if ib is not None and row["cold_start_s"] is not None:
        row["first_step_s"] = row["cold_start_s"] - ib
    thr = _num(clocks.get("throughput_samples_per_s"))
    if thr is None and row["batch_size"] and row["steady_median"]:
        thr = row["batch_size"] / row["steady_median"]
    row["throughput"] = thr
    if thr is not None and row["flops_per_sample"]:
        factor = TRAIN_FLOP_FACTOR if row["task"] == "train" else 1
        row["gflops"] = thr * row["flops_per_sample"] * factor / 1e9
        if run.peak_gflops:
            row["peak_fraction"] = row["gflops"] / run.peak_gflops
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    row["test_accuracy"] = _num(metrics.get("test_accuracy"))
    row["test_samples"] = _num(metrics.get("test_samples"))
    row["time_per_1000"] = _num(metrics.get("time_per_1000_images_s"))
    return row


def tidy_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per cell and measure (measures a cell lacks are left out; a cell that did not run
    keeps one ``status`` row carrying its reason, so an export still lists it)."""
    out = []
    for _, c in cells.iterrows():
        ids = {k: c[k] for k in ID_COLUMNS}
        if c["status"] != "ok":
            out.append({**ids, "measure": "status", "value": None, "unit": "", "note": c["error"]})
        for name, unit, col, interval in MEASURES:
            v = c[col]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            lo, hi = (c[interval[0]], c[interval[1]]) if interval else (None, None)
            out.append(
                {
                    **ids,
                    "measure": name,
                    "value": v,
                    "low": lo,
                    "high": hi,
                    "unit": unit,
                    "note": "",
                }
            )
    cols = [*ID_COLUMNS, "measure", "value", "low", "high", "unit", "note"]
    frame = pd.DataFrame(out, columns=cols)
    for col in ("value", "low", "high"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


@lru_cache(maxsize=64)
def _spec_facts_cached(workload: str, profile: str, shape: tuple | None) -> tuple:
    from rosetta.errors import RosettaError
    from rosetta.spec import get_workload

    try:
        w = get_workload(workload)
    except RosettaError:
        return None, None, None
    try:
        batch = w.profile(profile).batch_size
    except KeyError:
        batch = None
    try:
        flops = w.flops_per_sample(shape) if shape else w.flops_per_sample()
    except Exception:  # noqa: BLE001 - a shape the spec cannot take: no FLOP figure, no crash
        flops = None
    return w.task, batch, flops


def _spec_facts(workload: str, profile: str, shape: object) -> tuple:
    """(task, batch size, forward FLOPs per sample) from the spec, None where unknown."""
    ok = isinstance(shape, list | tuple) and all(isinstance(d, int) for d in shape)
    return _spec_facts_cached(workload, profile, tuple(shape) if ok else None)


def _notebook(run: Run, rec: dict) -> str | None:
    """Absolute path of the cell's executed notebook if the record names one."""
    name = rec.get("notebook")
    if not isinstance(name, str) or not name:
        return None
    folder = run.path.resolve()
    path = (folder / name).resolve()
    return str(path) if path.is_relative_to(folder) else None  # never a link out of the run


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _floats(v: object) -> list[float]:
    if not isinstance(v, list):
        return []
    return [float(x) for x in v if isinstance(x, int | float) and not isinstance(x, bool)]


def _text(v: object) -> str:
    return "" if v is None else str(v).splitlines()[0] if str(v).strip() else ""


def _load(v: object) -> str:
    vals = _floats(v)
    return " / ".join(f"{x:.2f}" for x in vals) if vals else ""


def notebook_exists(path: str | None) -> bool:
    """Whether a cell's notebook file is there to link to."""
    return bool(path) and Path(path).is_file()
