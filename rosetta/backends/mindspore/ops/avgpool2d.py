"""avgpool2d in MindSpore: ``nn.AvgPool2d`` with ``count_include_pad`` (``lowering.AvgPool2d``:
asymmetric padding as a zero pad first, divided by the real cells where they alone count).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.mindspore.ops import pair
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from mindspore import nn

    from rosetta.backends.mindspore.lowering import Build


def build(op: ops.AvgPool2D, site: Site, ctx: Build) -> nn.Cell:
    from rosetta.backends.mindspore.lowering import AvgPool2d

    return AvgPool2d(op.kernel, op.stride, op.padding, op.count_include_pad, ctx.ms_dtype)


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    t, b, left, right = op.padding
    k, s = pair(op.kernel), pair(op.stride)
    if (t, left) == (b, right):
        pad = f', pad_mode="pad", padding=({t}, {left})' if t or left else ""
        line = (f"{{x}} = ops.avg_pool2d({{x}}, {k}, {s}{pad}, "
                f"count_include_pad={op.count_include_pad})  # {fmt_shape(site.out_shape)}")  # fmt: skip
        return Snippet(forward=(line,))
    return Snippet(
        forward=(f"{{x}} = avg_pool_asym({{x}}, {k}, {s}, ({left}, {right}, {t}, {b}), "
                 f"{op.count_include_pad})  # {fmt_shape(site.out_shape)}",),  # fmt: skip
        helpers=("avg_pool_asym",),
    )
