"""concat in Chainer: ``F.concat`` along the spec's axis + 1 (NCHW, the spec's layout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Concat, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import F

    axis = op.axis + 1
    return lambda *xs: F.concat(xs, axis=axis)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = F.concat(({parts}), axis={op.axis + 1})",))
