"""flatten in Paddle: ``nn.Flatten(start_axis=1)`` on NCHW activations: channel-major, the spec's
``CHW``, so the dense layer after it needs no row permutation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site, unsupported
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.Flatten, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    if op.order != "CHW":
        raise unsupported("paddle", op)
    return nn.Flatten(start_axis=1)  # (N, C, H, W) -> (N, C*H*W), channel-major


def render(op: ops.Flatten, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = paddle.flatten({{x}}, start_axis=1)  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}, channel-major as the spec"
    )
    return Snippet(forward=(line,))
