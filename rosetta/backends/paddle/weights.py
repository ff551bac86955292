"""Weights at the boundary: the bound tensors of a built model, loaded and read in canonical layout.

Each op module's ``weights(op, layer)`` (``ops/<op>.py``) binds its canonical tensors to the
Paddle tensors holding them, with the exact conversions (transposes and block reorders, so a
round trip returns the same bits). This file walks those bindings: copy canonical arrays in
(dtype and place kept, in place), read values and gradients back out.
"""

from __future__ import annotations

import numpy as np

from rosetta.backends.binding import Binding
from rosetta.backends.paddle.compat import paddle
from rosetta.backends.paddle.source import OPS

nn = paddle.nn


def bindings(owners: list[tuple[object, nn.Layer]]) -> dict[str, Binding]:
    """Every canonical name of the model -> its binding, in graph order (``owners``: the
    ``(op, layer)`` pairs that ``lowering.Build`` collected)."""
    return {b.name: b for op, m in owners for b in OPS.module(op).weights(op, m)}


def _np_dtype(t: paddle.Tensor) -> np.dtype:
    return np.dtype(str(t.dtype).rsplit(".", 1)[-1])


def load(binds: dict[str, Binding], params: dict[str, np.ndarray]) -> None:
    """Copy canonical ``params`` into the bound tensors (their dtype and place kept: in place,
    so the GRU's flat cuDNN-style weight list keeps pointing at them)."""
    with paddle.no_grad():
        for name, b in binds.items():
            native = b.to_native(np.asarray(params[name]))
            b.tensor.set_value(np.ascontiguousarray(native, dtype=_np_dtype(b.tensor)))


def read(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """Every bound tensor in canonical layout (fresh NumPy arrays, never views of the model)."""
    return {n: np.array(b.to_canonical(b.tensor.numpy()), order="C") for n, b in binds.items()}


def read_grads(binds: dict[str, Binding]) -> dict[str, np.ndarray]:
    """The gradient of every trainable tensor in canonical layout (zeros where none flowed)."""
    out = {}
    for n, b in binds.items():
        if b.trainable:
            g = b.tensor.grad
            a = np.zeros(b.tensor.shape, _np_dtype(b.tensor)) if g is None else g.numpy()
            out[n] = np.array(b.to_canonical(a), order="C")
    return out
