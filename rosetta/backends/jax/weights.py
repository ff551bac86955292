"""Canonical <-> native layouts: every conversion of the JAX backend lives here.

Parameters (through ``set_params``/``get_params``), images (the loader's ``image_to_native``,
``batch_to_numpy``'s ``image_to_canonical``) and a native flatten's output (``run_op``).
Parameters, canonical (the spec's, ``rosetta.spec.ops``) -> native (``lowering.py``'s):

- conv2d kernel ``OIHW`` -> ``HWIO`` when images run NHWC (unchanged in NCHW);
- the dense layer right after a flatten of ``(C, H, W)``: its rows are in the spec's
  channel-major ``C, H, W`` order, while an NHWC flatten yields ``H, W, C``; the rows are
  permuted once here so that the forward pass never transposes activations;
- GRU kernels (``E,3H``, ``H,3H``, gate blocks ``z | r | h``) and both biases: the lowering uses
  the canonical layout and equations as they are, so no conversion;
- everything else (biases, BatchNorm vectors, the embedding table ``VE``) as is.

Each conversion is a pure permutation, so ``to_canonical(to_native(p)) == p`` bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rosetta.spec import ops
from rosetta.spec.graph import walk
from rosetta.spec.workload import Workload

Convert = Callable[[np.ndarray], np.ndarray]


def _ident(a: np.ndarray) -> np.ndarray:
    return a


def _oihw_to_hwio(w: np.ndarray) -> np.ndarray:
    return w.transpose(2, 3, 1, 0)  # (O, I, KH, KW) -> (KH, KW, I, O)


def _hwio_to_oihw(w: np.ndarray) -> np.ndarray:
    return w.transpose(3, 2, 0, 1)  # (KH, KW, I, O) -> (O, I, KH, KW)


def _rows_chw_to_hwc(chw: tuple[int, int, int]) -> tuple[Convert, Convert]:
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
    """Per canonical name: the conversion to the native layout and back."""

    to_native: dict[str, Convert]
    to_canonical: dict[str, Convert]
    description: dict[str, str]  # name -> "OIHW->HWIO" etc., for the summary

    @classmethod
    def for_workload(cls, workload: Workload, layout: str) -> ParamLayout:
        """The conversions of ``workload``'s parameters for images in ``layout``."""
        fwd: dict[str, Convert] = {}
        back: dict[str, Convert] = {}
        desc: dict[str, str] = {}
        prev: tuple[object, tuple] | None = None
        for node, in_shape, _ in walk(workload.graph, workload.input.shape):
            if isinstance(node, ops.Conv2D) and layout == "NHWC":
                name = f"{node.name}.kernel"
                fwd[name], back[name], desc[name] = _oihw_to_hwio, _hwio_to_oihw, "OIHW->HWIO"
            if isinstance(node, ops.Dense) and layout == "NHWC" and prev is not None:
                prev_node, prev_in = prev
                if isinstance(prev_node, ops.Flatten) and len(prev_in) == 3:
                    name = f"{node.name}.kernel"
                    fwd[name], back[name] = _rows_chw_to_hwc(prev_in)
                    desc[name] = "rows CHW->HWC (NHWC flatten)"
            prev = (node, in_shape)
        return cls(fwd, back, desc)

    def native(self, name: str, value: np.ndarray) -> np.ndarray:
        """Canonical array ``value`` of parameter ``name`` in the native layout (contiguous)."""
        return np.ascontiguousarray(self.to_native.get(name, _ident)(value))

    def canonical(self, name: str, value: np.ndarray) -> np.ndarray:
        """Native array ``value`` of parameter ``name`` back in the canonical layout (a copy)."""
        return np.array(self.to_canonical.get(name, _ident)(value), copy=True, order="C")


def image_to_native(x: np.ndarray, layout: str) -> np.ndarray:
    """Canonical images (N, C, H, W) in the native layout, contiguous."""
    if layout == "NHWC":
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # (N, C, H, W) -> (N, H, W, C)
    return np.ascontiguousarray(x)


def image_to_canonical(x: np.ndarray, layout: str) -> np.ndarray:
    """Native images back to the canonical (N, C, H, W)."""
    if layout == "NHWC":
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))  # (N, H, W, C) -> (N, C, H, W)
    return np.ascontiguousarray(x)


def flat_to_canonical(y: np.ndarray, chw: tuple[int, int, int], layout: str) -> np.ndarray:
    """A native flatten's output (N, H*W*C) back in the spec's channel-major order (N, C*H*W)."""
    if layout != "NHWC":
        return y
    c, h, w = chw
    # (N, H*W*C) -> (N, H, W, C) -> (N, C, H, W) -> (N, C*H*W)
    return y.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(len(y), -1)
