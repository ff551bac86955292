"""Canonical <-> native layouts: every conversion of the PyTensor backend lives here.

The graphs compute images channels-last (``NHWC``): a convolution is its kernel taps
concatenated on the channel axis and one ``dot`` with the kernel as a (KH*KW*C, O) matrix,
which NHWC gives without a transpose per layer (``lowering.py``). So, canonical -> native:

- conv2d kernel ``OIHW`` -> ``HWIO`` (the matrix's rows are then in tap-major, channel-minor
  order, the order the taps are concatenated in);
- the dense layer right after a flatten of ``(C, H, W)``: its rows are in the spec's
  channel-major ``C, H, W`` order, an NHWC flatten yields ``H, W, C``: rows permuted here once;
- GRU kernels and biases keep the spec's layout (gate blocks ``z | r | h``, two biases): the
  ``scan`` step uses the spec's equations as written;
- everything else (biases, BatchNorm vectors, the embedding table) as is.

Each conversion is a permutation, so ``to_canonical(to_native(p)) == p`` bit for bit. Images
and a native flatten's output convert here too (the loader, ``output_to_canonical``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import Workload

Convert = Callable[[np.ndarray], np.ndarray]


def _same(a: np.ndarray) -> np.ndarray:
    return a


def oihw_to_hwio(w: np.ndarray) -> np.ndarray:
    """Conv kernel (O, I, KH, KW) -> (KH, KW, I, O)."""
    return w.transpose(2, 3, 1, 0)


def hwio_to_oihw(w: np.ndarray) -> np.ndarray:
    """Conv kernel (KH, KW, I, O) -> (O, I, KH, KW)."""
    return w.transpose(3, 2, 0, 1)


def rows_chw_to_hwc(chw: tuple[int, int, int]) -> tuple[Convert, Convert]:
    """Both directions of the dense rows' permutation after a flatten of ``chw``."""
    c, h, w = chw

    def to_native(k: np.ndarray) -> np.ndarray:
        # (C*H*W, O) -> (C, H, W, O) -> (H, W, C, O) -> (H*W*C, O)
        return k.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)

    def to_canonical(k: np.ndarray) -> np.ndarray:
        # (H*W*C, O) -> (H, W, C, O) -> (C, H, W, O) -> (C*H*W, O)
        return k.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)

    return to_native, to_canonical


@dataclass(frozen=True)
class ParamLayout:
    """Per canonical name: the conversion to the native layout and back, and its name."""

    to_native: dict[str, Convert]
    to_canonical: dict[str, Convert]
    description: dict[str, str]

    @classmethod
    def for_workload(cls, workload: Workload) -> ParamLayout:
        """The conversions of ``workload``'s parameters (images channels-last)."""
        fwd: dict[str, Convert] = {}
        back: dict[str, Convert] = {}
        desc: dict[str, str] = {}
        prev: tuple[object, tuple] | None = None
        for node, in_shape, _ in walk(workload.graph, workload.input.shape):
            if isinstance(node, ops.Conv2D):
                name = f"{node.name}.kernel"
                fwd[name], back[name], desc[name] = oihw_to_hwio, hwio_to_oihw, "OIHW->HWIO"
            if isinstance(node, ops.Dense) and prev is not None:
                prev_node, prev_in = prev
                if isinstance(prev_node, ops.Flatten) and len(prev_in) == 3:
                    name = f"{node.name}.kernel"
                    fwd[name], back[name] = rows_chw_to_hwc(prev_in)
                    desc[name] = "rows CHW->HWC (NHWC flatten)"
            prev = (node, in_shape)
        return cls(fwd, back, desc)

    def native(self, name: str, value: np.ndarray, dtype: str) -> np.ndarray:
        """Canonical ``value`` of parameter ``name`` in the native layout, ``dtype``, contiguous."""
        return np.ascontiguousarray(self.to_native.get(name, _same)(value), dtype=dtype)

    def canonical(self, name: str, value: np.ndarray) -> np.ndarray:
        """Native ``value`` of parameter ``name`` back in the canonical layout (a fresh copy)."""
        return np.array(self.to_canonical.get(name, _same)(value), copy=True, order="C")


def image_to_native(x: np.ndarray) -> np.ndarray:
    """Canonical images (N, C, H, W) -> (N, H, W, C), contiguous."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def image_to_canonical(x: np.ndarray) -> np.ndarray:
    """Native images (N, H, W, C) -> (N, C, H, W), contiguous."""
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def flat_to_canonical(y: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """A native flatten's output (N, H*W*C) in the spec's channel-major order (N, C*H*W)."""
    c, h, w = chw
    # (N, H*W*C) -> (N, H, W, C) -> (N, C, H, W) -> (N, C*H*W)
    return y.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(len(y), -1)
