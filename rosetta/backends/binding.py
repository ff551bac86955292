"""One canonical tensor bound to the framework tensor that holds it, and the exact layout
conversions the op modules of several backends name (torch and paddle: the binding and the GRU
gate swaps; jax, pytensor and Keras: the dense rows after an NHWC flatten).

Framework-free: an op module (``<backend>/ops/<op>.py``) imports this at its top and still loads
with NumPy alone. Every conversion is a transpose or a block reorder, so a round trip returns the
same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Convert = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Binding:
    """One canonical tensor bound to the framework tensor holding it, with both conversions."""

    name: str  # canonical, e.g. "gru.kernel"
    tensor: Any  # the framework's parameter or buffer
    trainable: bool
    to_native: Convert  # canonical layout -> the framework's layout
    to_canonical: Convert  # the framework's layout -> canonical layout


def same(a: np.ndarray) -> np.ndarray:
    """The identity: the framework keeps the canonical layout."""
    return a


def transpose(a: np.ndarray) -> np.ndarray:
    """(in, out) <-> (out, in)."""
    return a.T


def swap_first_two_blocks(a: np.ndarray, axis: int) -> np.ndarray:
    """[z | r | h] <-> [r | z | n] along ``axis`` (3H long): the swap is its own inverse."""
    first, second, third = np.split(a, 3, axis=axis)
    return np.concatenate([second, first, third], axis=axis)


def gru_kernel_rzn_rows(k: np.ndarray) -> np.ndarray:
    """A GRU kernel (E, 3H) with gate columns z|r|h -> (3H, E) with gate rows r|z|n."""
    return swap_first_two_blocks(k, axis=1).T


def gru_kernel_from_rzn_rows(w: np.ndarray) -> np.ndarray:
    """(3H, E) with gate rows r|z|n -> the canonical (E, 3H) with gate columns z|r|h."""
    return swap_first_two_blocks(w.T, axis=1)


def gru_bias_rzn(b: np.ndarray) -> np.ndarray:
    """A GRU bias (3H,) z|r|h <-> r|z|n (its own inverse)."""
    return swap_first_two_blocks(b, axis=0)


def rows_chw_to_hwc(chw: tuple[int, int, int]) -> tuple[Convert, Convert]:
    """A dense kernel's rows after a flatten of ``chw`` = (C, H, W): the spec's C, H, W order
    <-> an NHWC backend's H, W, C order, both ways (to native, to canonical)."""
    c, h, w = chw

    def to_native(k: np.ndarray) -> np.ndarray:
        # (C*H*W, O) -> (C, H, W, O) -> (H, W, C, O) -> (H*W*C, O)
        return k.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)

    def to_canonical(k: np.ndarray) -> np.ndarray:
        # (H*W*C, O) -> (H, W, C, O) -> (C, H, W, O) -> (C*H*W, O)
        return k.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)

    return to_native, to_canonical
