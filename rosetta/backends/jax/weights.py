"""Canonical <-> native layouts at the JAX backend's boundary.

Parameters (through ``set_params``/``get_params``), images (the loader's ``image_to_native``,
``batch_to_numpy``'s ``image_to_canonical``) and a native flatten's output (``run_op``).
Each parameter's rule lives with its op: an op module whose parameters JAX holds in another
layout than the spec's defines ``param_layout(op, layout, prev)`` (``ops/conv2d.py``: the
kernel ``OIHW`` -> ``HWIO`` in NHWC; ``ops/dense.py``: a kernel's rows ``C, H, W`` -> ``H, W,
C`` after an NHWC flatten); :class:`ParamLayout` walks the graph and gathers them through
``OPS.module(op)``. Every other parameter (biases, BatchNorm vectors, the embedding and position
tables, the GRU's and attention's kernels) keeps the canonical layout.

Each conversion is a pure permutation, so ``to_canonical(to_native(p)) == p`` bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rosetta.backends.binding import Convert
from rosetta.backends.jax.source import OPS
from rosetta.spec.graph import walk_wired
from rosetta.spec.workload import Workload


def _ident(a: np.ndarray) -> np.ndarray:
    return a


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
        for node, in_shape, _, wired in walk_wired(workload.graph, workload.input.shape):
            rule = getattr(OPS.module(node), "param_layout", None)  # none: canonical as is
            if rule is not None:
                for name, (to_native, to_canonical, what) in rule(node, layout, prev).items():
                    fwd[name], back[name], desc[name] = to_native, to_canonical, what
            # a wired graph's flatten is channel-major itself (ops/flatten.py): nothing to permute
            prev = None if wired else (node, in_shape)
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
