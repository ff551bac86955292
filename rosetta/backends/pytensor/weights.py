"""Canonical <-> native layouts: the conversions of a workload's parameters, and of images.

The graphs compute images channels-last (``NHWC``, ``lowering.py``), so some parameters are
stored in another layout than the spec's: each op module with parameters says which, in its
``layout(op, prev)`` (``ops/<op>.py``: the conv2d kernel OIHW -> HWIO, a dense kernel's rows
after a flatten C, H, W -> H, W, C; every other parameter as is). :class:`ParamLayout` collects
them for a workload, looking each op's module up in the one table (``source.OPS``), and applies
them when parameters are set and read. Each conversion is a permutation, so
``to_canonical(to_native(p)) == p`` bit for bit. Images and a native flatten's output convert
here too (the loader, ``output_to_canonical``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rosetta.backends.pytensor.ops import Convert, Prev
from rosetta.backends.pytensor.source import OPS
from rosetta.spec.graph import walk_wired
from rosetta.spec.workload import Workload


def _same(a: np.ndarray) -> np.ndarray:
    return a


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
        prev: Prev = None
        for node, in_shape, _, wired in walk_wired(workload.graph, workload.input.shape):
            layout = getattr(OPS.module(node), "layout", None)  # None: a parameter-free op
            if layout is not None:
                for name, rule in layout(node, prev).items():  # only what is not as is
                    fwd[name], back[name], desc[name] = rule
            # a wired graph's flatten is channel-major itself (ops/flatten.py): nothing to permute
            prev = None if wired else (node, in_shape)
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
