"""The spec's optimisers on Keras/TensorFlow: the shared Keras ones (``keras_common/optim.py``:
Keras' SGD, and Algorithm 1 Adam as a small Optimizer), with an embedding's sparse gradient
(``tf.IndexedSlices``) made dense before Adam's dense update."""

from __future__ import annotations

import keras
import tensorflow as tf

from rosetta.backends.keras_common.optim import SpecAdam, SpecAdamW, decayed_variables, describe
from rosetta.backends.keras_common.optim import make_optimizer as _make

__all__ = ["SpecAdam", "SpecAdamW", "decayed_variables", "describe", "make_optimizer"]


def make_optimizer(spec) -> keras.optimizers.Optimizer | None:
    """The Keras optimiser for the spec's ``SGD``/``Adam`` (``None`` for forward-only work)."""
    return _make(spec, dense=tf.convert_to_tensor)
