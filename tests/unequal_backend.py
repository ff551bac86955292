"""A test backend that runs but is *not equivalent*: the NumPy reference with fc1's rows left in
the NHWC flatten order (``tests.planted``'s ``fc1_no_permutation``), so its forward leaves the
gate's tolerance by far. Registered by ``ROSETTA_EXTRA_BACKENDS=unequal=tests.unequal_backend``.
"""

from __future__ import annotations

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
from tests.planted import Planted

NAME = "unequal"
__all__ = ["DEVICES", "DTYPES", "NAME", "PRECISIONS", "available", "build", "configure",
           "cuda_available", "run_op", "versions"]  # fmt: skip


class _Unequal(Planted):
    backend = NAME
    defect = "fc1_no_permutation"


def build(workload, params, runtime, **options):
    """The reference model with the planted defect (a gate that fails, a run that completes)."""
    return _Unequal(workload, params, runtime, **options)
