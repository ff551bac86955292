"""Canonical <-> Keras layouts on PyTorch: the bindings every Keras engine shares
(``rosetta/backends/keras_common/weights.py``, NumPy only; each op's own conversion is in its
module, ``keras_common/ops/<op>.py``); Keras' variables hold the same layouts on every engine,
so nothing here is PyTorch's own."""

from __future__ import annotations

from rosetta.backends.keras_common.weights import (
    Binding,
    grads,
    images_to_canonical,
    images_to_layout,
    load,
    read,
)

__all__ = ["Binding", "grads", "images_to_canonical", "images_to_layout", "load", "read"]
