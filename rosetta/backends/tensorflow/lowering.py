"""The Rosetta of Keras on TensorFlow: the shared Keras op modules (``keras_common/ops/``, one
module per spec op, engine-neutral) under this backend's table, and ``apply_op``.

``TABLE`` is the backend's lowering (``rosetta.backends.driver``): each op module's ``build``,
composed by ``sequence`` and ``residual`` of ``rosetta/backends/keras_common/lowering.py``
(imported here so the op table finds them by name; ``same_is_exact`` is its padding rule);
``model.py`` applies the result to a ``keras.Input`` and gets a functional ``keras.Model``;
``apply_op`` applies one op to an eager tensor. Dropout is gated by a boolean ``tf.Variable``
read inside the trace: ``Model.set_dropout`` flips it, and the timed ``tf.function`` runs on
without retracing.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from rosetta.backends.driver import LoweringTable, lower_op
from rosetta.backends.keras_common.lowering import (  # noqa: F401  (composers; padding rule)
    Ctx,
    Layer,
    graph,
    residual,
    same_is_exact,
    sequence,
)
from rosetta.backends.tensorflow import runtime as tf_runtime
from rosetta.backends.tensorflow import weights
from rosetta.backends.tensorflow.source import OPS
from rosetta.runtime import Runtime

NAME = "tensorflow"
TABLE: LoweringTable[Layer] = OPS.lowering(globals())  # the native face of source.OPS


def data_format_for(device: str, image: bool) -> str:
    """The layout ``apply_op`` computes in: the model's default for ``device`` (see model.py)."""
    return "channels_first" if device == "cuda" or not image else "channels_last"


def apply_op(op: object, x: np.ndarray, runtime: Runtime, training: bool) -> np.ndarray:
    """One parameter-free op on a canonical NumPy batch, in the device's layout (dropout seeded
    from ``runtime.seed``)."""
    x = np.asarray(x, dtype=runtime.dtype)
    data_format = data_format_for(runtime.device, x.ndim == 4)
    with tf.device(tf_runtime.tf_device(runtime.device)):
        gate = tf.Variable(True, trainable=False)
        ctx = Ctx(
            runtime.dtype, data_format, gate, seed=runtime.seed, training=training, backend=NAME
        )
        layer = lower_op(TABLE, op, tuple(x.shape[1:]), ctx)  # in_shape: canonical (C, H, W)
        y = layer(tf.constant(weights.images_to_layout(x, data_format))).numpy()
    if ctx.flattened_from is not None:
        return weights.flat_hwc_to_chw(y, ctx.flattened_from)
    return weights.images_to_canonical(y, data_format)
