"""Ratios of step times with 95% intervals, and the rule that refuses to crown a winner on noise.

A ratio is ``median(a) / median(b)`` of two cells' steady-state step times, with a bootstrap
95% interval (percentile method, each side resampled independently: the method of
``benchmarks/common.py``). Where a record kept no raw steps the interval is bounded from the two
medians' own intervals (``low_a / high_b`` to ``high_a / low_b``), which is wider, never
narrower.

The verdict: two cells differ clearly only if the ratio's interval excludes 1 *and* their
medians' 95% intervals do not overlap. Otherwise the report says "no clear difference".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

NO_CLEAR = "no clear difference"
RESAMPLES = 2000


@dataclass(frozen=True)
class Ratio:
    """``a / b`` of median step times with its 95% interval and the verdict on it."""

    ratio: float
    low: float
    high: float
    clear: bool  # outside the noise: interval excludes 1 and the medians' intervals are apart
    method: str  # "bootstrap" | "from intervals"

    @property
    def verdict(self) -> str:
        """'x.xx times slower' / 'x.xx times faster' / 'no clear difference'."""
        if not self.clear:
            return NO_CLEAR
        if self.ratio >= 1:
            return f"{self.ratio:.2f}x slower"
        return f"{1 / self.ratio:.2f}x faster"


def bootstrap_ratio(
    a: np.ndarray, b: np.ndarray, *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """(median(a)/median(b), 2.5th, 97.5th percentile of the bootstrap ratios)."""
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, size=(resamples, a.size)), axis=1)
    mb = np.median(rng.choice(b, size=(resamples, b.size)), axis=1)
    lo, hi = np.percentile(ma / mb, [2.5, 97.5])
    return float(np.median(a) / np.median(b)), float(lo), float(hi)


@dataclass(frozen=True)
class Timing:
    """One cell's steady-state step time: median, its 95% interval, raw samples if kept."""

    median: float
    low: float
    high: float
    raw: np.ndarray

    @classmethod
    def of(cls, cell: pd.Series, steps: pd.DataFrame) -> Timing | None:
        """The timing of a ``cells`` row (None if it has no steady-state median)."""
        med = cell["steady_median"]
        if med is None or not np.isfinite(med) or med <= 0:
            return None
        lo, hi = cell["steady_low"], cell["steady_high"]
        lo = med if lo is None or not np.isfinite(lo) else lo
        hi = med if hi is None or not np.isfinite(hi) else hi
        sel = steps[
            (steps["run_id"] == cell["run_id"])
            & (steps["backend"] == cell["backend"])
            & (steps["workload"] == cell["workload"])
        ]
        return cls(float(med), float(lo), float(hi), sel["seconds"].to_numpy(dtype=float))


def ratio(a: Timing, b: Timing) -> Ratio:
    """``a / b`` with its interval and verdict (bootstrap where both kept raw steps)."""
    apart = a.low > b.high or b.low > a.high
    if a.raw.size >= 2 and b.raw.size >= 2:
        r, lo, hi = bootstrap_ratio(a.raw, b.raw)
        method = "bootstrap"
    else:
        r = a.median / b.median
        lo = a.low / b.high if b.high > 0 else 0.0
        hi = a.high / b.low if b.low > 0 else math.inf
        method = "from intervals"
    return Ratio(r, lo, hi, bool(apart and not (lo <= 1.0 <= hi)), method)


def ratios_to_fastest(cells: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per run and workload, every timed cell against the fastest one (by median step time).

    The fastest is chosen among the cells that passed the equivalence gate (among all timed
    cells only if none passed). Columns: run_id, workload, backend, fastest, ratio, low, high,
    verdict, equivalent; the fastest's verdict says whether any other is within the noise."""
    out = []
    for (run_id, workload), group in cells[cells["status"] == "ok"].groupby(
        ["run_id", "workload"], sort=False
    ):
        timed = [(c, t) for _, c in group.iterrows() if (t := Timing.of(c, steps)) is not None]
        if not timed:
            continue
        pool = [x for x in timed if passed(x[0]["equivalent"])] or timed
        best_cell, best = min(pool, key=lambda x: x[1].median)
        rows = []
        for c, t in timed:
            if c["backend"] == best_cell["backend"]:
                continue
            r = ratio(t, best)
            rows.append((c, r, r.verdict))
        ties = [
            c["backend"] + ("" if passed(c["equivalent"]) else " (not equivalent)")
            for c, r, _ in rows
            if not r.clear
        ]
        best_verdict = "fastest" + (f"; {NO_CLEAR} from {', '.join(ties)}" if ties else "")
        out.append(_fastest_row(run_id, workload, best_cell, best, best_verdict))
        for c, r, verdict in sorted(rows, key=lambda x: x[1].ratio):
            out.append(
                {
                    "run_id": run_id,
                    "workload": workload,
                    "backend": c["backend"],
                    "fastest": best_cell["backend"],
                    "ratio": r.ratio,
                    "low": r.low,
                    "high": r.high,
                    "verdict": verdict,
                    "equivalent": c["equivalent"],
                    "method": r.method,
                }
            )
    cols = [
        "run_id",
        "workload",
        "backend",
        "fastest",
        "ratio",
        "low",
        "high",
        "verdict",
        "equivalent",
        "method",
    ]
    return pd.DataFrame(out, columns=cols)


def _fastest_row(run_id: str, workload: str, cell: pd.Series, t: Timing, verdict: str) -> dict:
    return {
        "run_id": run_id,
        "workload": workload,
        "backend": cell["backend"],
        "fastest": cell["backend"],
        "ratio": 1.0,
        "low": 1.0,
        "high": 1.0,
        "verdict": verdict,
        "equivalent": cell["equivalent"],
        "method": "",
    }


def compare_runs(cells: pd.DataFrame, steps: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """Each cell timed in both runs: step time in ``other`` / in ``base`` with its interval.

    ``changed`` is True only outside the noise (the rule above). End-to-end times are one
    measurement per run, so their ratio is shown without an interval and never flagged."""
    ok = cells[cells["status"] == "ok"]
    a = {(c["workload"], c["backend"]): c for _, c in ok[ok["run_id"] == base].iterrows()}
    b = {(c["workload"], c["backend"]): c for _, c in ok[ok["run_id"] == other].iterrows()}
    out = []
    for key in [k for k in b if k in a]:
        ca, cb = a[key], b[key]
        ta, tb = Timing.of(ca, steps), Timing.of(cb, steps)
        if ta is None or tb is None:
            continue
        r = ratio(tb, ta)
        e2e = (
            cb["end_to_end_s"] / ca["end_to_end_s"]
            if _pos(ca["end_to_end_s"]) and _pos(cb["end_to_end_s"])
            else None
        )
        out.append(
            {
                "workload": key[0],
                "backend": key[1],
                "base_median": ta.median,
                "other_median": tb.median,
                "ratio": r.ratio,
                "low": r.low,
                "high": r.high,
                "changed": r.clear,
                "verdict": r.verdict,
                "e2e_ratio": e2e,
                "equivalent_base": ca["equivalent"],
                "equivalent_other": cb["equivalent"],
            }
        )
    cols = [
        "workload",
        "backend",
        "base_median",
        "other_median",
        "ratio",
        "low",
        "high",
        "changed",
        "verdict",
        "e2e_ratio",
        "equivalent_base",
        "equivalent_other",
    ]
    return pd.DataFrame(out, columns=cols)


def passed(v: object) -> bool:
    """Whether an ``equivalent`` cell value says the gate passed (None/NaN: unknown, not passed)."""
    return isinstance(v, bool | np.bool_) and bool(v)


def _pos(v: object) -> bool:
    return isinstance(v, int | float) and np.isfinite(v) and v > 0
