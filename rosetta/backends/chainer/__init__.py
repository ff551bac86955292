"""Backend ``chainer``: the spec lowered to a ``chainer.Sequential`` (Chainer 7.8 on NumPy 2).

Modules, one concept each:

- ``compat.py``: the NumPy-2 compatibility layer, applied before Chainer is imported, inside
  this backend only (every other module here imports Chainer through ``compat.load()``);
- ``lowering.py``: the Rosetta of Chainer, op -> ``L.Convolution2D``, ``F.max_pooling_2d``,
  ``L.Linear``, ``L.BatchNormalization``, ``L.EmbedID``, ``L.NStepGRU``, ...;
- ``weights.py``: canonical names and layouts <-> the links' arrays (dense OI, GRU gate order);
- ``optim.py``: ``MomentumSGD`` and ``SpecAdam`` (Chainer's Adam with the spec's epsilon rule);
- ``loader.py``: ``SerialIterator`` + ``concat_examples`` + ``to_device``;
- ``device.py``: NumPy (CPU) or CuPy (CUDA), and the per-step configuration;
- ``model.py``: the ``Model`` with its timed and NumPy faces.

Nothing imports Chainer until ``available()``, ``build()`` or ``run_op()`` is called.
"""

from __future__ import annotations

import contextlib
import importlib.metadata

import numpy as np

from rosetta.backends.base import PARAM_FREE_OPS, Params, unsupported
from rosetta.spec.workload import Workload

NAME = "chainer"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")


def available() -> tuple[bool, str]:
    """Whether Chainer imports here (through the compatibility layer), and why not."""
    try:
        from rosetta.backends.chainer import compat

        compat.load()
    except Exception as exc:  # ImportError, or a NumPy incompatibility the layer does not cover
        return False, f"chainer does not import: {type(exc).__name__}: {exc}"
    return True, ""


def versions() -> dict[str, str]:
    """Chainer's version, and CuPy's where it is installed (package metadata, no import)."""
    out = {"chainer": importlib.metadata.version("chainer"), "numpy": np.__version__}
    for dist in ("cupy", "cupy-cuda12x", "cupy-cuda11x"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out["cupy"] = importlib.metadata.version(dist)
            break
    return out


def cuda_available() -> bool:
    """Whether CuPy is importable and sees a CUDA GPU."""
    from rosetta.backends.chainer import device

    return device.cuda_available()


def build(
    workload: Workload,
    params: Params,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
):
    """Lower ``workload`` to a Chainer chain on ``device`` holding ``params`` (canonical names).

    ``seed`` is unused: the weights come in ``params``, and dropout masks are drawn by Chainer
    from NumPy's (CuPy's) global generator, which a Rosetta cell does not reseed."""
    from rosetta.backends.chainer import device as dev
    from rosetta.backends.chainer.model import ChainerModel

    return ChainerModel(workload, params, dtype, dev.place(device))


def run_op(
    op: object,
    x: np.ndarray,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    training: bool = False,
) -> np.ndarray:
    """One parameter-free op through the lowering table, NumPy in and out.

    Dropout masks come from Chainer's own draw (``numpy.random`` on the CPU, ``cupy.random`` on
    a GPU); the global generator is seeded with ``seed`` for this call and restored after."""
    if not isinstance(op, PARAM_FREE_OPS):
        raise unsupported(NAME, op)
    from rosetta.backends.chainer import device as dev
    from rosetta.backends.chainer import lowering

    placement = dev.place(device)
    layer = lowering.lower(op, tuple(np.shape(x)[1:]), dtype)
    xd = placement.device.send(np.asarray(x, dtype=dtype))
    with _seeded(placement, seed), dev.step_config(placement, train=training, backprop=False):
        y = layer(xd)
    return np.asarray(lowering.chainer.backend.CpuDevice().send(y.array))


@contextlib.contextmanager
def _seeded(placement, seed: int):
    if placement.kind == "cuda":
        from chainer.backends import cuda

        cuda.cupy.random.seed(seed)
        yield
        return
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
