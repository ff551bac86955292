"""Clocks and their summaries: perf_counter_ns, a sync before every read, robust statistics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np


def now_ns() -> int:
    """The monotonic high-resolution clock every Rosetta timing uses."""
    return time.perf_counter_ns()


def timed(fn: Callable[[], object], sync: Callable[[], None]) -> tuple[object, float]:
    """Run ``fn``, synchronise the device, and return (result, seconds)."""
    start = now_ns()
    out = fn()
    sync()
    return out, (now_ns() - start) / 1e9


@dataclass(frozen=True)
class StepStats:
    """Summary of steady-state step times (seconds): median with a bootstrap 95% interval, IQR."""

    n: int
    median: float
    ci95_low: float
    ci95_high: float
    q25: float
    q75: float
    mean: float
    std: float  # sample standard deviation (0 for a single step)

    def as_dict(self) -> dict:
        """Plain-dict form for JSON records."""
        return asdict(self)


def summarize(times: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> StepStats:
    """Median, bootstrap 95% interval of the median (percentile method), and quartiles."""
    t = np.asarray(times, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no step times to summarise")
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(t, size=(resamples, t.size), replace=True), axis=1)
    lo, hi = np.percentile(medians, [2.5, 97.5])
    q25, q75 = np.percentile(t, [25, 75])
    return StepStats(
        n=int(t.size),
        median=float(np.median(t)),
        ci95_low=float(lo),
        ci95_high=float(hi),
        q25=float(q25),
        q75=float(q75),
        mean=float(t.mean()),
        std=float(t.std(ddof=1)) if t.size > 1 else 0.0,
    )
