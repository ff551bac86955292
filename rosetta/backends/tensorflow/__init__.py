"""Backend ``tensorflow``: the spec lowered to a Keras 3 model on TensorFlow.

``lowering.py`` is the Rosetta of Keras (spec op -> Keras layer), ``convert.py`` every layout
conversion (at ``set_params``/``get_params`` and ``run_op``'s boundary), ``optim.py`` the spec's
optimisers, ``fastpath.py`` the measured fast-path choices, ``loader.py`` the ``tf.data``
pipeline and ``model.py`` the two faces of the contract. Importing this package imports
TensorFlow (seconds: the runner's ``import_s``) through ``runtime.py``, which selects Keras'
TensorFlow backend and sizes the thread pools first.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np

from rosetta.backends.base import PARAM_FREE_OPS, Params, unsupported
from rosetta.backends.tensorflow import runtime
from rosetta.backends.tensorflow.fastpath import choose
from rosetta.spec.workload import Workload

NAME = "tensorflow"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")


def available() -> tuple[bool, str]:
    """Usable once this module imported (TensorFlow and Keras with its TensorFlow backend)."""
    return True, ""


def versions() -> dict[str, str]:
    """TensorFlow, Keras and the CUDA/cuDNN TensorFlow was built against."""
    import keras
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "keras": keras.__version__}
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            out["distribution"] = f"{dist} {importlib.metadata.version(dist)}"
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    if build.get("is_cuda_build"):
        out["cuda_build"] = f"CUDA {build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}"
    return out


def cuda_available() -> bool:
    """Whether TensorFlow sees a GPU."""
    return runtime.gpu_visible()


def build(
    workload: Workload,
    params: Params,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    layout: str | None = None,
    jit_compile: bool | None = None,
):
    """Lower ``workload`` to a ``keras.Model`` holding ``params`` (canonical names).

    ``layout`` (``"NHWC"``/``"NCHW"``) and ``jit_compile`` override the measured fast path
    (``fastpath.choose``); the benchmarks use them, the runner does not."""
    from rosetta.backends.tensorflow.model import KerasModel

    runtime.tf_device(device)  # a clear error for cuda without a GPU
    fast = choose(workload, device, layout=layout, jit_compile=jit_compile)
    return KerasModel(workload, params, dtype=dtype, device=device, seed=seed, fast=fast)


def run_op(
    op: object,
    x: np.ndarray,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    training: bool = False,
) -> np.ndarray:
    """One parameter-free op through the lowering table, in the device's layout, NumPy in/out."""
    import tensorflow as tf

    from rosetta.backends.tensorflow import convert
    from rosetta.backends.tensorflow.lowering import LOWERINGS, Ctx

    lower = LOWERINGS.get(type(op))
    if lower is None or not isinstance(op, PARAM_FREE_OPS):
        raise unsupported(NAME, op)
    x = np.asarray(x, dtype=dtype)
    data_format = "channels_first" if device == "cuda" or x.ndim != 4 else "channels_last"
    ctx = Ctx(dtype=dtype, data_format=data_format, seed=seed, training=training)
    in_shape = x.shape[1:]  # canonical (C, H, W)
    with tf.device(runtime.tf_device(device)):
        y = lower(op, tf.constant(convert.images_to_layout(x, data_format)), in_shape, ctx)
    y = np.asarray(y.numpy() if hasattr(y, "numpy") else y)
    if ctx.flattened_from is not None:
        return convert.flat_hwc_to_chw(y, ctx.flattened_from)
    return convert.images_to_canonical(y, data_format)
