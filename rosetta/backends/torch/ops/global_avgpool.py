"""global_avgpool in PyTorch: ``AdaptiveAvgPool2d(1)`` then ``Flatten``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from torch import nn

    from rosetta.backends.torch.lowering import Build


def build(op: ops.GlobalAvgPool, site: Site, ctx: Build) -> nn.Module:
    from torch import nn

    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))  # (N, C, H, W) -> (N, C)


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    shapes = f"{fmt_shape(site.in_shape)} -> {fmt_shape(site.out_shape)}"
    line = f"{{x}} = {{x}}.mean(dim=(2, 3))  # {shapes}"
    return Snippet(forward=(line,))
