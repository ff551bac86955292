"""The report's sections as plain values: every number already formatted, ready for the template.

Each function reads the frames of :mod:`rosetta.report.frame` and returns frozen dataclasses or
lists of dicts; the Jinja2 template only lays them out. Tests assert on these values and on the
HTML they become. A missing value is always shown as ``-``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rosetta.report.frame import CHECKS, HEADLINE_ORDER, Tables, backend_order, notebook_exists
from rosetta.report.stats import NO_CLEAR, compare_runs, passed, ratios_to_fastest

DASH = "-"
REAL_SOURCES = ("official", "user-provided")


# -- formatting ------------------------------------------------------------------------------
def missing(v: object) -> bool:
    """None, NaN or an empty string."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or v == ""


def _adaptive(v: float, digits: tuple[int, int, int, int]) -> str:
    """Fixed-point with fewer decimals as the number grows (>= 100, >= 10, >= 1, below)."""
    for limit, d in zip((100, 10, 1), digits, strict=False):
        if abs(v) >= limit:
            return f"{v:.{d}f}"
    return f"{v:.{digits[3]}f}"


def fmt_s(v: object) -> str:
    """Seconds for a table: 123.4 / 12.34 / 1.234 / 0.1234."""
    return DASH if missing(v) else _adaptive(float(v), (1, 2, 3, 4))


def fmt_ms(v: object) -> str:
    """A step time given in seconds, shown in milliseconds: 6068 / 452 / 79.4 / 1.23 / 0.123."""
    return DASH if missing(v) else _adaptive(float(v) * 1e3, (0, 1, 2, 3))


def fmt_pct(v: object, digits: int = 1) -> str:
    """A fraction as a percentage."""
    return DASH if missing(v) else f"{float(v) * 100:.{digits}f}%"


def fmt_num(v: object, spec: str = ".3g") -> str:
    """Any number with a format spec; ``inf`` (a non-finite gate error) shown as such."""
    if missing(v):
        return DASH
    return "inf" if math.isinf(float(v)) else format(float(v), spec)


def fmt_interval(v: object, lo: object, hi: object, f=fmt_ms) -> str:
    """``v [lo, hi]`` (``v`` alone where the interval is unknown)."""
    if missing(v):
        return DASH
    if missing(lo) or missing(hi):
        return f(v)
    return f"{f(v)} [{f(lo)}, {f(hi)}]"


def source_mark(source: object) -> str:
    """'real' for the official or a user's own data, 'synthetic'/'generated' as recorded."""
    if missing(source):
        return ""
    return "real" if source in REAL_SOURCES else str(source)


# -- headline tables -------------------------------------------------------------------------
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


# -- per-workload timing tables ----------------------------------------------------------------
def ratio_rows(t: Tables) -> list[dict]:
    """Ratio to the fastest backend per run and workload, with intervals and verdicts."""
    r = ratios_to_fastest(t.cells, t.steps)
    cells = t.cells.set_index(["run_id", "workload", "backend"])
    runs = {rid: i for i, rid in enumerate(dict.fromkeys(t.cells["run_id"]))}
    rank = {w: i for i, w in enumerate(HEADLINE_ORDER)}
    r = r.iloc[
        sorted(
            range(len(r)),
            key=lambda i: (runs[r.iloc[i]["run_id"]], rank.get(r.iloc[i]["workload"], 99), i),
        )
    ]
    out = []
    for _, x in r.iterrows():
        c = cells.loc[(x["run_id"], x["workload"], x["backend"])]
        out.append(
            {
                "run_id": x["run_id"],
                "workload": x["workload"],
                "backend": x["backend"],
                "step_ms": fmt_interval(c["steady_median"], c["steady_low"], c["steady_high"]),
                "ratio": fmt_interval(x["ratio"], x["low"], x["high"], lambda v: f"{v:.2f}"),
                "verdict": x["verdict"],
                "fastest": x["backend"] == x["fastest"],
                "clear": x["verdict"] != NO_CLEAR and x["backend"] != x["fastest"],
                "equivalent": passed(x["equivalent"]),
            }
        )
    return out


def cold_rows(t: Tables) -> list[dict]:
    """Cold start (import, build, first step) beside the steady-state step and end to end."""
    ok = t.cells[t.cells["status"] == "ok"]
    return [
        {
            "run_id": c["run_id"],
            "workload": c["workload"],
            "backend": c["backend"],
            "import": fmt_s(c["import_s"]),
            "build": fmt_s(c["build_s"]),
            "first": fmt_s(c["first_step_s"]),
            "cold": fmt_s(c["cold_start_s"]),
            "steady": fmt_interval(c["steady_median"], c["steady_low"], c["steady_high"]),
            "e2e": fmt_s(c["end_to_end_s"]),
            "equivalent": passed(c["equivalent"]),
        }
        for _, c in _sorted(ok).iterrows()
    ]


def efficiency_rows(t: Tables) -> list[dict]:
    """Samples/s, achieved GFLOP/s (spec FLOPs; training = 3x forward) and share of the peak."""
    ok = t.cells[t.cells["status"] == "ok"]
    return [
        {
            "run_id": c["run_id"],
            "workload": c["workload"],
            "backend": c["backend"],
            "throughput": fmt_num(c["throughput"], ".4g"),
            "flops": fmt_num(
                None if missing(c["flops_per_sample"]) else c["flops_per_sample"] / 1e9, ".3g"
            ),
            "factor": "3 (fwd + bwd)" if c["task"] == "train" else "1 (fwd)",
            "gflops": fmt_num(c["gflops"], ".3g"),
            "peak": fmt_pct(c["peak_fraction"]),
            "equivalent": passed(c["equivalent"]),
        }
        for _, c in _sorted(ok).iterrows()
    ]


def equivalence_rows(t: Tables) -> list[dict]:
    """Gate verdict and the largest error relative to its bound, per check, for every cell."""
    out = []
    ran = t.cells[(t.cells["status"] == "ok") | t.cells["equivalent"].notna()]
    for _, c in _sorted(ran).iterrows():
        if missing(c["equivalent"]):
            gate = DASH if c["status"] != "ok" else "not recorded"
        else:
            gate = "pass" if passed(c["equivalent"]) else "NOT EQUIVALENT"
        viol = {k: c[f"violation_{k}"] for k in CHECKS}
        out.append(
            {
                "run_id": c["run_id"],
                "workload": c["workload"],
                "backend": c["backend"],
                "status": c["status"],
                "gate": gate,
                "failed": gate == "NOT EQUIVALENT",
                "violations": {k: fmt_num(v) for k, v in viol.items()},
                "over": {k: (not missing(v) and float(v) > 1.0) for k, v in viol.items()},
                "detail": c["divergence"] or c["gate_note"] or DASH,
            }
        )
    return out


def problem_rows(t: Tables) -> list[dict]:
    """Every cell that did not finish (failed, timeout, killed, skipped, interrupted)."""
    bad = t.cells[t.cells["status"] != "ok"]
    return [
        {
            "run_id": c["run_id"],
            "workload": c["workload"],
            "backend": c["backend"],
            "status": c["status"],
            "reason": c["error"] or DASH,
        }
        for _, c in _sorted(bad).iterrows()
    ]


def condition_rows(t: Tables) -> list[dict]:
    """Per cell: load average before/after, peak memory, wall time and the runner's flags."""
    return [
        {
            "run_id": c["run_id"],
            "workload": c["workload"],
            "backend": c["backend"],
            "load_before": c["load_before"] or DASH,
            "load_after": c["load_after"] or DASH,
            "rss": fmt_num(c["peak_rss_mb"], ".0f"),
            "device_mem": fmt_num(c["peak_device_mb"], ".0f"),
            "wall": fmt_s(c["wall_s"]),
            "flags": c["flags"] or DASH,
        }
        for _, c in _sorted(t.cells[t.cells["status"] == "ok"]).iterrows()
    ]


# -- manifests, environment, notebooks ----------------------------------------------------------
def manifests(t: Tables) -> list[dict]:
    """Per run and backend: the fast-path manifest (key x workload) and framework versions."""
    out = []
    for run in t.runs.runs:
        recs = [r for r in run.records if isinstance(r.get("manifest"), dict)]
        for b in backend_order([str(r["backend"]) for r in recs]):
            rank = {w: i for i, w in enumerate(HEADLINE_ORDER)}
            mine = sorted(
                (r for r in recs if r["backend"] == b),
                key=lambda r: (rank.get(r["workload"], 99), str(r["workload"])),
            )
            workloads = [str(r["workload"]) for r in mine]
            paths = [r["manifest"].get("fast_path") or {} for r in mine]
            keys = list(dict.fromkeys(k for p in paths if isinstance(p, dict) for k in p))
            keys = [k for k in keys if k != "backend"]
            rows = [
                (k, [_plain(p.get(k)) if isinstance(p, dict) else DASH for p in paths])
                for k in keys
            ]
            versions = {}
            for r in mine:
                v = r["manifest"].get("backend_versions")
                if isinstance(v, dict):
                    versions.update({str(k): str(x) for k, x in v.items()})
            out.append(
                {
                    "run_id": run.run_id,
                    "backend": b,
                    "workloads": workloads,
                    "rows": rows,
                    "versions": ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or DASH,
                }
            )
    return out


ENV_KEYS = (
    "os",
    "machine",
    "cpu",
    "cpu_count",
    "python",
    "numpy",
    "blas",
    "thread_env",
    "git_revision",
    "load_avg",
    "gpu",
)


def environments(t: Tables) -> dict:
    """The runs' settings and machines side by side: {"runs": [ids], "rows": [(key, [value per
    run], differs)]}; ``differs`` marks what changed between runs (machine, versions, ...)."""
    per_run = []
    for run in t.runs.runs:
        env = run.environment
        cfg = run.info.get("config") if isinstance(run.info.get("config"), dict) else {}
        vals = {"created": _plain(run.info.get("created"))}
        vals.update(
            {k: _plain(cfg.get(k)) for k in ("profile", "dtype", "device", "seed", "threads")}
        )
        vals["peak fp32 GFLOP/s (matmul probe)"] = fmt_num(run.peak_gflops, ".1f")
        vals.update({k: _plain(env.get(k)) for k in ENV_KEYS})
        sources = {
            str(r["manifest"].get("data_source"))
            for r in run.records
            if isinstance(r.get("manifest"), dict) and r["manifest"].get("data_source")
        }
        vals["data source"] = ", ".join(sorted(sources)) or DASH
        vals["records"] = str(run.path)
        per_run.append(vals)
    keys = list(dict.fromkeys(k for v in per_run for k in v))
    rows = []
    for k in keys:
        vals = [v.get(k, DASH) for v in per_run]
        if all(x == DASH for x in vals):
            continue
        rows.append((k, vals, len(set(vals)) > 1 and k not in ("created", "records")))
    return {"runs": [r.run_id for r in t.runs.runs], "rows": rows}


def notebook_rows(t: Tables, out_dir: Path) -> list[dict]:
    """Each cell's executed notebook: a link relative to the report, or why there is none."""
    out = []
    for _, c in _sorted(t.cells).iterrows():
        nb = c["notebook"]
        href, note = None, "no notebook recorded"
        if not missing(nb):
            if notebook_exists(nb):
                href = Path(os.path.relpath(nb, out_dir)).as_posix()
                note = Path(nb).name
            else:
                note = f"recorded but missing: {Path(nb).name}"
        out.append(
            {
                "run_id": c["run_id"],
                "workload": c["workload"],
                "backend": c["backend"],
                "status": c["status"],
                "href": href,
                "note": note,
            }
        )
    return out


# -- comparing runs -------------------------------------------------------------------------
def comparisons(t: Tables) -> list[dict]:
    """Every later run against the first: each cell's step-time ratio, changes outside the noise
    flagged."""
    ids = [r.run_id for r in t.runs.runs]
    out = []
    for other in ids[1:]:
        c = compare_runs(t.cells, t.steps, ids[0], other)
        rows = [
            {
                "workload": x["workload"],
                "backend": x["backend"],
                "base": fmt_ms(x["base_median"]),
                "other": fmt_ms(x["other_median"]),
                "ratio": fmt_interval(x["ratio"], x["low"], x["high"], lambda v: f"{v:.2f}"),
                "verdict": x["verdict"],
                "changed": bool(x["changed"]),
                "e2e": fmt_num(x["e2e_ratio"], ".2f"),
                "equivalent": passed(x["equivalent_base"]) and passed(x["equivalent_other"]),
            }
            for _, x in c.iterrows()
        ]
        rank = {w: i for i, w in enumerate(HEADLINE_ORDER)}
        order = {b: i for i, b in enumerate(backend_order([r["backend"] for r in rows]))}
        rows.sort(key=lambda r: (rank.get(r["workload"], 99), r["workload"], order[r["backend"]]))
        out.append(
            {
                "base": ids[0],
                "other": other,
                "rows": rows,
                "changed": sum(r["changed"] for r in rows),
            }
        )
    return out


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    order = {b: i for i, b in enumerate(backend_order(list(frame["backend"])))}
    wl = {w: i for i, w in enumerate(HEADLINE_ORDER)}
    key = frame.apply(
        lambda c: (c["run_id"], wl.get(c["workload"], 99), c["workload"], order[c["backend"]]),
        axis=1,
    )
    return frame.loc[sorted(frame.index, key=lambda i: key[i])]


def _plain(v: object) -> str:
    if missing(v):
        return DASH
    if isinstance(v, dict):
        return ", ".join(f"{k}={_plain(x)}" for k, x in v.items()) or DASH
    if isinstance(v, list | tuple):
        return ", ".join(_plain(x) for x in v) or DASH
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)
