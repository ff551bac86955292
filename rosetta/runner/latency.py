"""Single-request latency and memory per sample: what a deployment sees, beside the throughput.

Latency (MLPerf's single-stream view): the prediction path at batch 1, one request at a time,
each request synchronised (``sync`` before the clock starts and on the output before it stops),
after a warm-up that absorbs first-call costs (a new input shape means a retrace or a new
kernel choice in several frameworks). The whole distribution is kept (``raw_s``), never only a
mean. It runs after the timed run and outside every clock of the cell.

Requests per profile (``REQUESTS``) keep the cost inside the profiles' budgets: ``ci`` 20
requests after 3 warm-up (a smoke test of the path, its percentiles coarse), ``smoke`` and
``full`` 200 after 20 (the p99 of 200 is the 2nd largest: coarse, but a percentile, as the
issue asks). Inputs cycle through a small pool of distinct samples (``POOL``) made before the
first request, so no request pays for making its input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rosetta.runner import clock

#: (warm-up requests, timed requests) per profile; other profile names take ``DEFAULT``
REQUESTS = {"ci": (3, 20), "smoke": (20, 200), "full": (20, 200)}
DEFAULT = (20, 200)
POOL = 8  # distinct batch-1 inputs cycled through the requests


@dataclass(frozen=True)
class LatencyPlan:
    """How many requests a cell makes: ``warmup`` untimed, then ``n`` timed."""

    warmup: int
    n: int

    @classmethod
    def for_profile(cls, profile: str) -> LatencyPlan:
        """The plan of ``profile`` (``REQUESTS``, else ``DEFAULT``)."""
        return cls(*REQUESTS.get(profile, DEFAULT))


def percentiles(raw_s: Sequence[float]) -> dict:
    """p50/p90/p99 (linear interpolation, NumPy's default), min, max and mean of ``raw_s``."""
    t = np.asarray(raw_s, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no request times")
    p50, p90, p99 = np.percentile(t, [50, 90, 99])
    return {
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "min": float(t.min()),
        "max": float(t.max()),
        "mean": float(t.mean()),
    }


def request_times(
    predict: Callable[[object], object],
    sync: Callable[[object], None],
    batches: Sequence[object],
    plan: LatencyPlan,
) -> list[float]:
    """Seconds of each of ``plan.n`` synchronised single requests, after ``plan.warmup``.

    ``batches`` (native, on the device) are cycled. Each request: ``sync()`` (nothing queued
    from before), then the clock: ``predict(batch)`` and ``sync(output)``."""
    for i in range(plan.warmup):
        sync(predict(batches[i % len(batches)]))
    out: list[float] = []
    for i in range(plan.n):
        batch = batches[i % len(batches)]
        sync(None)
        start = clock.now_ns()
        sync(predict(batch))
        out.append((clock.now_ns() - start) / 1e9)
    return out


def measure(model, x: np.ndarray, plan: LatencyPlan) -> dict:
    """Batch-1 latency of ``model.predict`` on the samples ``x`` (canonical layout): the
    record's ``metrics.latency`` (``batch``, ``n``, ``warmup``, percentiles in seconds,
    ``raw_s`` in request order)."""
    k = min(len(x), POOL)
    batches = list(model.loader(x[:k], None, np.arange(k), 1))  # k native (1, ...) batches

    def sync(value):
        model.sync(value)

    raw = request_times(model.predict, sync, batches, plan)
    return {"batch": 1, "n": len(raw), "warmup": plan.warmup, **percentiles(raw), "raw_s": raw}


def memory(peak_rss_bytes: int, peak_device_bytes: int | None, batch_size: int) -> dict:
    """Peak memory as bytes and bytes per sample of the cell's batch (``metrics.memory``).

    Per sample divides the whole peak by the batch size: it includes the framework's and the
    weights' fixed share, so it falls with the batch; the report compares it at equal batch."""
    per = max(int(batch_size), 1)
    return {
        "peak_rss_bytes": int(peak_rss_bytes),
        "peak_rss_bytes_per_sample": int(peak_rss_bytes) / per,
        "peak_device_bytes": None if peak_device_bytes is None else int(peak_device_bytes),
        "peak_device_bytes_per_sample": (
            None if peak_device_bytes is None else int(peak_device_bytes) / per
        ),
        "batch_size": per,
    }
