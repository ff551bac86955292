"""global_avgpool in Paddle: ``nn.AdaptiveAvgPool2D(1)`` then ``nn.Flatten``, (N, C, H, W) -> (N, C)
(the file writes the mean over H and W).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from paddle import nn

    from rosetta.backends.paddle.lowering import Build


def build(op: ops.GlobalAvgPool, site: Site, ctx: Build) -> nn.Layer:
    from rosetta.backends.paddle.lowering import nn

    # (N, C, H, W) -> (N, C)
    return nn.Sequential(nn.AdaptiveAvgPool2D(1), nn.Flatten(start_axis=1))


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    shapes = f"{fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
    return Snippet(forward=(f"{{x}} = {{x}}.mean(axis=[2, 3])  # {shapes}",))
