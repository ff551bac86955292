"""The Rosetta of Keras on PyTorch: the shared Keras op modules (``keras_common/ops/``, one per
spec op, engine-neutral) under this backend's table, composed by ``sequence`` and
``residual`` of ``keras_common/lowering.py`` (imported here so the table finds them by name),
and ``apply_op``.

Images are channels-first (NCHW): Keras' torch engine runs every convolution and pooling through
``torch.nn.functional`` in NCHW and, given channels-last tensors, transposes them to NCHW and
back around each such op (``keras/src/backend/torch/nn.py``, ``_transpose_spatial_inputs``);
channels-first feeds PyTorch its own layout, so a flatten is already in the spec's C, H, W order.
"""

from __future__ import annotations

# Keras' engine is chosen (runtime.py) before anything imports keras
from rosetta.backends.keras_torch import runtime as torch_keras_runtime  # isort: split

import keras
import numpy as np

from rosetta.backends.driver import LoweringTable
from rosetta.backends.keras_common.lowering import (  # noqa: F401  (the table's composers)
    Layer,
    apply_keras_op,
    graph,
    residual,
    sequence,
)
from rosetta.backends.keras_torch.source import OPS
from rosetta.runtime import Runtime

NAME = "keras_torch"
TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS
DATA_FORMAT = "channels_first"
WHY_LAYOUT = (
    "NCHW: Keras' torch engine runs convolutions and pooling in NCHW and transposes "
    "channels-last tensors around each such op"
)


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch (dropout seeded from ``runtime.seed``)."""
    with keras.device(torch_keras_runtime.keras_device(runtime.device)):
        return apply_keras_op(
            TABLE, op, x, runtime.dtype, DATA_FORMAT, runtime.seed, training, NAME
        )
