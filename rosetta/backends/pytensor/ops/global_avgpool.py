"""global_avgpool in PyTensor: the mean over H and W of the NHWC activations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet, fmt_shape, nhwc
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.pytensor.lowering import Ctx, Layer


def build(op: ops.GlobalAvgPool, site: Site, ctx: Ctx) -> Layer:
    import pytensor.tensor as pt

    return lambda x, run: pt.mean(x, axis=(1, 2))  # (N, H, W, C) -> (N, C)


def render(op: ops.GlobalAvgPool, site: Site, ctx: RenderCtx) -> Snippet:
    line = (
        f"{{x}} = {{x}}.mean(axis=(1, 2))  # {fmt_shape(nhwc(site.in_shape))} -> "
        f"{fmt_shape(site.out_shape)}"
    )
    return Snippet(forward=(line,))
