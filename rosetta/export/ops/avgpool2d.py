"""avgpool2d in ONNX: ``AveragePool`` with the spec's ``count_include_pad`` (ONNX's own flag:
1 divides each window by ``kh * kw``, padded zeros counted; 0 by its real cells)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.export.ops import onnx_pads
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.AvgPool2D, site: Site, ctx: Build) -> Emit:
    attrs = dict(
        kernel_shape=list(op.kernel),
        strides=list(op.stride),
        pads=onnx_pads(op.padding),
        count_include_pad=int(op.count_include_pad),
    )
    return lambda b, x: b.one("AveragePool", [x], **attrs)


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = AveragePool({{x}}, kernel_shape={list(op.kernel)}, strides={list(op.stride)}, "
        f"pads={onnx_pads(op.padding)}, count_include_pad={int(op.count_include_pad)})"
        f"  # {fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
