"""concat in Chainer: ``F.concat`` (``lowering.Concat``) along the spec's axis + 1 (NCHW, the
spec's layout; batch-major sequences), except a sequence's time axis where the model runs
time-major (an unmasked token model: ``lowering.SequenceLayout``), ``0``. The generated file is
batch-major throughout: axis + 1. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.chainer.lowering import Ctx


def build(op: ops.Concat, site: Site, ctx: Ctx):
    from rosetta.backends.chainer.lowering import Concat

    return Concat(op.axis, len(site.in_shape), ctx.layout)


def render(op: ops.Concat, site: Site, ctx: RenderCtx) -> Snippet:
    parts = ", ".join(f"{{x{i}}}" for i in range(len(site.in_shapes)))
    return Snippet(forward=(f"{{x}} = F.concat(({parts}), axis={op.axis + 1})",))
