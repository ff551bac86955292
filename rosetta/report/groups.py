"""Groups: one (run, workload, backend, point) over its rounds, the unit every verdict reads.

Groups never mix machines: when a run's ok cells ran on more than one machine (``rosetta bench
--executor ray``), its groups are also keyed by machine (hostname), so every estimate, ratio and
verdict is about one machine. A run on one machine has ``machine`` "" in every group.

A repetition is one more axis of a cell, not a second mechanism: records that differ only in
their round are repeated measurements of one group. A group's steady-state step time is the
cross-round estimate of :func:`rosetta.report.stats.estimate` over its timing rounds (over every
round where it has none: a run of training runs only, or made before timing rounds existed); its
end-to-end time, time per 1000 images and accuracy are the median over its ok training runs, its
cold start over every ok round; its gate passed only if every ok round passed. The *primary*
point of a (run, workload) is the one the headline tables show: fp32 at the profile's batch size
with the most threads, where the run has it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rosetta.report.order import row_key
from rosetta.report.rerun import Spread, run_spread
from rosetta.report.stats import ROUNDS, estimate, passed, rerun_interval

if TYPE_CHECKING:  # pragma: no cover
    from rosetta.report.frame import Tables

KEYS = ["run_id", "workload", "backend", "batch_size", "precision", "threads", "machine"]
MEDIAN_OVER_ROUNDS = ("end_to_end_s", "time_per_1000", "test_accuracy", "cold_start_s")
OVER_EVERY_ROUND = ("cold_start_s",)  # every process has one; the rest: the training runs
FIRST_OF = ("task", "device", "data_source", "profile", "point", "flops_per_sample")
COLUMNS = [
    *KEYS,
    "point",
    "primary",
    "status",
    "error",
    "equivalent",
    "task",
    "device",
    "data_source",
    "profile",
    "flops_per_sample",
    "rounds",
    "rounds_run",
    "cells",
    "steady_cells",
    "steady_median",
    "steady_low",
    "steady_high",
    "method",
    "round_medians",
    "rerun_low",
    "rerun_high",
    "spread",
    "throughput",
    "peak_rss_mb",
    *MEDIAN_OVER_ROUNDS,
]


def group_frame(t: Tables) -> pd.DataFrame:
    """One row per group, in the report's order (see the module docstring)."""
    cells = t.cells
    if cells.empty:
        return pd.DataFrame(columns=COLUMNS)
    keyed = cells.assign(**{k: cells[k].astype(object) for k in ("batch_size", "threads")})
    keyed["machine"] = group_machine(cells)
    spreads = {r.run_id: run_spread(r)[0] for r in t.runs.runs}
    out = []
    for _, g in keyed.groupby(KEYS, sort=False, dropna=False):
        out.append(_rerun(_group_row(t, g), spreads.get(str(g.iloc[0]["run_id"]))))
    rank = {r: i for i, r in enumerate(dict.fromkeys(cells["run_id"]))}
    out.sort(key=lambda row: row_key(rank, row))
    frame = pd.DataFrame(out, columns=COLUMNS)
    for k in ("batch_size", "threads"):  # None, never NaN: points are compared with ==
        frame[k] = frame[k].astype(object).where(frame[k].notna(), None)
    frame["primary"] = _primary(frame)
    return frame


def machines(cells: pd.DataFrame, run_id: str) -> list[str]:
    """The distinct machines (hostnames) the run's ok cells ran on, in first-seen order; "" for
    records that name none."""
    mine = cells[(cells["run_id"] == run_id) & (cells["status"] == "ok")]
    return list(dict.fromkeys(str(m) for m in mine["machine"]))


def multi_machine(cells: pd.DataFrame) -> set[str]:
    """The runs whose ok cells span more than one machine."""
    return {r for r in dict.fromkeys(cells["run_id"]) if len(machines(cells, r)) > 1}


def group_machine(cells: pd.DataFrame) -> pd.Series:
    """Each cell's machine as a group key: its hostname where its run spans several machines,
    else "" (so a one-machine run groups exactly as before)."""
    multi = multi_machine(cells)
    return pd.Series(
        [
            str(m) if r in multi else ""
            for r, m in zip(cells["run_id"], cells["machine"], strict=True)
        ],
        index=cells.index,
        dtype=object,
    )


def _group_row(t: Tables, g: pd.DataFrame) -> dict:
    first = g.iloc[0]
    row = {k: _none(first[k]) for k in KEYS}
    row.update({k: first[k] for k in FIRST_OF})
    ok = g[g["status"] == "ok"]
    row["rounds_run"] = len(g)
    row["cells"] = list(g.index)
    row["steady_cells"] = []  # the records its steady state and its ratios read
    if ok.empty:
        row.update(status=str(first["status"]), error=first["error"], equivalent=None, rounds=0)
        return row
    eq = [v for v in ok["equivalent"] if v is not None and not _nan(v)]
    row.update(
        status="ok",
        error="",
        equivalent=(all(passed(v) for v in eq) if eq else None),
        rounds=len(ok),
    )
    timed = steady_rounds(ok)
    row["steady_cells"] = list(timed.index)
    recorded = {
        int(c["round"]): (c["steady_median"], c["steady_low"], c["steady_high"])
        for _, c in timed.iterrows()
        if not _nan(c["steady_median"])
    }
    est = estimate(t.rounds(list(timed.index)), recorded)
    if est is not None:
        row.update(
            steady_median=est.median,
            steady_low=est.low,
            steady_high=est.high,
            method=est.method,
            round_medians=est.round_medians,
            spread=est.spread,
        )
        batch = row["batch_size"]
        row["throughput"] = batch / est.median if batch else _median(ok["throughput"])
    runs = ok[ok["kind"] != "timing"]  # what only a training run measures
    for col in MEDIAN_OVER_ROUNDS:
        row[col] = _median((ok if col in OVER_EVERY_ROUND else runs)[col])
    rss = [v for v in ok["peak_rss_mb"] if not _nan(v)]
    row["peak_rss_mb"] = max(rss) if rss else None
    return row


def _rerun(row: dict, spread: Spread | None) -> dict:
    """The group's interval for another run's median (:mod:`rosetta.report.rerun`): only with
    an interval across rounds and the machine's measured run-to-run spread; else NaN."""
    lo = hi = math.nan
    if spread is not None and row.get("method") == ROUNDS:
        lo, hi = rerun_interval(row["round_medians"], None, spread.sd_log)
    return {**row, "rerun_low": lo, "rerun_high": hi}


def steady_rounds(ok: pd.DataFrame) -> pd.DataFrame:
    """The ok records of one group whose steady state the estimate reads: its timing rounds
    where it has any (one per process, all alike), else every record (a run without timing
    rounds, or made before they existed, whose rounds each ran in full)."""
    timing = ok[ok["kind"] == "timing"]
    return timing if len(timing) else ok


def _primary(frame: pd.DataFrame) -> list[bool]:
    """Per (run, workload), the point the headline shows: fp32, the profile's batch size, the
    most threads (each preferred in that order, where the run has it). A backend with no group
    at that point (a cell that failed before its point was known) shows its own best point."""
    scored = []
    for _, r in frame.iterrows():
        want = r.get("profile_batch")  # the spec profile's batch, as the record states it
        threads = r["threads"] if isinstance(r["threads"], int | float) else -math.inf
        threads = -math.inf if math.isnan(threads) else threads
        score = (r["precision"] != "fp32", r["batch_size"] != want, -threads, r["status"] != "ok")
        point = (r["batch_size"], r["precision"], r["threads"])
        scored.append(((r["run_id"], r["workload"]), r["backend"], point, score))
    best: dict[tuple, tuple] = {}
    for key, _, point, score in scored:
        if key not in best or score < best[key][0]:
            best[key] = (score, point)
    has = {(key, b) for key, b, point, _ in scored if point == best[key][1]}
    own: dict[tuple, tuple] = {}
    for key, b, point, score in scored:
        if (key, b) not in has and ((key, b) not in own or score < own[(key, b)][0]):
            own[(key, b)] = (score, point)
    return [
        point == best[key][1] or ((key, b) in own and point == own[(key, b)][1])
        for key, b, point, _ in scored
    ]


def primary(t: Tables) -> pd.DataFrame:
    """The groups at their (run, workload)'s primary point."""
    g = t.groups
    return g[g["primary"].astype(bool)]


def _median(s: pd.Series) -> float | None:
    v = [float(x) for x in s if not _nan(x)]
    return float(np.median(v)) if v else None


def _nan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _none(v: object) -> object:
    return None if _nan(v) else v
