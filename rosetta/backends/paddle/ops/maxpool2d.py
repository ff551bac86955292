"""maxpool2d in Paddle: ``nn.MaxPool2D`` (``F.max_pool2d`` in the file), asymmetric padding as
``[top, bottom, left, right]``; padded cells are outside the window, never selected, as the spec.
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


def build(op: ops.MaxPool2D, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    # padded cells are outside the window for Paddle's max pooling: never selected, as the spec
    return nn.MaxPool2D(op.kernel, op.stride, padding=padding_arg(op.padding))


def render(op: ops.MaxPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    args = [pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"stride={pair(op.stride)}")
    if any(op.padding):
        args.append(f"padding={pad_text(op.padding)}")  # padded cells are never selected
    return Snippet(
        forward=(f"{{x}} = F.max_pool2d({{x}}, {', '.join(args)})  # {fmt_shape(site.out_shape)}",)
    )
