"""CPU threads of the Chainer backend: Chainer computes with NumPy, so its threads are BLAS's.

Chainer has no thread setting of its own: on the CPU every convolution (im2col + ``tensordot``)
and every linear layer is a NumPy matrix product, run by the BLAS NumPy was built with (here
the OpenBLAS bundled in the NumPy wheel, ``scipy_openblas64_``). Its thread count is fixed when
NumPy loads, from ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``, which the runner sets to
``$ROSETTA_THREADS`` in each cell's process before anything imports NumPy.

In a process where NumPy is already loaded (a test, a notebook, a benchmark) ``apply`` sets the
count through OpenBLAS's own ``openblas_set_num_threads`` (what threadpoolctl does, without the
dependency), and ``current`` reads it back for the manifest. Where NumPy's BLAS is not a bundled
OpenBLAS both return None and the environment variables are the only control.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

from rosetta.backends.base import threads_setting

_PREFIXES = ("scipy_openblas_", "openblas_")  # NumPy >= 2 wheels / older wheels and distros


def _openblas() -> tuple[ctypes.CDLL, str] | None:
    libs_dir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "lib*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: the same handle
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in ("64_", ""):
                if hasattr(lib, f"{prefix}get_num_threads{suffix}"):
                    return lib, f"{prefix}%s_num_threads{suffix}"
    return None


def current() -> int | None:
    """The number of threads NumPy's OpenBLAS uses now, or None where it cannot be read."""
    found = _openblas()
    if found is None:
        return None
    lib, pattern = found
    return int(getattr(lib, pattern % "get")())


def apply(n: int | None = None) -> int | None:
    """Set NumPy's OpenBLAS threads to ``n`` (default ``$ROSETTA_THREADS``); returns the count
    in use afterwards (None where it cannot be read). Without a setting nothing changes."""
    n = threads_setting() if n is None else n
    found = _openblas()
    if found is None:
        return None
    lib, pattern = found
    if n is not None:
        getattr(lib, pattern % "set")(ctypes.c_int(n))
    return int(getattr(lib, pattern % "get")())
