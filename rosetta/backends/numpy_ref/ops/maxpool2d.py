"""maxpool2d in NumPy: the reference layer ``layers.maxpool2d`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops


def build(op: ops.MaxPool2D, site: Site, ctx: None) -> Layer:
    return layers.maxpool2d(op.kernel, op.stride, op.padding)


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(f"maxpool2d({op.kernel}, stride={op.stride}, padding={op.padding})", site)
