"""maxpool2d in ONNX: ``MaxPool`` (ONNX ignores padded cells, as the spec's -inf)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.export.ops import onnx_pads
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.MaxPool2D, site: Site, ctx: Build) -> Emit:
    # ONNX's MaxPool ignores padded cells (as -inf): the spec's rule
    attrs = dict(kernel_shape=list(op.kernel), strides=list(op.stride), pads=onnx_pads(op.padding))
    return lambda b, x: b.one("MaxPool", [x], **attrs)


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = MaxPool({{x}}, kernel_shape={list(op.kernel)}, strides={list(op.stride)}, "
        f"pads={onnx_pads(op.padding)})  # padded cells never win"
    )
    return Snippet(forward=(line,))
