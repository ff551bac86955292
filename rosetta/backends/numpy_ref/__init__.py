"""Backend ``numpy_ref``: the pure-NumPy reference every other backend is checked against.

Forward and backward of each op sit side by side in ``conv.py``, ``nn.py`` and ``rnn.py``;
``optim.py`` holds SGD and Adam with the spec's exact semantics; ``model.py`` interprets a
workload's graph with them. Float32 and float64, CPU only.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.base import PARAM_FREE_OPS, Params, unsupported
from rosetta.backends.numpy_ref.model import LOWERINGS, ReferenceModel, _Ctx
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


def cuda_available() -> bool:
    """NumPy never sees a GPU."""
    return False


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


def run_op(
    op: object,
    x: np.ndarray,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    training: bool = False,
) -> np.ndarray:
    """One parameter-free op of the spec through the reference's lowering table."""
    lower = LOWERINGS.get(type(op))
    if lower is None or not isinstance(op, PARAM_FREE_OPS):
        raise unsupported(NAME, op)
    ctx = _Ctx({}, training=training, rng=np.random.default_rng(seed))
    y, _ = lower(op, np.asarray(x, dtype=dtype), ctx)
    return y
