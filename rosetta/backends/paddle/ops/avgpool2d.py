"""avgpool2d in Paddle: ``nn.AvgPool2D`` (``F.avg_pool2d`` in the file), asymmetric padding as
``[top, bottom, left, right]``; its ``exclusive`` is the negation of the spec's
``count_include_pad`` (exclusive: each window divided by its real cells).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.paddle.ops import pad_text, padding_arg, pair
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.AvgPool2D, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    return nn.AvgPool2D(
        op.kernel,
        op.stride,
        padding=padding_arg(op.padding),
        exclusive=not op.count_include_pad,  # Paddle's default (True) excludes padded cells
    )


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    args = [pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"stride={pair(op.stride)}")
    if any(op.padding):
        args.append(f"padding={pad_text(op.padding)}")
    args.append(f"exclusive={not op.count_include_pad}")  # True: divide by the real cells
    return Snippet(
        forward=(f"{{x}} = F.avg_pool2d({{x}}, {', '.join(args)})  # {fmt_shape(site.out_shape)}",)
    )
