"""A test backend that fails on purpose, selected by ``$ROSETTA_FAULT`` when it builds.

Registered for the fault tests by ``ROSETTA_EXTRA_BACKENDS=fault=tests.fault_backend``
(the child processes import it from the repository root on ``PYTHONPATH``);
``$ROSETTA_FAULT_THREADS=N`` limits the fault to cells running N threads (one point of a
sweep). Everything else is the NumPy reference (contract v3 entry points), so without a fault it
is an ordinary, equivalent backend.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from rosetta.backends import base, numpy_ref
from rosetta.backends.numpy_ref import DTYPES, PRECISIONS, available, run_op, versions
from rosetta.backends.numpy_ref import runtime as _ref_runtime

NAME = "fault"
#: ``$ROSETTA_FAULT=fakecuda`` pretends a CUDA GPU is visible (the device-resolution tests)
DEVICES = ("cpu", "cuda")
__all__ = [
    "DEVICES",
    "DTYPES",
    "NAME",
    "PRECISIONS",
    "available",
    "build",
    "configure",
    "cuda_available",
    "run_op",
    "versions",
]


def cuda_available() -> bool:
    """True only under ``$ROSETTA_FAULT=fakecuda``."""
    return os.environ.get("ROSETTA_FAULT", "") == "fakecuda"


class _Runtime:
    """numpy_ref's process settings, with this backend's pretend GPU."""

    set_threads = staticmethod(_ref_runtime.set_threads)
    set_tf32 = staticmethod(lambda enabled, device: bool(enabled and device == "cuda"))
    cuda_available = staticmethod(cuda_available)


def configure(request):
    """numpy_ref's configuration (threads read back from the BLAS), device from this module."""
    return base.configure(_Runtime, DEVICES, request)


def build(workload, params, runtime, **options):
    """The reference model, after the fault ``$ROSETTA_FAULT`` names (if any)."""
    fault = os.environ.get("ROSETTA_FAULT", "")
    only = os.environ.get("ROSETTA_FAULT_THREADS", "")
    if only and int(only) != runtime.threads:
        fault = ""
    if fault == "raise":
        raise RuntimeError("planted failure inside the framework")
    if fault == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        time.sleep(3600)
    if fault == "oom":
        np.ones((64, 2**30 // 8))  # 64 GiB: past any --memory-limit-mb a test sets
    if fault == "exit0":
        os._exit(0)
    model = numpy_ref.build(workload, params, runtime, **options)
    model.backend = NAME
    return model
