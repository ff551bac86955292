"""conv2d in ONNX: ``Conv`` (kernel OIHW, as stored; pads as ONNX's begin/end lists)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, Weight, fmt_shape
from rosetta.export.ops import onnx_pads
from rosetta.spec import ops

if TYPE_CHECKING:  # graph.py imports onnx; build() imports what it needs
    from rosetta.export.graph import Build, Emit


def build(op: ops.Conv2D, site: Site, ctx: Build) -> Emit:
    inputs = [f"{op.name}.kernel", *([f"{op.name}.bias"] if op.bias else [])]
    attrs = dict(kernel_shape=list(op.kernel), strides=list(op.stride), pads=onnx_pads(op.padding))
    if op.groups != 1:
        attrs["group"] = op.groups
    return lambda b, x: b.one("Conv", [x, *inputs], **attrs)


def render(op: ops.Conv2D, site: Site, ctx: RenderCtx) -> Snippet:
    bias = f", {op.name}.bias" if op.bias else ""
    line = (
        f"{{x}} = Conv({{x}}, {op.name}.kernel{bias}, kernel_shape={list(op.kernel)}, "
        f"strides={list(op.stride)}, pads={onnx_pads(op.padding)}"
        f"{f', group={op.groups}' if op.groups != 1 else ''})  # {fmt_shape(site.out_shape)}"
    )
    w = [Weight(f"{op.name}.kernel", f"{op.name}.kernel", note="OIHW, as stored")]
    if op.bias:
        w.append(Weight(f"{op.name}.bias", f"{op.name}.bias"))
    return Snippet(forward=(line,), weights=tuple(w))
