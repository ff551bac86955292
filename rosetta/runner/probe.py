"""The machine's measured fp32 GEMM peak: a short NumPy matmul probe recorded with each run.

Efficiency figures (achieved GFLOP/s as a fraction of peak) need a peak measured on the same
machine, the same day, under the same thread setting; this takes about a second. It measures
NumPy's BLAS only, whose kernel the platform may hold below the CPU's ISA (OPENBLAS_CORETYPE), so
a framework can beat it: ``rosetta.runner.peak.machine_peaks`` records the measured ceiling (an
FMA kernel on every core, :mod:`rosetta.runner.ceiling`), each framework's own GEMM (fp32, bf16)
and a convolution probe beside it. The report reads "of ceiling" against the measured ceiling,
and against this probe only where a run has none (stated).
"""

from __future__ import annotations

import time

import numpy as np


def gemm_peak_gflops(n: int = 2048, repeats: int = 5) -> float:
    """Best-of-``repeats`` GFLOP/s of an ``n x n`` float32 matmul (2 n^3 FLOPs) via NumPy's BLAS."""
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    a @ b  # warm-up: thread pool start, page faults
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e9
