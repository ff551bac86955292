"""A test backend that fails on purpose, selected by ``$ROSETTA_FAULT`` when it builds.

Registered for the fault tests by ``ROSETTA_EXTRA_BACKENDS=fault=tests.fault_backend``
(the child processes import it from the repository root on ``PYTHONPATH``). Everything else is
the NumPy reference, so without a fault it is an ordinary, equivalent backend.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from rosetta.backends import numpy_ref
from rosetta.backends.numpy_ref import (
    DEVICES,
    DTYPES,
    PRECISIONS,
    available,
    configure,
    cuda_available,
    run_op,
    versions,
)

NAME = "fault"
__all__ = [
    "DEVICES",
    "DTYPES",
    "NAME",
    "PRECISIONS",
    "available",
    "configure",
    "build",
    "cuda_available",
    "run_op",
    "versions",
]


def build(workload, params, runtime, **options):
    """The reference model, after the fault ``$ROSETTA_FAULT`` names (if any)."""
    fault = os.environ.get("ROSETTA_FAULT", "")
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
