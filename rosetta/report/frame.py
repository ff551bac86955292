"""Records -> pandas: one wide row per cell, one tidy row per cell and measure, raw samples kept.

``cells`` (one row per cell) is what the tables read; ``tidy`` (one row per cell and measure,
with the measure's 95% interval where it has one) is what ``rosetta report --export`` writes;
the raw series (every steady-state step time, ``samples``; every per-step training loss,
``loss_series``) are kept per cell as arrays, which the charts and the ratio intervals read by
cell; ``steps`` and ``losses`` lay them out as frames only when asked. Fields a record lacks
become NaN/None and are shown as "-"; fields this module does not know are ignored.

Efficiency: achieved GFLOP/s = samples/s x the spec's forward FLOPs per sample (at the record's
``manifest.input_shape``) x 3 for training (forward + backward, the backward counted as twice
the forward), and its fraction of the machine's fp32 matmul peak recorded in ``run.json``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rosetta.report.ceilings import achieved_gflops, standing
from rosetta.report.groups import group_frame
from rosetta.report.load import Run, Runs, _get
from rosetta.report.order import backend_order, row_key

__all__ = ["Tables", "backend_order", "build_tables", "cell_row", "tidy_frame"]
CHECKS = ("forward", "loss", "grads", "params", "float64")  # float64: the worst of the float64 gate
ID_COLUMNS = ["run_id", "backend", "workload", "batch_size", "precision", "threads", "round",
              "profile", "status", "equivalent", "data_source"]  # fmt: skip

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
    """The frames the report is made of, plus what was read (for run-level facts).

    A *cell* is one record: one (run, workload, backend, point, round). A *group* is the same
    (run, workload, backend, point) over its rounds (repeated measurements of one thing): the
    tables and verdicts read groups, the per-record sections read cells.

    Raw series are kept per cell as NumPy arrays (``samples``: steady-state step times;
    ``loss_series``: each group's first round's losses), not as one long frame: a run of
    10,000 records holds hundreds of thousands of samples, and every lookup is by cell.
    ``steps`` and ``losses`` build those frames on demand (the export, the tests)."""

    cells: pd.DataFrame  # one row per record (cell and round)
    tidy: pd.DataFrame  # one row per cell and measure: value, low, high, unit
    runs: Runs
    samples: dict = dataclasses.field(default_factory=dict, repr=False)  # cell -> step times
    loss_series: dict = dataclasses.field(default_factory=dict, repr=False)  # cell -> losses
    groups: pd.DataFrame | None = None  # one row per (run, workload, backend, point)
    cache: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def rounds(self, cell_ids: list[int]) -> dict[int, np.ndarray]:
        """Raw steady-state steps of the given cells (rows of ``cells``), by round."""
        by: dict[int, list[np.ndarray]] = {}
        for c in cell_ids:
            s = self.samples.get(c)
            if s is not None:
                by.setdefault(int(self.cells.at[c, "round"]), []).append(s)
        return {r: np.concatenate(v) if len(v) > 1 else v[0] for r, v in sorted(by.items())}

    @property
    def steps(self) -> pd.DataFrame:
        """run_id, backend, workload, cell, round, i, seconds: every raw steady step (built on
        demand: the page itself reads ``samples`` by cell)."""
        return self._series_frame(self.samples, "round", "i", "seconds", 0)

    @property
    def losses(self) -> pd.DataFrame:
        """run_id, backend, workload, cell, step, loss: each group's first round's losses."""
        return self.losses_of(list(self.loss_series))

    def losses_of(self, cell_ids) -> pd.DataFrame:
        """The losses frame of the given cells only (what a loss chart draws)."""
        chosen = {c: self.loss_series[c] for c in cell_ids if c in self.loss_series}
        return self._series_frame(chosen, None, "step", "loss", 1)

    def _series_frame(self, series: dict, rnd, pos: str, value: str, first: int) -> pd.DataFrame:
        key_cols = ["run_id", "backend", "workload"]
        cols = [*key_cols, "cell", *([rnd] if rnd else []), pos, value]
        if not series:
            return pd.DataFrame(columns=cols)
        ids = list(series)
        lens = np.array([len(series[c]) for c in ids])
        sel = self.cells.loc[ids]
        frame = {k: np.repeat(sel[k].to_numpy(dtype=object), lens) for k in key_cols}
        frame["cell"] = np.repeat(np.array(ids, dtype=np.int64), lens)
        if rnd:
            frame[rnd] = np.repeat(sel["round"].to_numpy(dtype=np.int64), lens)
        frame[pos] = np.concatenate([np.arange(first, first + n) for n in lens])
        frame[value] = np.concatenate([series[c] for c in ids]).astype(float)
        return pd.DataFrame(frame, columns=cols)


def build_tables(runs: Runs, progress=None) -> Tables:
    """Flatten every record of ``runs`` into the frames; ``progress(done, total)`` is called
    every few thousand records (``rosetta report`` prints it on large runs)."""
    rows, steps_of, losses_of = [], [], []
    total = sum(len(run.records) for run in runs.runs)
    for run in runs.runs:
        for rec in run.records:
            if forward_mode(rec):  # a serving engine's forward pass: the serving view's only
                continue
            row = cell_row(run, rec)
            rows.append(row)
            steps_of.append(_array(_get(rec, "clocks", "steady_raw_s")))
            losses_of.append(_array(_get(rec, "metrics", "losses")))
            if progress is not None and len(rows) % PROGRESS_EVERY == 0:
                progress(len(rows), total)
    rank = {r: i for i, r in enumerate(dict.fromkeys(row["run_id"] for row in rows))}
    order = sorted(range(len(rows)), key=lambda i: row_key(rank, rows[i]))
    rows = [rows[i] for i in order]
    _tags(rows)
    first_round: dict[tuple, int] = {}  # one loss curve per group: its first round's
    for row in rows:
        k = tuple(row[c] for c in GROUP_KEYS)
        first_round[k] = min(first_round.get(k, row["round"]), row["round"])
    samples, loss_series = {}, {}
    for n, i in enumerate(order):
        if steps_of[i].size:
            samples[n] = steps_of[i]
        if (
            losses_of[i].size
            and rows[n]["round"] == first_round[tuple(rows[n][c] for c in GROUP_KEYS)]
        ):
            loss_series[n] = losses_of[i]
    cells = pd.DataFrame(rows, columns=list(_EMPTY_ROW))
    for col in TEXT_COLUMNS:  # text stays text: "" where a record has none, never NaN
        cells[col] = cells[col].astype(object).where(cells[col].notna(), "")
    t = Tables(
        cells=cells, tidy=tidy_frame(cells), runs=runs, samples=samples, loss_series=loss_series
    )
    return dataclasses.replace(t, groups=group_frame(t))


def forward_mode(rec: dict) -> bool:
    """A training workload's cell that ran its forward pass only (a forward-only backend, a
    serving engine: ``metrics.mode`` ``forward``): no training time or accuracy to compare, so
    it stays out of the training tables and appears in the serving view
    (``rosetta.report.serving``)."""
    metrics = rec.get("metrics")
    return isinstance(metrics, dict) and metrics.get("mode") == "forward"


PROGRESS_EVERY = 2000  # records between two progress lines of a large report
GROUP_KEYS = ["run_id", "workload", "backend", "batch_size", "precision", "threads", "machine"]


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
    "machine",
)
_EMPTY_ROW = dict.fromkeys(
    [
        *ID_COLUMNS,
        "error",
        "device",
        "dtype",
        "task",
        "batch_size",
        "precision",
        "threads",
        "round",
        "kind",
        "point",
        "lane",
        "options_text",
        "tag",
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
        "flag_list",
        "profile_batch",
        "intensity",
        "gflops",
        "peak_fraction",
        "standing",
        "test_accuracy",
        "test_samples",
        "time_per_1000",
        "peak_rss_mb",
        "peak_device_mb",
        "wall_s",
        *(f"violation_{c}" for c in CHECKS),
        "latency_p50",
        "latency_p90",
        "latency_p99",
        "latency_n",
        "divergence",
        "gate_note",
        "drift",
        "load_before",
        "load_after",
        "flags",
        "machine",
        "node",
    ]
)


def cell_row(run: Run, rec: dict) -> dict:
    """One cell's row: every number the tables need, None where the record lacks it."""
    row = dict(_EMPTY_ROW)
    man = rec.get("manifest") if isinstance(rec.get("manifest"), dict) else {}
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    rt = man.get("runtime") if isinstance(man.get("runtime"), dict) else {}
    workload, profile = str(rec["workload"]), str(rec.get("profile") or cfg.get("profile") or "")
    row.update(
        run_id=run.run_id,
        backend=str(rec["backend"]),
        workload=workload,
        profile=profile,
        status=str(rec["status"]),
        error=_text(rec.get("error")),
        data_source=_text(man.get("data_source")),
        # the runtime in effect (older records also copied it to the manifest's top level)
        device=_text(rt.get("device") or man.get("device") or cfg.get("device")),
        dtype=_text(rt.get("dtype") or man.get("dtype") or cfg.get("dtype")),
        notebook=_notebook(run, rec),
        wall_s=_num(rec.get("wall_s")),
        peak_rss_mb=_num(rec.get("peak_rss_mb")),
        peak_device_mb=_num(rec.get("peak_device_memory_mb")),
        load_before=_load(_get(rec, "load", "before")),
        load_after=_load(_get(rec, "load", "after")),
        flags="; ".join(str(f) for f in rec.get("flags") or [] if f),
        # (code, text) per flag: records state the code beside the text (records.FLAG_CODES)
        flag_list=tuple(
            (str(code), str(text))
            for code, text in zip(rec.get("flag_codes") or [], rec.get("flags") or [], strict=False)
            if text
        ),
    )
    chosen = rt.get("options") if isinstance(rt.get("options"), dict) else {}
    row["options_text"] = ", ".join(f"{k}={v}" for k, v in sorted(chosen.items()))
    row["node"] = node_of(man)
    row["machine"] = _text(row["node"].get("hostname"))
    eq = rec.get("equivalence")
    if isinstance(eq, dict):
        row["equivalent"] = bool(eq["equivalent"]) if "equivalent" in eq else None
        row["divergence"] = _text(eq.get("divergence"))
        row["gate_note"] = _text(eq.get("note"))
        viol = eq.get("violations") if isinstance(eq.get("violations"), dict) else {}
        f64 = [viol[k] for k in viol if str(k).endswith("(float64)")]  # the float64 gate
        if f64:
            viol = {**viol, "float64": None if None in f64 else max(_num(v) or 0.0 for v in f64)}
        for c in CHECKS:
            if c in viol:
                # null = the check ran but was inf/nan: infinitely over its bound
                row[f"violation_{c}"] = math.inf if viol[c] is None else _num(viol[c])
        drift = eq.get("drift") if isinstance(eq.get("drift"), list) else []
        row["drift"] = tuple(
            (str(d["op"]), math.inf if d.get("violation") is None else _num(d["violation"]))
            for d in drift
            if isinstance(d, dict) and "op" in d
        )
    spec = rec.get("spec") if isinstance(rec.get("spec"), dict) else {}  # as it ran (schema 3)
    row["task"] = _text(spec.get("task")) or None
    row["batch_size"] = _int(spec.get("profile_batch"))
    row["flops_per_sample"] = _num(spec.get("flops_per_sample"))
    row["profile_batch"] = row["batch_size"]
    flops, moved = _num(spec.get("flops_per_step")), _num(spec.get("bytes_per_step"))
    row["intensity"] = flops / moved if flops and moved else None
    row.update(point_of(rec, row["batch_size"]))
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
    row["build_s"] = _num(clocks.get("build_s"))  # the cold start's parts, as measured
    row["first_step_s"] = _num(clocks.get("first_step_s"))
    thr = _num(clocks.get("throughput_samples_per_s"))
    if thr is None and row["batch_size"] and row["steady_median"]:
        thr = row["batch_size"] / row["steady_median"]
    row["throughput"] = thr
    row["gflops"] = achieved_gflops(row["task"], thr, row["flops_per_sample"])
    if row["gflops"] is not None:  # against the run's measured ceiling (rosetta.report.ceilings)
        row["standing"] = standing(
            run.ceilings,
            gflops=row["gflops"],
            workload=workload,
            profile=profile,
            backend=row["backend"],
            precision=row["precision"],
            batch=row["batch_size"],
            device=row["device"],
            threads=row["threads"],
            intensity=row["intensity"],
        )
        row["peak_fraction"] = row["standing"].fraction
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    row["test_accuracy"] = _num(metrics.get("test_accuracy"))
    row["test_samples"] = _num(metrics.get("test_samples"))
    row["time_per_1000"] = _num(metrics.get("time_per_1000_images_s"))
    lat = metrics.get("latency") if isinstance(metrics.get("latency"), dict) else {}
    row.update({f"latency_{p}": _num(lat.get(p)) for p in ("p50", "p90", "p99")})
    raw = _floats(lat.get("raw_s") or lat.get("raw"))
    row["latency_n"] = float(len(raw)) if raw else None
    return row


def node_of(manifest: dict) -> dict:
    """The machine a record ran on (``manifest.node``: hostname, CPU, cores, GPU, load); {} for
    records written before every record named its machine (shown as "this machine")."""
    node = manifest.get("node")
    return dict(node) if isinstance(node, dict) else {}


def point_of(rec: dict, profile_batch: int | None) -> dict:
    """The record's point (batch size, precision, threads), round and kind (``training`` or
    ``timing``), from ``point`` (contract:
    the effective values), else ``config``, else the runtime in effect; ``point`` is a label.
    Threads: the count in effect (``manifest.runtime.threads``, the one field an ok record
    stores it in), else an older record's ``point.threads``, else the request."""
    pt = rec.get("point") if isinstance(rec.get("point"), dict) else {}
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    rt = _get(rec, "manifest", "runtime")
    rt = rt if isinstance(rt, dict) else {}
    batch = _int(pt.get("batch_size")) or _int(cfg.get("batch_size")) or profile_batch
    precision = pt.get("precision") or cfg.get("precision") or rt.get("precision") or "fp32"
    threads = _int(rt.get("threads")) or _int(pt.get("threads")) or _int(cfg.get("threads"))
    rnd = _int(pt.get("round"))
    rnd = rnd if rnd is not None else (_int(cfg.get("round")) or 0)
    # the training run or a timing round; a record made before timing rounds ran in full
    kind = "timing" if (pt.get("kind") or cfg.get("kind")) == "timing" else "training"
    lane = str(pt.get("lane") or cfg.get("lane") or "fast")  # a record before lanes: the fast path
    label = ", ".join(
        x
        for x in (
            f"batch {batch}" if batch else "",
            str(precision),
            f"{threads} threads" if threads else "",
            f"{lane} lane" if lane != "fast" else "",
        )
        if x
    )
    return {
        "batch_size": batch,
        "precision": str(precision),
        "threads": threads,
        "round": rnd,
        "kind": kind,
        "lane": lane,
        "point": label,
    }


def _tags(rows: list[dict]) -> None:
    """Set each row's ``tag``: the parts of its point that vary within its run and workload,
    and its round where there are several (empty for one point and one round)."""
    for key in dict.fromkeys((r["run_id"], r["workload"]) for r in rows):
        mine = [r for r in rows if (r["run_id"], r["workload"]) == key]
        varies = {
            k: len({r[k] for r in mine}) > 1
            for k in ("batch_size", "precision", "threads", "lane")
        }
        rounds = len({r["round"] for r in mine}) > 1
        for r in mine:
            parts = [
                f"b{r['batch_size']}" if varies["batch_size"] else "",
                str(r["precision"]) if varies["precision"] else "",
                f"t{r['threads']}" if varies["threads"] else "",
                f"{r['lane']} lane" if varies["lane"] else "",
                f"round {r['round']}" if rounds else "",  # as in its file name (__r1)
            ]
            r["tag"] = " ".join(p for p in parts if p)


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


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
    if isinstance(v, np.ndarray):  # a series compacted while loading (rosetta.report.load)
        return [float(x) for x in v]
    if not isinstance(v, list):
        return []
    return [float(x) for x in v if isinstance(x, int | float) and not isinstance(x, bool)]


def _array(v: object) -> np.ndarray:
    """A recorded series as a float array (its numbers only: null, not finite, is left out)."""
    if isinstance(v, np.ndarray):
        return v.astype(float, copy=False)
    return np.asarray(_floats(v), dtype=float)


def _text(v: object) -> str:
    return "" if v is None else str(v).splitlines()[0] if str(v).strip() else ""


def _load(v: object) -> str:
    vals = _floats(v)
    return " / ".join(f"{x:.2f}" for x in vals) if vals else ""


def notebook_exists(path: str | None) -> bool:
    """Whether a cell's notebook file is there to link to."""
    return bool(path) and Path(path).is_file()
