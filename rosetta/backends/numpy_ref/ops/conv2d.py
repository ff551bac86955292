"""conv2d in NumPy: the reference layer ``layers.conv2d`` (forward and backward side
by side) and the same layer as a line of the generated plain-NumPy file. No layout changes.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.numpy_ref import layers
from rosetta.backends.numpy_ref.layers import Layer
from rosetta.backends.numpy_ref.ops import layer_line, owned
from rosetta.backends.snippet import RenderCtx, Snippet, q
from rosetta.spec import ops


def build(op: ops.Conv2D, site: Site, ctx: None) -> Layer:
    return layers.conv2d(op.name, op.stride, op.padding, op.bias, op.groups)


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    groups = f", groups={op.groups}" if op.groups != 1 else ""
    call = f"conv2d({q(op.name)}, stride={op.stride}, padding={op.padding}, bias={op.bias}{groups})"
    return layer_line(call, site, owned(op, ("kernel", "bias") if op.bias else ("kernel",)))
