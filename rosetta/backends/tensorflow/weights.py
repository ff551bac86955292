"""Canonical <-> Keras layouts on TensorFlow: the bindings every Keras engine shares
(``rosetta/backends/keras_common/weights.py``, NumPy only; each op's own conversion is in its
module, ``keras_common/ops/<op>.py``), named here so the backend folder has the contract's
files."""

from __future__ import annotations

from rosetta.backends.keras_common.weights import (
    Binding,
    flat_hwc_to_chw,
    grads,
    images_to_canonical,
    images_to_layout,
    load,
    read,
)

__all__ = [
    "Binding",
    "flat_hwc_to_chw",
    "grads",
    "images_to_canonical",
    "images_to_layout",
    "load",
    "read",
]
