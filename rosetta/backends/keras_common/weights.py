"""Canonical <-> Keras layouts: every weight and activation conversion of a Keras backend.

Shared by every Keras engine (NumPy only). A ``Binding`` ties canonical parameter names to the
Keras variables that hold them (found once the layer is built) and knows the two directions of
the conversion; ``load``/``read``/``grads`` move whole parameter sets across it. The conversions
are permutations and splits, so the same ``to_canonical`` maps a variable's *gradient* to the
canonical gradient too.

- conv kernel: canonical ``OIHW`` -> Keras ``HWIO`` (the same in both data formats);
- dense kernel after an NHWC flatten: the rows come in ``H, W, C`` order, the spec's in
  ``C, H, W`` (``Flatten(order="CHW")``): the rows are permuted;
- GRU: Keras' ``kernel (E, 3H)`` and ``recurrent_kernel (H, 3H)`` already have the canonical gate
  order ``z, r, h``; its ``bias`` is ``(2, 3H)`` with row 0 the input bias and row 1 the recurrent
  one (``reset_after=True``);
- BatchNorm: ``gamma, beta, mean, var`` -> ``gamma, beta, moving_mean, moving_variance``.
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
    return tuple(arrays)


# -- conv2d ------------------------------------------------------------------------------------
def oihw_to_hwio(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
    return (np.transpose(kernel, (2, 3, 1, 0)), *rest)  # (O, I, H, W) -> (H, W, I, O)


def hwio_to_oihw(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
    return (np.transpose(kernel, (3, 2, 0, 1)), *rest)  # (H, W, I, O) -> (O, I, H, W)


# -- dense after a flatten of NHWC activations ------------------------------------------------
def chw_rows_to_hwc(chw: tuple[int, int, int]) -> Callable[..., Arrays]:
    """Dense kernel rows from the spec's ``C, H, W`` flatten order to NHWC's ``H, W, C``."""
    c, h, w = chw

    def convert(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
        o = kernel.shape[1]
        # (C*H*W, O) -> (C, H, W, O) -> (H, W, C, O) -> (H*W*C, O)
        return (kernel.reshape(c, h, w, o).transpose(1, 2, 0, 3).reshape(-1, o), *rest)

    return convert


def hwc_rows_to_chw(chw: tuple[int, int, int]) -> Callable[..., Arrays]:
    """The inverse of ``chw_rows_to_hwc``."""
    c, h, w = chw

    def convert(kernel: np.ndarray, *rest: np.ndarray) -> Arrays:
        o = kernel.shape[1]
        # (H*W*C, O) -> (H, W, C, O) -> (C, H, W, O) -> (C*H*W, O)
        return (kernel.reshape(h, w, c, o).transpose(2, 0, 1, 3).reshape(-1, o), *rest)

    return convert


# -- gru ------------------------------------------------------------------------------------------
def gru_to_keras(kernel, recurrent_kernel, bias_input, bias_recurrent) -> Arrays:
    return kernel, recurrent_kernel, np.stack([bias_input, bias_recurrent])  # 2 x (3H,) -> (2, 3H)


def gru_from_keras(kernel, recurrent_kernel, bias) -> Arrays:
    return kernel, recurrent_kernel, bias[0], bias[1]  # (2, 3H) -> 2 x (3H,)


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
