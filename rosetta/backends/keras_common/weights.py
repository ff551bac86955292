"""Canonical <-> Keras: the weight bindings of a Keras backend and the activation layouts.

Shared by every Keras engine (NumPy only). A ``Binding`` ties canonical parameter names to the
Keras variables that hold them (found once the layer is built) and knows the two directions of
the conversion; each op module's ``weights(op, layer, ctx)`` (``ops/<op>.py``) makes its op's
binding, with the op's own layout conversion beside it (conv: OIHW <-> HWIO; dense after an NHWC
flatten: rows C, H, W <-> H, W, C; GRU: the two biases <-> Keras' one (2, 3H) ``bias``), and its
``build`` hands it to ``ctx.bind``. This file moves whole parameter sets across the bindings
(``load``/``read``/``grads``). The conversions are permutations and splits, so the same
``to_canonical`` maps a variable's *gradient* to the canonical gradient too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Arrays = tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Binding:
    """Canonical names <-> Keras variables of one layer, with the conversion both ways."""

    names: tuple[str, ...]  # canonical names, in the order to_native takes them
    find: Callable[[], tuple]  # the built layer's keras.Variables, in to_native's output order
    to_native: Callable[..., Arrays]
    to_canonical: Callable[..., Arrays]

    @property
    def variables(self) -> tuple:
        """The Keras variables (the layer must have been built)."""
        return self.find()


def load(bindings: list[Binding], params: dict[str, np.ndarray], dtype: str) -> None:
    """Assign canonical ``params`` (cast to ``dtype``) to the bound Keras variables."""
    for b in bindings:
        arrays = b.to_native(*(np.asarray(params[n], dtype=dtype) for n in b.names))
        for var, a in zip(b.variables, arrays, strict=True):
            var.assign(a)


def read(bindings: list[Binding]) -> dict[str, np.ndarray]:
    """Every bound variable as canonical-named NumPy arrays (copies)."""
    out: dict[str, np.ndarray] = {}
    for b in bindings:
        out.update(zip(b.names, b.to_canonical(*(v.numpy() for v in b.variables)), strict=True))
    return {k: np.array(v) for k, v in out.items()}


def grads(
    bindings: list[Binding], by_var: dict[int, np.ndarray], trainable: set[str], dtype: str
) -> dict[str, np.ndarray]:
    """Gradients keyed by ``id(variable)`` as canonical-named arrays of the ``trainable`` names
    (a permutation maps a gradient as it maps its weight; buffers get zeros, then are dropped)."""
    out: dict[str, np.ndarray] = {}
    for b in bindings:
        arrays = [by_var.get(id(v), np.zeros(v.shape, dtype)) for v in b.variables]
        canon = zip(b.names, b.to_canonical(*arrays), strict=True)
        out.update((n, g) for n, g in canon if n in trainable)
    return out


def identity(*arrays: np.ndarray) -> Arrays:
    """The conversion of a layer that keeps the canonical layouts."""
    return tuple(arrays)


def kernel_and_bias(op, layer) -> tuple[tuple[str, ...], Callable[[], tuple]]:
    """Canonical names and the variable finder of a kernel (+ bias) layer (conv2d, dense)."""
    names = (f"{op.name}.kernel",) + ((f"{op.name}.bias",) if op.bias else ())
    return names, lambda: (layer.kernel, layer.bias) if op.bias else (layer.kernel,)


# -- activations, for run_op's NumPy boundary --------------------------------------------------
def images_to_layout(x: np.ndarray, data_format: str) -> np.ndarray:
    """Canonical ``(N, C, H, W)`` images in the backend's layout (NHWC for channels_last)."""
    if data_format == "channels_last" and x.ndim == 4:
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # (N, C, H, W) -> (N, H, W, C)
    return x


def images_to_canonical(x: np.ndarray, data_format: str) -> np.ndarray:
    """The inverse of ``images_to_layout``."""
    if data_format == "channels_last" and x.ndim == 4:
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))  # (N, H, W, C) -> (N, C, H, W)
    return x


def flat_hwc_to_chw(y: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """Flattened NHWC activations ``(N, H*W*C)`` in the spec's ``C, H, W`` order."""
    c, h, w = chw
    # (N, H*W*C) -> (N, H, W, C) -> (N, C, H, W) -> (N, C*H*W)
    return y.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(len(y), -1)
