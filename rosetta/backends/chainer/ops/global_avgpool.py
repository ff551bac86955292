"""global_avgpool in Chainer: ``F.mean`` over the spatial axes, (N, C, H, W) -> (N, C). No
parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape
from rosetta.spec import ops

if TYPE_CHECKING:  # Chainer is imported by build() alone (lowering.py imports it)
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.GlobalAvgPool, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import _spatial_mean

    return _spatial_mean


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = F.average({{x}}, axis=(2, 3))  # {fmt_shape(site.in_shape)} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
