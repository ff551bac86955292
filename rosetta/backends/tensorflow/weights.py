"""Canonical <-> Keras layouts on TensorFlow: the conversions every Keras engine shares
(``rosetta/backends/keras_common/weights.py``, NumPy only), named here so the backend folder
has the contract's files."""

from __future__ import annotations

from rosetta.backends.keras_common.weights import (
    Binding,
    chw_rows_to_hwc,
    flat_hwc_to_chw,
    grads,
    gru_from_keras,
    gru_to_keras,
    hwc_rows_to_chw,
    hwio_to_oihw,
    identity,
    images_to_canonical,
    images_to_layout,
    load,
    oihw_to_hwio,
    read,
)

__all__ = [
    "Binding",
    "chw_rows_to_hwc",
    "flat_hwc_to_chw",
    "grads",
    "gru_from_keras",
    "gru_to_keras",
    "hwc_rows_to_chw",
    "hwio_to_oihw",
    "identity",
    "images_to_canonical",
    "images_to_layout",
    "load",
    "oihw_to_hwio",
    "read",
]
