"""The reference's process settings: NumPy's BLAS threads (threadpoolctl), CPU only.

Threads are set in the BLAS library NumPy loaded and read back from it, so the record says how
many threads OpenBLAS (or MKL) really uses, not what was asked. The BLAS kernel in use
(threadpoolctl's ``architecture``) and ``OPENBLAS_CORETYPE``, which the platform may set to pick
an older kernel, go into the manifest: they decide the reference's speed, not the suite.
"""

from __future__ import annotations

import os

import numpy as np


def available() -> tuple[bool, str]:
    """Always usable: NumPy is the package's own dependency."""
    return True, ""


def versions() -> dict[str, str]:
    """NumPy's version (the BLAS build goes into the environment manifest separately)."""
    return {"numpy": np.__version__}


def cuda_available() -> bool:
    """NumPy never sees a GPU."""
    return False


def blas_pools() -> list[dict]:
    """threadpoolctl's view of the BLAS libraries loaded in this process."""
    from threadpoolctl import threadpool_info

    return [p for p in threadpool_info() if p.get("user_api") == "blas"]


def set_threads(n: int) -> int:
    """Size every loaded BLAS pool to ``n``; returns the threads in effect (read back)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n, user_api="blas")
    pools = blas_pools()
    return min((int(p["num_threads"]) for p in pools), default=1)


def set_tf32(enabled: bool, device: str) -> bool:
    """No TF32 on the CPU: always off."""
    return False


def blas_manifest() -> str:
    """The BLAS kernel in use, e.g. ``openblas 0.3.31 (SkylakeX kernel, 2 threads)``."""
    parts = [
        f"{p.get('internal_api')} {p.get('version')} ({p.get('architecture')} kernel, "
        f"{p.get('num_threads')} threads)"
        for p in blas_pools()
    ]
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:
        parts.append(f"OPENBLAS_CORETYPE={core} set by the environment")
    return "; ".join(parts) or "no BLAS pool visible"
