"""avgpool2d in NumPy: the reference layer ``layers.avgpool2d`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops


def build(op: ops.AvgPool2D, site: Site, ctx: None) -> Layer:
    return layers.avgpool2d(op.kernel, op.stride, op.padding, op.count_include_pad)


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    return layer_line(
        f"avgpool2d({op.kernel}, stride={op.stride}, padding={op.padding}, "
        f"count_include_pad={op.count_include_pad})",
        site,
    )
