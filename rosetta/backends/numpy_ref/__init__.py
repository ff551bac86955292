"""Backend ``numpy_ref``: the pure-NumPy reference every other backend is checked against.

Forward and backward of each op sit side by side in ``conv.py``, ``nn.py`` and ``rnn.py``;
``optim.py`` holds SGD and Adam with the spec's exact semantics; ``model.py`` interprets a
workload's graph with them. Float32 and float64, CPU only.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.base import Params
from rosetta.backends.numpy_ref.model import ReferenceModel
from rosetta.errors import BackendError
from rosetta.spec.workload import Workload

NAME = "numpy_ref"
DEVICES = ("cpu",)
DTYPES = ("float32", "float64")
LAYOUT = {"image": "NCHW", "sequence": "NTC"}


def available() -> tuple[bool, str]:
    """Always usable: NumPy is the package's own dependency."""
    return True, ""


def versions() -> dict[str, str]:
    """NumPy's version (the BLAS build goes into the environment manifest separately)."""
    return {"numpy": np.__version__}


def build(
    workload: Workload,
    params: Params,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
) -> ReferenceModel:
    """Interpret ``workload`` in NumPy with ``params`` (canonical names); CPU only."""
    if device != "cpu":
        raise BackendError(f"backend 'numpy_ref' runs on the CPU only, not {device!r}")
    return ReferenceModel(workload, params, dtype=dtype, seed=seed)
