"""The spec's optimisers on Keras/TensorFlow: the shared Keras ones (``keras_common/optim.py``:
Keras' SGD, and Algorithm 1 Adam as a small Optimizer), with an embedding's sparse gradient
(``tf.IndexedSlices``) made dense before Adam's dense update.

On this engine Adam and AdamW run each variable's update as TensorFlow's fused Adam kernel,
``ResourceApplyAdam`` (one Eigen pass over the variable and its two moments; tf.keras 2's Adam
ran it, Keras 3's runs a dozen separate ops). The kernel computes
``lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)``, ``m += (g - m)(1 - b1)``,
``v += (g^2 - v)(1 - b2)``, ``w -= lr_t m / (sqrt(v) + eps)``: Keras' placement of epsilon. The
spec's Algorithm 1, ``w -= lr (m / c1) / (sqrt(v / c2) + eps)`` with ``c = 1 - beta^t``, is the
same expression with ``lr_t = lr sqrt(c2) / c1`` and epsilon ``eps sqrt(c2)``, so both are
computed here in float64, rounded once to the variable's dtype, and handed to the kernel with
``beta_power`` 0 (its own correction then multiplies by exactly 1). The moments' updates are the
spec's in another association, equal to rounding. The shared ``SpecAdam`` (per variable, twelve
ops) made the transformer's lowered train step 1.07x the hand-written Keras one (``benchmarks
lowering_tensorflow``, Zen 4, 2026-11-28): its optimiser alone took ~29 ms where Keras' took ~9.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from rosetta.backends.keras_common.optim import SpecAdam, SpecAdamW, decayed_variables, describe
from rosetta.backends.keras_common.optim import make_optimizer as _make
from rosetta.spec.workload import Adam, AdamW

__all__ = [
    "SpecAdam",
    "SpecAdamW",
    "TFSpecAdam",
    "TFSpecAdamW",
    "decayed_variables",
    "describe",
    "make_optimizer",
]


class _Fused:
    """Algorithm 1 as ``ResourceApplyAdam`` (mixed into :class:`SpecAdam` and its AdamW)."""

    HOW = "each variable in one fused kernel: tf.raw_ops.ResourceApplyAdam"

    def _adam_step(self, gradient, variable, learning_rate) -> None:
        """Algorithm 1's step on one variable (AdamW's decay runs first, in SpecAdamW)."""
        dt = variable.dtype
        g = tf.cast(self._dense(gradient), dt)
        lr = tf.cast(learning_rate, tf.float64)
        i = self._get_variable_index(variable)
        t = tf.cast(self.iterations + 1, tf.float64)
        c1 = 1.0 - tf.pow(tf.constant(float(self.beta1), tf.float64), t)
        root_c2 = tf.sqrt(1.0 - tf.pow(tf.constant(float(self.beta2), tf.float64), t))
        zero = tf.zeros((), dt)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._m[i].handle,
            v=self._v[i].handle,
            beta1_power=zero,  # the kernel's own correction: sqrt(1 - 0) / (1 - 0) = 1
            beta2_power=zero,
            lr=tf.cast(lr * root_c2 / c1, dt),
            beta1=tf.constant(float(self.beta1), dt),
            beta2=tf.constant(float(self.beta2), dt),
            epsilon=tf.cast(float(self.eps) * root_c2, dt),
            grad=g,
            use_locking=False,
        )


class TFSpecAdam(_Fused, SpecAdam):
    """:class:`SpecAdam` as TensorFlow's fused kernel (module docstring)."""


class TFSpecAdamW(_Fused, SpecAdamW):
    """:class:`SpecAdamW` with Adam's step as TensorFlow's fused kernel (the decay is
    SpecAdamW's own, first, on its variables)."""


def make_optimizer(spec) -> keras.optimizers.Optimizer | None:
    """The Keras optimiser for the spec's ``SGD``/``Adam`` (``None`` for forward-only work)."""
    dense = tf.convert_to_tensor
    if isinstance(spec, AdamW):
        return TFSpecAdamW(spec.lr, spec.beta1, spec.beta2, spec.eps, spec.weight_decay, dense)
    if isinstance(spec, Adam):
        return TFSpecAdam(spec.lr, spec.beta1, spec.beta2, spec.eps, dense=dense)
    return _make(spec, dense=dense)
