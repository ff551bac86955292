"""The Rosetta of Keras on JAX: the shared Keras op modules (``keras_common/ops/``, one per
spec op, engine-neutral) under this backend's table, composed by ``sequence`` and
``residual`` of ``keras_common/lowering.py`` (imported here so the table finds them by name),
and ``apply_op``.

Images are channels-last (NHWC, Keras' default): XLA:CPU's convolutions are NHWC-native, the
choice the ``jax`` backend measured (``rosetta/backends/jax/lowering.py``, ``IMAGE_LAYOUT``); on
a GPU XLA's layout assignment picks the physical layout cuDNN wants whatever the logical one.
"""

from __future__ import annotations

# Keras' engine is chosen (runtime.py) before anything imports keras
from rosetta.backends.keras_jax import runtime as jax_keras_runtime  # isort: split

import numpy as np

from rosetta.backends.driver import LoweringTable
from rosetta.backends.jax.lowering import IMAGE_LAYOUT
from rosetta.backends.keras_common.lowering import (  # noqa: F401  (the table's composers)
    Layer,
    apply_keras_op,
    graph,
    residual,
    sequence,
)
from rosetta.backends.keras_jax.source import OPS
from rosetta.runtime import Runtime

NAME = "keras_jax"
TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS
#: the data format of images (see the module docstring)
DATA_FORMAT = "channels_last" if IMAGE_LAYOUT == "NHWC" else "channels_first"
WHY_LAYOUT = (
    "NHWC: XLA:CPU's convolutions are NHWC-native (the jax backend's measured IMAGE_LAYOUT); "
    "on a GPU XLA assigns the physical layout cuDNN wants"
)


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch (dropout seeded from ``runtime.seed``)."""
    import jax

    with jax_keras_runtime.precision_scope(runtime.dtype):
        with jax.default_device(jax_keras_runtime.jax_device(runtime.device)):
            return apply_keras_op(
                TABLE, op, x, runtime.dtype, DATA_FORMAT, runtime.seed, training, NAME
            )
