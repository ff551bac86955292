"""The spec's optimisers on Keras/PyTorch: the shared Keras ones (``keras_common/optim.py``:
Keras' SGD, the spec's Algorithm 1 Adam as a small Optimizer), applied under ``torch.no_grad``
to the gradients ``backward`` left on the variables (dense, an embedding's too)."""

from __future__ import annotations

from rosetta.backends.keras_common.optim import SpecAdam, describe, make_optimizer

__all__ = ["SpecAdam", "describe", "make_optimizer"]
