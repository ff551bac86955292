"""The spec's optimisers on Keras/JAX: the shared Keras ones (``keras_common/optim.py``: Keras'
SGD, the spec's Algorithm 1 Adam as a small Optimizer). The custom step applies them through
``optimizer.stateless_apply`` inside the jitted step; JAX's gradients are dense already."""

from __future__ import annotations

from rosetta.backends.keras_common.optim import SpecAdam, describe, make_optimizer

__all__ = ["SpecAdam", "describe", "make_optimizer"]
